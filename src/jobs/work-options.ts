import { z } from "zod";
import type { Duration } from "../duration.js";
import { duration, fn, parseOptions, positiveInteger, type Check, type OptionShape, type Takes } from "../option-schema.js";

/** What `work()` takes, its defaults beside its schema, and what it resolves to: the worker's own options. */

export interface WorkOptions {
  /** Drain the jobs that are ready now, then return a summary (default: run until stop()). */
  readonly once?: boolean;
  /** Jobs run at the same time by this worker; default 10. */
  readonly concurrency?: number;
  /** Queues to serve; default: every queue of the registered jobs and schedule entries, plus "default". */
  readonly queues?: readonly string[];
  /** Most jobs claimed in one statement; default 500. Claims shrink to the free slots when jobs are slow. */
  readonly batchSize?: number;
  /** How often an idle worker looks for jobs that LISTEN/NOTIFY cannot announce (delayed jobs, retries); default 1 s. */
  readonly pollInterval?: Duration;
  /** Running jobs without a heartbeat for this long are reaped; heartbeats go every lease/3. Default: the ledger's lease. */
  readonly lease?: Duration;
  /**
   * How long a claim may go unanswered before the worker claims again without
   * waiting for it (its rows, if it ever answers, still run); default 5 s.
   */
  readonly claimTimeout?: Duration;
  /** On stop(), how long running jobs may take to finish before their signal is aborted; default 25 s. */
  readonly gracePeriod?: Duration;
  /** Test hook: the clock that decides which jobs are due and when retries run (default: the database clock). */
  readonly clock?: () => Date;
  /** Test hook: the random source of retry jitter. */
  readonly random?: () => number;
}

/** How long a running job may go without a heartbeat before the reaper takes it back (createCronledger's `lease`, each worker's default). */
export const DEFAULT_LEASE_MS = 30_000;
export const DEFAULT_CONCURRENCY = 10;
export const DEFAULT_BATCH_SIZE = 500;
export const DEFAULT_POLL_INTERVAL_MS = 1_000;
/**
 * A claim answers in milliseconds (it skips locked rows, so it waits on
 * nobody); one unanswered for 5 s is stuck (a connection that did not come
 * back from an outage), and with one claim in flight an idle worker would
 * claim nothing until it answered. Claiming again costs one more statement;
 * the late claim's rows still run.
 */
export const DEFAULT_CLAIM_TIMEOUT_MS = 5_000;
export const DEFAULT_GRACE_PERIOD_MS = 25_000;

/** The options a worker shares with start(), which runs workers too. */
export const workerShape = {
  concurrency: positiveInteger().default(DEFAULT_CONCURRENCY),
  queues: z.array(z.string().min(1, "must not be empty")).min(1, "needs at least one queue").readonly().optional(),
  batchSize: positiveInteger().default(DEFAULT_BATCH_SIZE),
  pollInterval: duration("pollInterval").default(DEFAULT_POLL_INTERVAL_MS),
  lease: duration("lease").optional(),
  claimTimeout: duration("claimTimeout").default(DEFAULT_CLAIM_TIMEOUT_MS),
  gracePeriod: duration("gracePeriod").default(DEFAULT_GRACE_PERIOD_MS),
  clock: fn<() => Date>().optional(),
  random: fn<() => number>().optional(),
} satisfies OptionShape<Omit<WorkOptions, "once">>;
type _WorkerShapeTakesWorkOptions = Check<Takes<Omit<WorkOptions, "once">, typeof workerShape>>;

/** The worker's part of a parsed work() or start() options object, under the names the worker uses. */
export function resolveWorkerShape(parsed: z.output<z.ZodObject<typeof workerShape>>) {
  return {
    concurrency: parsed.concurrency,
    /** Undefined: the worker's default queues. */
    queues: parsed.queues,
    batchSize: parsed.batchSize,
    pollMs: parsed.pollInterval,
    /** Undefined: the ledger's lease. */
    leaseMs: parsed.lease,
    claimTimeoutMs: parsed.claimTimeout,
    graceMs: parsed.gracePeriod,
    clock: parsed.clock,
    random: parsed.random,
  } as const;
}

const workShape = { ...workerShape, once: z.boolean().default(false) } satisfies OptionShape<WorkOptions>;
type _WorkShapeTakesWorkOptions = Check<Takes<WorkOptions, typeof workShape>>;
const workSchema = z.strictObject(workShape).transform((parsed) => ({
  ...resolveWorkerShape(parsed),
  once: parsed.once,
}));

export type ResolvedWorkOptions = z.output<typeof workSchema>;

export function resolveWorkOptions(options: WorkOptions | undefined): ResolvedWorkOptions {
  return parseOptions(workSchema, options, "work() options");
}

/** What a worker is given: its resolved options, the queues it serves and its lease. */
export interface WorkerSettings extends Omit<ResolvedWorkOptions, "queues" | "leaseMs"> {
  readonly queues: readonly string[];
  readonly leaseMs: number;
  /** The namespace it registers under (src/db/sql/workers.ts). */
  readonly namespace: string;
  /**
   * cronledger's chores this worker serves: claimed ahead of ordinary jobs
   * and run outside its `concurrency` slots, so neither a backlog nor long
   * jobs can keep the reaper from running.
   */
  readonly chores?: { readonly queue: string; readonly jobNames: readonly string[] } | undefined;
  /**
   * How long a handler asked to stop (cancelJob on a running job) may run on
   * after its signal is aborted before its job is failed as killed; default
   * DEFAULT_STOP_GRACE_MS (createCronledger's `stopGrace`).
   */
  readonly stopGraceMs?: number;
}

import type { Registry } from "prom-client";
import { z } from "zod";
import type { PGlite } from "@electric-sql/pglite";
import { isPglite, type Database, type DatabaseSetting } from "./db/connection.js";
import { parseDuration, type Duration } from "./duration.js";
import { ConfigError, InvalidArgumentError } from "./errors.js";
import type { CronledgerHooks } from "./events.js";
import { isJobDefinition, type JobDefinition } from "./jobs/define-job.js";
import { DEFAULT_MAX_PAYLOAD_BYTES, JSONB_MAX_BYTES } from "./jobs/payload-limit.js";
import type { RetentionOptions, ResolvedRetention } from "./operators/operations.js";
import { RETRY_CLASSES, type RetryClass } from "./jobs/retry.js";
import type { RetryOverride, StoredRetryPolicy } from "./jobs/retry-override.js";
import type { Logger } from "./log.js";
import type { ScheduleEntry } from "./schedule/define-schedule.js";
import { describeShapeIssues } from "./suggest.js";

/**
 * Every options object cronledger takes, as one strict zod schema each:
 * createCronledger's, work()'s, start()'s and the config file's. Each parse
 * rejects unknown keys with a did-you-mean, checks every value, and yields
 * resolved values (durations in milliseconds, defaults filled in), so the
 * rest of the code never parses an option again. It is long because it is
 * the whole catalogue: the documented option types, their defaults and
 * their schemas side by side.
 */

// ---------------------------------------------------------------- the option types users write

export interface ChoreOptions {
  /** When the reaper runs (a 6-field cron); default every 15 seconds. */
  readonly reapCron?: string;
  /** When the prune chore runs; default hourly. */
  readonly pruneCron?: string;
  /** How long finished jobs are kept before the prune chore deletes them. */
  readonly retention?: RetentionOptions;
  /**
   * How long a ledger row may go without any process evaluating it (no pass
   * wrote it, no running schedule has it) before the prune chore deletes it;
   * default 7 days: longer than any rolling deploy, whose two versions must
   * not prune each other's entries.
   */
  readonly ledgerGrace?: Duration;
  /**
   * A queued job whose name no live worker has registered is failed with
   * JobNotRegisteredError once it has waited this long (a job that can
   * never run); until then it waits for a worker that knows it. Default 7
   * days; false: never.
   */
  readonly failUnregisteredAfter?: Duration | false;
}

/**
 * - `undefined` (default): chores run wherever `start()` runs; a bare `tick()` leaves them out.
 * - `true` / options: chores are part of every tick, `start()` or not.
 * - `false`: no chores (reap and prune yourself, e.g. with `reap()` and `prune()`).
 */
export type ChoresSetting = boolean | ChoreOptions | undefined;

export interface CronledgerOptions {
  /**
   * PostgreSQL URL; omitted: DATABASE_URL, else embedded PGlite in ./.cronledger ("memory://" for in-memory).
   * An already-open Database (from openDatabase) is shared, and close() leaves it open.
   */
  readonly database?: DatabaseSetting | Database;
  readonly jobs?: readonly JobDefinition[];
  readonly schedule?: readonly ScheduleEntry[];
  /** Separates apps sharing one database: each prunes and evaluates only its own ledger rows. */
  readonly namespace?: string;
  /**
   * Where cronledger's log lines go; default: the console. Any object with
   * debug/info/warn/error taking `(message, fields)` (console, winston), or
   * a pino logger, which takes `(fields, message)` and is called that way.
   */
  readonly logger?: Logger;
  /** Listeners for ticks and job attempts (metrics, logs, the demo's event lines). */
  readonly hooks?: CronledgerHooks | readonly CronledgerHooks[];
  /** Prometheus metrics, on by default in a Registry of their own (`ledger.metrics.registry`); pass yours to share it, or false to turn them off. */
  readonly metrics?: { readonly registry?: Registry } | false;
  /**
   * The reaper and prune chores, run as ledger entries (each slot once across
   * the cluster). Default: on wherever `start()` runs, left out of bare
   * `tick()` calls; `true` or options: always; `false`: never.
   */
  readonly chores?: ChoresSetting;
  /** A running job without a heartbeat for this long is reaped; default 30 s. Heartbeats go every lease/3. */
  readonly lease?: Duration;
  /**
   * Largest payload, in bytes of its stored JSON, that enqueue, enqueueMany and
   * schedule entries accept; default 1 MiB (1048576). Larger ones are refused
   * with a PayloadTooLargeError before anything is written.
   */
  readonly maxPayloadBytes?: number;
  /**
   * What a schedule with invalid entries does (an invalid cron, an unregistered job, a bad payload, a duplicate...).
   * `"quarantine"` (default): the valid entries run; each invalid one is logged, listed as broken with its
   * problems in the status, on the Schedule page and in `cronledger status`, and counted in
   * `cronledger_schedule_entries{state="invalid"}`. `"fail"`: createCronledger throws one
   * ScheduleValidationError listing every problem, and nothing runs (fail fast; `cronledger preflight` in CI
   * catches the same problems before a deploy).
   */
  readonly invalidEntries?: InvalidEntriesMode;
  /** The catch-up window of every schedule entry that sets none (an entry's own `catchUpWindow` wins); default 24 h, floored at 2 minutes. */
  readonly catchUpWindow?: Duration;
  /**
   * How long one statement of a scheduler pass may run before the server is
   * asked to cancel it; default 10 s. A pass that hits it fails as a
   * transient TickError naming its phase, and the next pass tries again.
   */
  readonly passTimeout?: Duration;
  /** Defaults for `cronledger worker`; its --concurrency and --queues flags override them. The ledger itself ignores them. */
  readonly worker?: {
    readonly concurrency?: number;
    readonly queues?: readonly string[];
  };
  /**
   * The admin HTTP server `cronledger worker` starts (status, failures, Schedule page, /metrics).
   * Its --admin-port flag overrides `port`; the token defaults to CRONLEDGER_ADMIN_TOKEN. Without
   * a token it only binds loopback. The ledger itself ignores it.
   */
  readonly admin?: {
    readonly port?: number;
    /** Interface to bind; default 127.0.0.1. */
    readonly host?: string;
    readonly token?: string;
  };
}

export type InvalidEntriesMode = "quarantine" | "fail";

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

export interface StartOptions extends Omit<WorkOptions, "once"> {
  /** Run the scheduler ticker in this process; default true (every replica may tick: the ledger dedupes). */
  readonly ticker?: boolean;
  /** Run workers in this process; default true. */
  readonly workers?: boolean;
  /** Stop gracefully on SIGTERM / SIGINT, then close the database and re-raise the signal; default true. */
  readonly handleSignals?: boolean;
  /** Longest sleep between ticks, so a replica notices other replicas' progress; default 30 s. */
  readonly maxTickInterval?: Duration;
}

// ---------------------------------------------------------------- defaults

export const DEFAULT_NAMESPACE = "default";
export const DEFAULT_LEASE_MS = 30_000;
export const DEFAULT_RETENTION_MS = 7 * 86_400_000;
export const DEFAULT_RETENTION_BATCH_SIZE = 1_000;
export const DEFAULT_REAP_CRON = "*/15 * * * * *";
export const DEFAULT_PRUNE_CRON = "7 * * * *";
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
export const DEFAULT_MAX_TICK_INTERVAL_MS = 30_000;
export const DEFAULT_INVALID_ENTRIES: InvalidEntriesMode = "quarantine";
export const DEFAULT_LEDGER_GRACE_MS = 7 * 86_400_000;
export const DEFAULT_FAIL_UNREGISTERED_AFTER_MS = 7 * 86_400_000;
export const DEFAULT_PASS_TIMEOUT_MS = 10_000;

// ---------------------------------------------------------------- building blocks

const duration = (what: string) =>
  z.union([z.number(), z.string()], { error: 'must be a duration such as "30s" or a number of milliseconds' }).transform((value, context) => {
    try {
      return parseDuration(value, what);
    } catch (error) {
      context.addIssue({ code: "custom", message: error instanceof Error ? error.message : String(error) });
      return z.NEVER;
    }
  });
const positiveInteger = () =>
  z.number({ error: "must be a positive integer" }).int("must be a positive integer").min(1, "must be a positive integer");
const fn = <T>() => z.custom<T>((value) => typeof value === "function", { error: "must be a function" });
const object = <T>(what: string, check: (value: object) => boolean) =>
  z.custom<T>((value) => typeof value === "object" && value !== null && check(value), { error: what });
const NAMESPACE = /^[A-Za-z0-9_.:-]{1,64}$/;

const retentionSchema = z.strictObject({
  succeeded: duration("retention.succeeded").default(DEFAULT_RETENTION_MS),
  failed: duration("retention.failed").default(DEFAULT_RETENTION_MS),
  batchSize: positiveInteger().default(DEFAULT_RETENTION_BATCH_SIZE),
});

const choresSchema = z.union([
  z.boolean(),
  z.strictObject({
    reapCron: z.string().min(1).optional(),
    pruneCron: z.string().min(1).optional(),
    retention: retentionSchema.optional(),
    ledgerGrace: duration("chores.ledgerGrace").optional(),
    failUnregisteredAfter: z.union([z.literal(false), duration("chores.failUnregisteredAfter")]).optional(),
  }),
]);

const databaseSetting = z.union(
  [
    z.string(),
    z.strictObject({
      url: z.string(),
      poolSize: z.number().int().min(2, "must be at least 2: migrations hold one connection for their lock while another applies them").optional(),
      clientConnectionCheck: z.union([z.literal(false), z.number(), z.custom<Duration>((value) => typeof value === "string")]).optional(),
      reconnectDelay: z.union([z.number(), z.custom<Duration>((value) => typeof value === "string")]).optional(),
      pooler: z.literal("pgbouncer", { error: 'must be "pgbouncer"' }).optional(),
      listenUrl: z.string().optional(),
    }),
    object<Database>("an open Database", (value) => "db" in value && "kind" in value),
    z.custom<PGlite>(isPglite),
  ],
  { error: 'must be a URL ("postgres://...", "memory://", "pglite:<dir>"), { url, poolSize?, clientConnectionCheck?, reconnectDelay?, pooler?, listenUrl? }, a PGlite instance or an open Database' },
);

const hooksObject = object<CronledgerHooks>("must be an object of listener functions", () => true);

const cronledgerShape = {
  database: databaseSetting.optional(),
  jobs: z.array(z.custom<JobDefinition>(isJobDefinition, { error: "must be a defineJob() result" })).default([]),
  schedule: z.array(z.unknown(), { error: "must be an array of entries (defineSchedule([...]))" }).default([]),
  namespace: z
    .string()
    .regex(NAMESPACE, "must be 1-64 letters, digits and . _ : -")
    .default(DEFAULT_NAMESPACE),
  logger: object<Logger>("must have debug, info, warn and error methods", (value) =>
    ["debug", "info", "warn", "error"].every((level) => typeof (value as Record<string, unknown>)[level] === "function"),
  ).optional(),
  hooks: z.union([hooksObject, z.array(hooksObject)]).optional(),
  metrics: z
    .union([
      z.literal(false),
      z.strictObject({ registry: object<Registry>("must be a prom-client Registry", (value) => "registerMetric" in value).optional() }),
    ])
    .optional(),
  chores: choresSchema.optional(),
  lease: duration("lease").default(DEFAULT_LEASE_MS),
  maxPayloadBytes: positiveInteger()
    .max(JSONB_MAX_BYTES, `must be at most ${JSONB_MAX_BYTES}, PostgreSQL's jsonb limit`)
    .default(DEFAULT_MAX_PAYLOAD_BYTES),
  invalidEntries: z.enum(["quarantine", "fail"], { error: 'must be "quarantine" (run the valid entries, show the invalid ones as broken) or "fail" (throw)' }).default(DEFAULT_INVALID_ENTRIES),
  catchUpWindow: duration("catchUpWindow").optional(),
  passTimeout: duration("passTimeout")
    .refine((ms) => ms >= 1, "must be at least 1 ms")
    .default(DEFAULT_PASS_TIMEOUT_MS),
  // The CLI's settings: accepted here too, so a config file's object can be passed to createCronledger as it is.
  worker: z
    .strictObject({
      concurrency: positiveInteger().max(10_000, "must be at most 10000").optional(),
      queues: z.array(z.string().min(1)).min(1, "needs at least one queue").optional(),
    })
    .optional(),
  admin: z
    .strictObject({
      port: z.number().int().min(0).max(65_535, "must be a port number from 0 to 65535").optional(),
      host: z.string().min(1).optional(),
      token: z.string().optional(),
    })
    .optional(),
};

const workShape = {
  concurrency: positiveInteger().default(DEFAULT_CONCURRENCY),
  queues: z.array(z.string().min(1, "must not be empty")).min(1, "needs at least one queue").optional(),
  batchSize: positiveInteger().default(DEFAULT_BATCH_SIZE),
  pollInterval: duration("pollInterval").default(DEFAULT_POLL_INTERVAL_MS),
  lease: duration("lease").optional(),
  claimTimeout: duration("claimTimeout").default(DEFAULT_CLAIM_TIMEOUT_MS),
  gracePeriod: duration("gracePeriod").default(DEFAULT_GRACE_PERIOD_MS),
  clock: fn<() => Date>().optional(),
  random: fn<() => number>().optional(),
};

const workSchema = z.strictObject({ ...workShape, once: z.boolean().default(false) });
const startSchema = z.strictObject({
  ...workShape,
  ticker: z.boolean().default(true),
  workers: z.boolean().default(true),
  handleSignals: z.boolean().default(true),
  maxTickInterval: duration("maxTickInterval").default(DEFAULT_MAX_TICK_INTERVAL_MS),
});

const configSchema = z.strictObject({
  ...cronledgerShape,
  database: databaseSetting.optional(),
  jobs: z.array(z.custom<JobDefinition>(isJobDefinition, { error: "must be a defineJob() result" }), { error: "must be an array of defineJob() results" }),
});

// ---------------------------------------------------------------- resolved values

export interface ResolvedChores {
  /** `start`: ticked where start() runs; `always`: in every tick; `never`. */
  readonly when: "start" | "always" | "never";
  readonly reapCron: string;
  readonly pruneCron: string;
  readonly retention: ResolvedRetention;
  readonly ledgerGraceMs: number;
  readonly failUnregisteredAfterMs: number | false;
}

export interface ResolvedCronledgerOptions {
  readonly database: DatabaseSetting | Database | undefined;
  readonly jobs: readonly JobDefinition[];
  readonly schedule: readonly unknown[];
  readonly namespace: string;
  readonly logger: Logger | undefined;
  readonly hooks: readonly CronledgerHooks[];
  readonly metrics: { readonly registry?: Registry | undefined } | false;
  readonly chores: ResolvedChores;
  readonly leaseMs: number;
  readonly maxPayloadBytes: number;
  readonly invalidEntries: InvalidEntriesMode;
  /** Undefined: entries without their own window get DEFAULT_CATCH_UP_WINDOW_MS (src/schedule/validate.ts). */
  readonly catchUpWindowMs: number | undefined;
  readonly passTimeoutMs: number;
}

export interface ResolvedWorkOptions {
  readonly once: boolean;
  readonly concurrency: number;
  /** Undefined: the worker's default queues. */
  readonly queues: readonly string[] | undefined;
  readonly batchSize: number;
  readonly pollMs: number;
  /** Undefined: the ledger's lease. */
  readonly leaseMs: number | undefined;
  readonly claimTimeoutMs: number;
  readonly graceMs: number;
  readonly clock: (() => Date) | undefined;
  readonly random: (() => number) | undefined;
}

export interface ResolvedStartOptions extends Omit<ResolvedWorkOptions, "once"> {
  readonly ticker: boolean;
  readonly workers: boolean;
  readonly handleSignals: boolean;
  readonly maxTickMs: number;
}

/** The parsed config file: the createCronledger options plus the CLI worker's and admin server's settings. */
export type ParsedConfig = z.output<typeof configSchema>;

/** Parses `value` with `schema`, or throws one ConfigError listing every problem, unknown keys with a did-you-mean. */
function parse<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const result = schema.safeParse(value ?? {});
  if (result.success) return result.data;
  throw new ConfigError(`Invalid ${what}: ${describeShapeIssues(result.error, schema, { noun: "option" })}.`);
}

function resolveChores(chores: z.output<typeof choresSchema> | undefined): ResolvedChores {
  const options = typeof chores === "object" ? chores : {};
  const retention = options.retention ?? { succeeded: DEFAULT_RETENTION_MS, failed: DEFAULT_RETENTION_MS, batchSize: DEFAULT_RETENTION_BATCH_SIZE };
  return {
    when: chores === undefined ? "start" : chores === false ? "never" : "always",
    reapCron: options.reapCron ?? DEFAULT_REAP_CRON,
    pruneCron: options.pruneCron ?? DEFAULT_PRUNE_CRON,
    retention: { succeededMs: retention.succeeded, failedMs: retention.failed, batchSize: retention.batchSize },
    ledgerGraceMs: options.ledgerGrace ?? DEFAULT_LEDGER_GRACE_MS,
    failUnregisteredAfterMs: options.failUnregisteredAfter ?? DEFAULT_FAIL_UNREGISTERED_AFTER_MS,
  };
}

export function resolveCronledgerOptions(options: CronledgerOptions | undefined): ResolvedCronledgerOptions {
  const parsed = parse(z.strictObject(cronledgerShape), options, "createCronledger options");
  return {
    database: parsed.database,
    jobs: parsed.jobs,
    schedule: parsed.schedule,
    namespace: parsed.namespace,
    logger: parsed.logger,
    hooks: parsed.hooks === undefined ? [] : Array.isArray(parsed.hooks) ? parsed.hooks : [parsed.hooks as CronledgerHooks],
    metrics: parsed.metrics ?? {},
    chores: resolveChores(parsed.chores),
    leaseMs: parsed.lease,
    maxPayloadBytes: parsed.maxPayloadBytes,
    invalidEntries: parsed.invalidEntries,
    catchUpWindowMs: parsed.catchUpWindow,
    passTimeoutMs: parsed.passTimeout,
  };
}

function resolveWorkShape(parsed: z.output<z.ZodObject<typeof workShape>>): Omit<ResolvedWorkOptions, "once"> {
  return {
    concurrency: parsed.concurrency,
    queues: parsed.queues,
    batchSize: parsed.batchSize,
    pollMs: parsed.pollInterval,
    leaseMs: parsed.lease,
    claimTimeoutMs: parsed.claimTimeout,
    graceMs: parsed.gracePeriod,
    clock: parsed.clock,
    random: parsed.random,
  };
}

export function resolveWorkOptions(options: WorkOptions | undefined): ResolvedWorkOptions {
  const parsed = parse(workSchema, options, "work() options");
  return { ...resolveWorkShape(parsed), once: parsed.once };
}

export function resolveStartOptions(options: StartOptions | undefined): ResolvedStartOptions {
  const parsed = parse(startSchema, options, "start() options");
  return { ...resolveWorkShape(parsed), ticker: parsed.ticker, workers: parsed.workers, handleSignals: parsed.handleSignals, maxTickMs: parsed.maxTickInterval };
}

/** A config file's default export, checked whole; `file` names it in the error. */
export function parseConfig(value: unknown, file: string): ParsedConfig {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ConfigError(`Config file ${file} has no default export object; it must \`export default defineConfig({ jobs: [...], schedule: [...] })\`.`);
  }
  if (!("jobs" in value)) {
    throw new ConfigError(`Config file ${file} has no \`jobs\` array; it must \`export default defineConfig({ jobs: [...], schedule: [...] })\`.`);
  }
  return parse(configSchema, value, `config file ${file}`);
}

// ---------------------------------------------------------------- per-enqueue retry policy

const RETRY_CLASS_NAMES = Object.keys(RETRY_CLASSES) as [RetryClass, ...RetryClass[]];
const attemptsSchema = positiveInteger();
const nonNegative = (what: string) => z.number({ error: `${what} must be a number of milliseconds` }).min(0, `${what} must not be negative`);
const retryOverrideSchema = z.union(
  [
    z.enum(RETRY_CLASS_NAMES),
    z.strictObject({ maxAttempts: attemptsSchema }),
    z.strictObject({
      maxAttempts: attemptsSchema,
      baseMs: nonNegative("retry.baseMs"),
      capMs: nonNegative("retry.capMs"),
      jitter: z.number().min(0, "retry.jitter must be from 0 to 1").max(1, "retry.jitter must be from 0 to 1").optional(),
    }),
  ],
  {
    error: `retry must be ${RETRY_CLASS_NAMES.map((name) => JSON.stringify(name)).join(", ")}, { maxAttempts } or { maxAttempts, baseMs, capMs, jitter? }`,
  },
);

/**
 * `enqueue(job, payload, { retry })`: the policy stored with the job and the
 * attempt budget it gives. A function (`delayMs`) cannot be stored with a
 * row, so such a policy is refused here with the way round it.
 */
export function resolveRetryOverride(value: RetryOverride, jobName: string): { readonly maxAttempts: number; readonly stored: StoredRetryPolicy } {
  if (typeof value === "object" && value !== null && "delayMs" in value) {
    throw new InvalidArgumentError(
      `enqueue(${jobName}): a retry policy with delayMs cannot be stored with a job; pass a retry class, { maxAttempts } or { maxAttempts, baseMs, capMs }, or define the policy on the job.`,
    );
  }
  const parsed = retryOverrideSchema.safeParse(value);
  if (!parsed.success) throw new InvalidArgumentError(`Invalid enqueue(${jobName}) option: ${describeShapeIssues(parsed.error, retryOverrideSchema, { noun: "option" })}.`);
  const override = parsed.data;
  if (typeof override === "string") return { maxAttempts: RETRY_CLASSES[override].maxAttempts, stored: { class: override } };
  return { maxAttempts: override.maxAttempts, stored: override };
}

import { z } from "zod";
import type { Executor } from "../db/executor.js";
import type { Duration } from "../duration.js";
import { InvalidArgumentError } from "../errors.js";
import { duration, type Check, type OptionShape, type Takes } from "../option-schema.js";
import { describeShapeIssues } from "../suggest.js";
import { resolveRetryOverride, type RetryOverride } from "./retry-override.js";

/** What `enqueue` and `enqueueMany` take besides the job and its payload, its schema, and what a request's options resolve to. */

export interface EnqueueOptions {
  /** Unique per job name: enqueueing an existing key returns the existing job instead of adding one. */
  readonly idempotencyKey?: string;
  /** Run no earlier than this instant ... */
  readonly runAt?: Date;
  /** ... or after this delay from now. */
  readonly delay?: Duration;
  readonly queue?: string;
  readonly priority?: number;
  /**
   * This job's retry policy instead of its job's: a class (`"probe"`), `{ maxAttempts }` (the job's
   * delays, another budget) or `{ maxAttempts, baseMs, capMs, jitter? }`. Stored with the job, so it
   * holds on every worker; shown in the failures and status views.
   */
  readonly retry?: RetryOverride;
  /**
   * The application's drizzle database or transaction to write the job in
   * (postgres-js, node-postgres or PGlite driver): inside `db.transaction(async (tx) => ...)`,
   * pass `tx` and the job commits or rolls back with the business rows, and
   * its queue is woken on commit only. Default: cronledger's own database.
   */
  readonly db?: Executor;
}

/** Options of a whole `enqueueMany` call. */
export interface EnqueueManyOptions {
  /** As `EnqueueOptions.db`, for every job of the call. */
  readonly db?: Executor;
}

/** A request's options (`db` goes to the call: enqueue's own options, enqueueMany's second argument). */
const requestShape = {
  idempotencyKey: z.string({ error: "must be a string" }).optional(),
  runAt: z.date({ error: "must be a valid Date" }).optional(),
  delay: duration("delay").optional(),
  queue: z.string({ error: "must be a queue name" }).min(1, "must be a queue name").optional(),
  priority: z.number({ error: "must be an integer" }).int("must be an integer").optional(),
  // Checked by resolveRetryOverride, whose messages name the job.
  retry: z.custom<RetryOverride>(() => true).optional(),
} satisfies OptionShape<Omit<EnqueueOptions, "db">>;
type _RequestShapeTakesEnqueueOptions = Check<Takes<Omit<EnqueueOptions, "db">, typeof requestShape>>;

const requestSchema = z.strictObject(requestShape);
const REQUEST_OPTIONS = Object.keys(requestShape).join(", ");

/** A request's options, checked: `delayMs` 0 when none was given, `retry` as stored with the job. */
export interface ResolvedEnqueueOptions {
  readonly idempotencyKey: string | undefined;
  readonly runAt: Date | undefined;
  /** Counts from the database clock, like every other instant, not from this host's. */
  readonly delayMs: number;
  readonly queue: string | undefined;
  readonly priority: number | undefined;
  readonly retry: ReturnType<typeof resolveRetryOverride> | undefined;
}

/**
 * Checks a request's options against the schema: unknown keys are refused
 * with a did-you-mean (a misspelt `idempotencyKey` must not silently enqueue
 * duplicates), and so are runAt with delay. `position`: the request's index
 * in an enqueueMany call, named in the message.
 */
export function resolveEnqueueOptions(options: object | undefined, jobName: string, position?: number): ResolvedEnqueueOptions {
  const where = position === undefined ? `enqueue(${jobName})` : `enqueueMany item ${position} (${jobName})`;
  if (options !== undefined && "db" in options) {
    throw new InvalidArgumentError(
      `${where}: unknown option "db"; pass db to the enqueueMany call itself: enqueueMany(requests, { db }). Enqueue options are ${REQUEST_OPTIONS} and db.`,
    );
  }
  const parsed = requestSchema.safeParse(options ?? {});
  if (!parsed.success) {
    throw new InvalidArgumentError(`${where}: ${describeShapeIssues(parsed.error, requestSchema, { noun: "option" })}. Enqueue options are ${REQUEST_OPTIONS} and db.`);
  }
  const { idempotencyKey, runAt, delay, queue, priority, retry } = parsed.data;
  if (runAt !== undefined && delay !== undefined) throw new InvalidArgumentError(`enqueue(${jobName}): pass either runAt or delay, not both.`);
  return { idempotencyKey, runAt, delayMs: delay ?? 0, queue, priority, retry: retry === undefined ? undefined : resolveRetryOverride(retry, jobName) };
}

import type { Executor } from "../db/executor.js";
import type { Duration } from "../duration.js";
import type { RetryOverride } from "./retry-override.js";

/** What `enqueue` and `enqueueMany` take besides the job and its payload. */

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

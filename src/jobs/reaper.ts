import type { Executor } from "../db/executor.js";
import { reapStaleJobs as reapStatement, type ReapCounts } from "../db/sql/jobs.js";

export interface ReapOptions {
  readonly leaseMs: number;
  /** Judge staleness at this instant instead of the database clock (tests). */
  readonly now?: Date;
}

/** What `reap()` did: jobs returned to the queue, and jobs failed because their lost attempt was their last. */
export type ReapReport = Pick<ReapCounts, "requeued" | "failed">;

/**
 * Takes back running jobs whose heartbeat is older than the lease: requeued
 * while they have attempts left (the lost attempt counts), failed otherwise
 * (see reapStaleJobs in src/db/sql/jobs.ts).
 */
export async function reapStaleJobs(executor: Executor, options: ReapOptions): Promise<ReapCounts> {
  return reapStatement(executor, options.leaseMs, options.now);
}

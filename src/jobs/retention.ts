import type { Executor } from "../db/executor.js";
import { ensureHistoryPartitions, pruneHistory } from "../db/sql/partitions.js";
import type { Duration } from "../duration.js";

export interface RetentionOptions {
  /** How long succeeded (and cancelled) jobs are kept after they finish; default 7 days. */
  readonly succeeded?: Duration;
  /** How long failed jobs (the failure tickets) are kept; default 7 days. */
  readonly failed?: Duration;
  /** Idempotency keys deleted per statement ahead of dropping a day of keyed jobs; default 1,000. */
  readonly batchSize?: number;
}

export interface ResolvedRetention {
  readonly succeededMs: number;
  readonly failedMs: number;
  readonly batchSize: number;
}

/**
 * Removes finished jobs older than their retention and returns how many
 * went: whole days of the history are dropped (src/db/sql/history.ts), never
 * row by row, after the partitions of the days ahead are made. Queued and
 * running jobs are never touched. `now` overrides the database clock for
 * the cutoffs (tests).
 */
export async function pruneFinishedJobs(executor: Executor, retention: ResolvedRetention, now?: Date): Promise<number> {
  await ensureHistoryPartitions(executor);
  const pruned = await pruneHistory(executor, { succeededMs: retention.succeededMs, failedMs: retention.failedMs, batchSize: retention.batchSize, now });
  return pruned.rows;
}

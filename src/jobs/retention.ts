import type { Executor } from "../db/executor.js";
import { deleteFinishedJobs } from "../db/sql/jobs.js";
import type { Duration } from "../duration.js";

export interface RetentionOptions {
  /** How long succeeded (and cancelled) jobs are kept after they finish; default 7 days. */
  readonly succeeded?: Duration;
  /** How long failed jobs (the failure tickets) are kept; default 7 days. */
  readonly failed?: Duration;
  /** Rows deleted per statement, so a large backlog never holds long locks; default 1,000. */
  readonly batchSize?: number;
}

export interface ResolvedRetention {
  readonly succeededMs: number;
  readonly failedMs: number;
  readonly batchSize: number;
}

/**
 * Deletes finished jobs older than their retention in bounded batches and
 * returns how many went. Queued and running jobs are never touched. `now`
 * overrides the database clock for tests.
 */
export async function pruneFinishedJobs(executor: Executor, retention: ResolvedRetention, now?: Date): Promise<number> {
  const groups = [
    { statuses: ["succeeded", "cancelled"], keepMs: retention.succeededMs },
    { statuses: ["failed"], keepMs: retention.failedMs },
  ];
  let removed = 0;
  for (const group of groups) {
    // One status per statement: jobs_finished_idx (status, finished_at) then yields the oldest rows in order and the
    // LIMIT stops the scan; `status = any(...)` made every batch read and sort the whole backlog.
    for (const status of group.statuses) {
      for (;;) {
        const n = await deleteFinishedJobs(executor, { status, keepMs: group.keepMs, limit: retention.batchSize, now });
        removed += n;
        if (n < retention.batchSize) break;
      }
    }
  }
  return removed;
}

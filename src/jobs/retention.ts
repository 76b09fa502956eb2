import { sql } from "drizzle-orm";
import { query, type Database } from "../db/connection.js";
import { parseDuration, type Duration } from "../duration.js";

export interface RetentionOptions {
  /** How long succeeded (and cancelled) jobs are kept after they finish; default 7 days. */
  readonly succeeded?: Duration;
  /** How long failed jobs (the failure tickets) are kept; default 7 days. */
  readonly failed?: Duration;
  /** Rows deleted per statement, so a large backlog never holds long locks; default 1,000. */
  readonly batchSize?: number;
}

export const DEFAULT_RETENTION: Duration = "7d";
const DEFAULT_BATCH_SIZE = 1_000;

export interface ResolvedRetention {
  readonly succeededMs: number;
  readonly failedMs: number;
  readonly batchSize: number;
}

export function resolveRetention(options: RetentionOptions = {}): ResolvedRetention {
  const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
  return {
    succeededMs: parseDuration(options.succeeded ?? DEFAULT_RETENTION, "retention.succeeded"),
    failedMs: parseDuration(options.failed ?? DEFAULT_RETENTION, "retention.failed"),
    batchSize: Number.isInteger(batchSize) && batchSize > 0 ? batchSize : DEFAULT_BATCH_SIZE,
  };
}

/**
 * Deletes finished jobs older than their retention in bounded batches (served
 * by jobs_finished_idx) and returns how many went. Queued and running jobs
 * are never touched. `now` overrides the database clock for tests.
 */
export async function pruneFinishedJobs(database: Database, retention: ResolvedRetention, now?: Date): Promise<number> {
  const clock = now === undefined ? sql`now()` : sql`${now.toISOString()}::timestamptz`;
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
        const [row] = await query<{ n: number }>(
          database.db,
          sql`with doomed as (
                select id from cronledger.jobs
                where status = ${status} and finished_at is not null
                  and finished_at < ${clock} - ${group.keepMs}::float8 * interval '1 millisecond'
                order by finished_at
                limit ${retention.batchSize}
              ), deleted as (
                delete from cronledger.jobs j using doomed where j.id = doomed.id returning 1
              )
              select count(*)::int as n from deleted`,
        );
        const n = row?.n ?? 0;
        removed += n;
        if (n < retention.batchSize) break;
      }
    }
  }
  return removed;
}

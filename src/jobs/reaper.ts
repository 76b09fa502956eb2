import { sql } from "drizzle-orm";
import { query, type Database } from "../db/connection.js";
import { notifyQueues } from "./insert-jobs.js";

/** How long a running job may go without a heartbeat before the reaper takes it back. */
export const DEFAULT_LEASE_MS = 30_000;

/**
 * Refreshes the heartbeat of the given jobs that this worker still holds and
 * returns those ids; a missing id means the reaper took the job back.
 */
export async function heartbeatJobs(database: Database, workerId: string, ids: readonly number[]): Promise<Set<number>> {
  if (ids.length === 0) return new Set();
  const rows = await query<{ id: number }>(
    database.db,
    sql`update cronledger.jobs set heartbeat_at = now()
        where id = any(${sql.param([...ids])}::bigint[]) and locked_by = ${workerId} and status = 'running'
        returning id::float8 as id`,
  );
  return new Set(rows.map((row) => row.id));
}

export interface ReapOptions {
  readonly leaseMs: number;
  /** Judge staleness at this instant instead of the database clock (tests). */
  readonly now?: Date;
}

export interface ReapReport {
  /** Jobs returned to the queue for another attempt. */
  readonly requeued: number;
  /** Jobs whose crashed attempt was their last: failed terminally. */
  readonly failed: number;
}

/**
 * Takes back running jobs whose heartbeat is older than the lease: their
 * worker died or lost the database. The lost attempt counts (it may have had
 * effects), so a job with attempts left is requeued at once (at-least-once)
 * and one without fails terminally; last_error says which worker went quiet.
 * Served by jobs_running_heartbeat_idx; queues that regain jobs are notified.
 */
export async function reapStaleJobs(database: Database, options: ReapOptions): Promise<ReapReport> {
  const now = options.now === undefined ? sql`now()` : sql`${options.now.toISOString()}::timestamptz`;
  const rows = await query<{ status: string; n: number }>(
    database.db,
    sql`with stale as (
          select id from cronledger.jobs
          where status = 'running' and heartbeat_at < ${now} - ${options.leaseMs}::float8 * interval '1 millisecond'
          for update skip locked
        ), reaped as (
          update cronledger.jobs j set
            status = case when j.attempts >= j.max_attempts then 'failed' else 'queued' end,
            run_at = case when j.attempts >= j.max_attempts then j.run_at else now() end,
            finished_at = case when j.attempts >= j.max_attempts then now() else null end,
            last_error = 'LeaseExpiredError [lease_expired]: worker ' || coalesce(j.locked_by, '?') ||
              ' stopped heartbeating during attempt ' || j.attempts || ' (last heartbeat ' || j.heartbeat_at::text ||
              ', lease ' || ${Math.round(options.leaseMs)}::int || ' ms); ' ||
              case when j.attempts >= j.max_attempts then 'no attempts left, failed.' else 'returned to the queue.' end,
            locked_by = null,
            heartbeat_at = null
          from stale where j.id = stale.id
          returning j.status, j.queue
        ), notified as (${notifyQueues(sql`reaped where status = 'queued'`)})
        select status, count(*)::int as n from reaped, notified group by status`,
  );
  const count = (status: string) => rows.find((row) => row.status === status)?.n ?? 0;
  return { requeued: count("queued"), failed: count("failed") };
}

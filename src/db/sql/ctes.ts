import { sql, type SQL } from "drizzle-orm";

/**
 * The names of the CTEs that one SQL builder defines and another reads.
 * The scheduler's pass (passSql, src/db/sql/ledger.ts) is assembled from
 * the one job insert (jobInsertCtes, src/db/sql/jobs.ts), the overlap and
 * pause decisions (slotPolicyCtes, src/db/sql/slot-policy.ts) and the
 * archiving CTEs (archiveCtes, src/db/sql/history.ts); a run-now
 * (src/db/sql/trigger.ts) and a backfill (src/db/sql/backfill.ts) read the
 * same CTEs. Each name is written once, here, and every builder that defines
 * or reads it interpolates the constant: a name renamed or misspelt is a
 * build error, never a statement that fails at run time.
 */

const cte = (name: string): SQL => sql.raw(name);

/** jobInsertCtes: the jobs it inserted (`id`, `job_name`, `idempotency_key`, `schedule_key`, `queue`, `status`), and the one row of its queue notifications. */
export const JOB_INSERT = { inserted: cte("inserted"), notified: cte("notified") } as const;

/** archiveCtes reads the finished jobs to archive from `moved`, which its caller defines (historyColumnList's columns). */
export const ARCHIVE = { moved: cte("moved") } as const;

/**
 * slotPolicyCtes: `decided` (one row per slot: `key`, `slot_at`, `skip_reason`, `skip_detail`, `hold`),
 * `stop_asked` (the running jobs it asked to stop: `id`, `key`), `moved` (the history rows it writes, ARCHIVE.moved)
 * and `overlap_notified` (its stop requests' notifications).
 */
export const SLOT_POLICY = { decided: cte("decided"), stopAsked: cte("stop_asked"), moved: ARCHIVE.moved, overlapNotified: cte("overlap_notified") } as const;

/**
 * passSql's own CTEs: the statement's clock, its entries with their ledger rows, their due slots,
 * corrupt (future) values, the rows it locks, creates, repairs and claims.
 */
export const PASS = {
  clock: cte("clock"),
  entry: cte("entry"),
  due: cte("due"),
  corrupt: cte("corrupt"),
  locked: cte("locked"),
  created: cte("created"),
  repaired: cte("repaired"),
  claimed: cte("claimed"),
} as const;

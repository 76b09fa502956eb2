import { sql, type SQL } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import { jobCounts, jobHistory, jobQueue, scheduleLastRuns } from "../../schema.js";
import { ARCHIVE } from "./ctes.js";
import { JOBS_CHANNEL, name } from "./fragments.js";

/**
 * The history of finished jobs, `cronledger.job_history`: how a job enters
 * it (archiveCtes, in the statement that finishes the job) and how it leaves
 * (retention drops whole days; its partitions are made and dropped in
 * src/db/sql/partitions.ts). src/db/sql/jobs.ts and src/db/sql/operators.ts
 * read and write it through the table object of src/schema.ts like any table.
 *
 * Layout: partitioned by range of `finished_at`, one partition per UTC day
 * (`job_history_pYYYYMMDD`), each split by list of `status` into `_failed`
 * and `_done` (everything else), so the failure tickets and the rest can be
 * kept for different periods (`retention.failed`, `retention.succeeded`) and
 * each dropped whole. `job_history_default` catches a row for a day that has
 * no partition (the prune chore makes them days ahead; a row there is moved
 * out when its day's partition is made). A database migrated from a release
 * with one jobs table keeps that table's finished jobs as one partition,
 * `job_history_legacy_YYYYMMDD` (up to that day), dropped when all of it is
 * past its retention.
 */

/** The history's columns, in the order archiveCtes inserts them. */
const HISTORY_COLUMNS = [
  jobHistory.id,
  jobHistory.jobName,
  jobHistory.queue,
  jobHistory.payload,
  jobHistory.priority,
  jobHistory.maxAttempts,
  jobHistory.idempotencyKey,
  jobHistory.scheduleKey,
  jobHistory.scheduledFor,
  jobHistory.retryPolicy,
  jobHistory.createdAt,
  jobHistory.status,
  jobHistory.outcome,
  jobHistory.runAt,
  jobHistory.attempts,
  jobHistory.lockedBy,
  jobHistory.lastError,
  jobHistory.startedAt,
  jobHistory.finishedAt,
  jobHistory.traceContext,
];

/** The column list of a history insert, or of the `moved` CTE that feeds it. */
export const historyColumnList = sql.join(
  HISTORY_COLUMNS.map((column) => name(column)),
  sql`, `,
);

/** `job_queue` as `j`: the table a `moved` CTE deletes from. */
const j = alias(jobQueue, "j");

/**
 * The RETURNING list of a `delete from job_queue as j` that moves rows into
 * the history (archiveCtes): the job's columns as they are, with its final
 * status, outcome and error, finished now.
 */
export function movedToHistory(end: { readonly status: SQL; readonly outcome: SQL; readonly lastError: SQL }): SQL {
  return sql`${j.id} as id, ${j.jobName} as job_name, ${j.queue} as queue, ${j.payload} as payload, ${j.priority} as priority,
    ${j.maxAttempts} as max_attempts, ${j.idempotencyKey} as idempotency_key, ${j.scheduleKey} as schedule_key, ${j.scheduledFor} as scheduled_for,
    ${j.retryPolicy} as retry_policy, ${j.createdAt} as created_at, ${end.status} as status, ${end.outcome} as outcome, ${j.runAt} as run_at,
    ${j.attempts} as attempts, ${j.lockedBy} as locked_by, ${end.lastError} as last_error, ${j.startedAt} as started_at, now() as finished_at,
    ${j.traceContext} as trace_context`;
}

/** A UTC day of `finished_at`: the day of a history partition and of job_counts. */
const utcDay = (instant: SQL) => sql`(${instant} at time zone 'UTC')::date`;

/**
 * Which held jobs a finishing statement releases (releaseHeldCtes): those of
 * the entries whose jobs it finishes (`entries`), or every held job whose
 * entry has nothing waiting or running left (`all`: the reaper's sweep, so a
 * release a race or a crash missed is made within a reap).
 */
export type HeldRelease = "entries" | "all";

/**
 * The CTEs that write finished jobs into the history, given a CTE named
 * `moved` (defined by the caller, usually `delete from job_queue ...
 * returning`) whose columns are historyColumnList with the job's final
 * status, outcome, error and `finished_at`. In the same statement as the
 * delete, so a job is in the queue or in the history, never both or
 * neither. Alongside, they count the rows into job_counts (per day, queue
 * and status; shard = this backend, so concurrent writers never share a
 * counter row), keep each schedule entry's last finished run
 * (schedule_last_runs: newer slot, then newer id, wins) and release the
 * held job of an entry whose last live job this statement ends.
 */
export function archiveCtes(release: HeldRelease = "entries"): SQL {
  const c = jobCounts;
  const r = scheduleLastRuns;
  const lastRunColumns = [r.scheduleKey, r.id, r.status, r.outcome, r.attempts, r.maxAttempts, r.scheduledFor, r.runAt, r.startedAt, r.finishedAt, r.lastError];
  return sql`archived as (
      insert into ${jobHistory} (${historyColumnList}) select ${historyColumnList} from ${ARCHIVE.moved}
    ), counted as (
      insert into ${jobCounts} (${name(c.day)}, ${name(c.shard)}, ${name(c.queue)}, ${name(c.status)}, ${name(c.n)})
      select ${utcDay(sql`finished_at`)}, pg_backend_pid(), queue, status, count(*) from ${ARCHIVE.moved} group by 1, 3, 4
      on conflict (${name(c.day)}, ${name(c.shard)}, ${name(c.queue)}, ${name(c.status)}) do update set ${name(c.n)} = ${c.n} + excluded.${name(c.n)}
    ), last_runs as (
      insert into ${scheduleLastRuns} (${sql.join(
        lastRunColumns.map((column) => name(column)),
        sql`, `,
      )})
      select distinct on (schedule_key) schedule_key, id, status, outcome, attempts, max_attempts, scheduled_for, run_at, started_at, finished_at, last_error
      from ${ARCHIVE.moved} where schedule_key is not null and scheduled_for is not null
      order by schedule_key, scheduled_for desc, id desc
      on conflict (${name(r.scheduleKey)}) do update set ${sql.join(
        lastRunColumns.slice(1).map((column) => sql`${name(column)} = excluded.${name(column)}`),
        sql`, `,
      )}
      -- ">=": a job's history row written again (a late result replacing the reaper's verdict, src/db/sql/completions.ts) replaces its last run too.
      where (excluded.${name(r.scheduledFor)}, excluded.${name(r.id)}) >= (${r.scheduledFor}, ${r.id})
    ), ${releaseHeldCtes(release)}`;
}

/** `job_queue` as `o`: the other live jobs of a held job's entry. */
const o = alias(jobQueue, "o");

/**
 * A held job (`buffer_one`'s buffered run, `cancel_other`'s replacing one,
 * src/db/sql/slot-policy.ts) becomes `queued`, and its queue is woken, once
 * no other job of its entry waits or runs: the rows this statement moves to
 * the history count as gone (the statement's snapshot still shows them).
 * Only the oldest held job of an entry is released, so two never start
 * together. Defines `released_held`; its notifications are in its RETURNING,
 * since a data-modifying CTE always runs and nothing has to read it.
 */
function releaseHeldCtes(release: HeldRelease): SQL {
  const q = jobQueue;
  const ofEntries = release === "entries" ? sql`and ${j.scheduleKey} in (select schedule_key from ${ARCHIVE.moved} where schedule_key is not null)` : sql``;
  return sql`released_held as (
      update ${jobQueue} as j set ${name(q.status)} = 'queued'
      where ${j.status} = 'held' ${ofEntries}
        and ${j.id} not in (select id from ${ARCHIVE.moved})
        and ${j.id} = (select min(${o.id}) from ${jobQueue} as o where ${o.scheduleKey} = ${j.scheduleKey} and ${o.status} = 'held')
        and not exists (
          select 1 from ${jobQueue} as o
          where ${o.scheduleKey} = ${j.scheduleKey} and ${o.status} in ('queued', 'running') and ${o.id} not in (select id from ${ARCHIVE.moved})
        )
      returning pg_notify(${JOBS_CHANNEL}, ${j.queue}) as notified
    )`;
}

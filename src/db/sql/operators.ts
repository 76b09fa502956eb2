import { sql, type SQL } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import { jobCounts as jobCountsTable, jobHistory, jobQueue, jobs, scheduleLastRuns } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { ARCHIVE, JOB_INSERT } from "./ctes.js";
import { array, epochMicrosText, epochMs, name } from "./fragments.js";
import { archiveCtes, movedToHistory } from "./history.js";
import { CANCEL_CHANNEL, jobInsertCtes } from "./jobs.js";

/**
 * What operators (the status model, the Schedule page, the CLI, the
 * failures API) read and do to jobs outside a job's own life: failures and
 * their retries, cancel, each entry's recent runs, jobs waiting for a retry,
 * ready-queue statistics and counts. Built on the tables of src/schema.ts
 * like src/db/sql/jobs.ts, which holds the data path: live jobs are in
 * `job_queue`, finished ones in `job_history` (partitioned by day, so a
 * read of it that no day bound narrows looks at every day's partition;
 * `finished_at <= now()` leaves out the days made ahead, which a job
 * finishing by the database clock cannot be in yet).
 */

// ---------------------------------------------------------------- failures and their retries

export interface FailedJobRow {
  id: number;
  job_name: string;
  queue: string;
  attempts: number;
  max_attempts: number;
  last_error: string | null;
  failed_at_ms: number;
  failed_at_us: string;
  scheduled_for_ms: number | null;
  schedule_key: string | null;
  idempotency_key: string | null;
  retry_policy: string | null;
}

/**
 * Terminal failures, newest first, `limit` of them after the `before`
 * cursor (failure instant in microseconds, then id). Read from the failed
 * partitions of the history through job_history_failed_idx (finished_at,
 * id), or job_history_failed_job_name_idx when filtered by job name.
 */
export async function failedJobs(
  executor: Executor,
  filter: { readonly jobName?: string | undefined; readonly before?: { readonly micros: string; readonly id: number } | null; readonly limit: number },
): Promise<FailedJobRow[]> {
  const h = jobHistory;
  const before = filter.before;
  return query<FailedJobRow>(
    executor,
    sql`select ${h.id}::float8 as id, ${h.jobName} as job_name, ${h.queue} as queue, ${h.attempts} as attempts,
               ${h.maxAttempts} as max_attempts, ${h.lastError} as last_error,
               ${epochMs(h.finishedAt)} as failed_at_ms,
               ${epochMicrosText(h.finishedAt)} as failed_at_us,
               ${epochMs(h.scheduledFor)} as scheduled_for_ms,
               ${h.scheduleKey} as schedule_key, ${h.idempotencyKey} as idempotency_key, ${h.retryPolicy}::text as retry_policy
        from ${jobHistory}
        where ${h.status} = 'failed' and ${h.finishedAt} <= now()
          ${filter.jobName === undefined ? sql`` : sql`and ${h.jobName} = ${filter.jobName}`}
          ${
            before === undefined || before === null
              ? sql``
              : sql`and (${h.finishedAt}, ${h.id}) < (timestamptz 'epoch' + ${before.micros}::bigint * interval '1 microsecond', ${before.id}::bigint)`
          }
        order by ${h.finishedAt} desc, ${h.id} desc
        limit ${filter.limit}`,
  );
}

/** One job's name, status and idempotency key; undefined when there is no such job. */
export async function jobSummary(executor: Executor, id: number): Promise<{ job_name: string; status: string; idempotency_key: string | null } | undefined> {
  const [row] = await query<{ job_name: string; status: string; idempotency_key: string | null }>(
    executor,
    sql`select ${jobs.jobName} as job_name, ${jobs.status} as status, ${jobs.idempotencyKey} as idempotency_key from ${jobs} where ${jobs.id} = ${id} limit 1`,
  );
  return row;
}

/**
 * Inserts a copy of failed job `id` as a new queued job (same name, queue,
 * payload, priority, slot and retry policy given at enqueue) under
 * `idempotencyKey`, through the one job insert; the payload never leaves the
 * database. `maxAttempts` null keeps the failed row's budget, and so does a
 * row that had its own retry policy. Returns the new id, or undefined when
 * the key already exists or the job is no longer failed.
 */
export async function copyFailedJob(executor: Executor, id: number, idempotencyKey: string, maxAttempts: number | null): Promise<number | undefined> {
  const h = jobHistory;
  const [row] = await query<{ id: number }>(
    executor,
    sql`with ${jobInsertCtes(sql`
          select ${h.jobName}, ${h.queue}, ${h.payload}, ${h.priority}, now(),
                 case when ${h.retryPolicy} is null then coalesce(${maxAttempts}::int, ${h.maxAttempts}) else ${h.maxAttempts} end,
                 ${idempotencyKey}::text, ${h.scheduleKey}, ${h.scheduledFor}, ${h.retryPolicy}, ${h.traceContext}
          from ${jobHistory} where ${h.id} = ${id} and ${h.status} = 'failed' limit 1`)}
        select i.id::float8 as id from ${JOB_INSERT.inserted} i cross join ${JOB_INSERT.notified}`,
  );
  return row?.id;
}

// ---------------------------------------------------------------- operators' actions

/** What `cancelJob` found and did. */
export interface CancelRow {
  job_name: string;
  /** The job's status before this statement (from its snapshot). */
  status: string;
  attempts: number;
  max_attempts: number;
  /** A queued job this statement moved to the history as `cancelled`. */
  cancelled: boolean;
  /** A running job this statement asked to stop (first request or a repeat); null when it did not. */
  stop_requested_at_ms: number | null;
  stop_requested_by: string | null;
  stop_reason: string | null;
  /** The running job had already been asked to stop: the first request stands. */
  already_stopping: boolean;
}

/**
 * Cancels job `id` in one statement. A queued job (waiting for its first
 * run or for a retry) or a held one (its entry's overlap policy waits for
 * the running one) moves to the history as `cancelled`, finished now. A
 * running job is asked to stop: `cancel_requested_at`/`_by`/`cancel_reason`
 * are set on its row (a repeated request keeps the first one) and
 * CANCEL_CHANNEL is notified with its id on commit; its worker aborts its
 * `ctx.signal` (src/jobs/worker.ts) and the job ends `cancelled` when the
 * handler returns. A finished job is not touched. Undefined when there is
 * no such job.
 */
export async function cancelJob(executor: Executor, id: number, request: { readonly by: string; readonly reason: string | null }): Promise<CancelRow | undefined> {
  const j = alias(jobQueue, "j");
  const q = jobQueue;
  const [row] = await query<CancelRow>(
    executor,
    sql`with ${ARCHIVE.moved} as (
          delete from ${jobQueue} as j where ${j.id} = ${id} and ${j.status} in ('queued', 'held')
          returning ${movedToHistory({ status: sql`'cancelled'`, outcome: sql`null::text`, lastError: sql`${j.lastError}` })}
        ), ${archiveCtes()}, stopping as (
          update ${jobQueue} as j set
            ${name(q.cancelRequestedAt)} = coalesce(${j.cancelRequestedAt}, now()),
            ${name(q.cancelRequestedBy)} = case when ${j.cancelRequestedAt} is null then ${request.by}::text else ${j.cancelRequestedBy} end,
            ${name(q.cancelReason)} = case when ${j.cancelRequestedAt} is null then ${request.reason}::text else ${j.cancelReason} end
          where ${j.id} = ${id} and ${j.status} = 'running'
          returning ${j.id} as id, ${j.cancelRequestedAt} as requested_at, ${j.cancelRequestedBy} as requested_by, ${j.cancelReason} as reason
        ), notified as (
          select count(pg_notify(${CANCEL_CHANNEL}, id::text)) as n from stopping
        )
        select ${jobs.jobName} as job_name, ${jobs.status} as status, ${jobs.attempts} as attempts, ${jobs.maxAttempts} as max_attempts,
               exists (select 1 from ${ARCHIVE.moved}) as cancelled,
               ${epochMs(sql`s.requested_at`)} as stop_requested_at_ms, s.requested_by as stop_requested_by, s.reason as stop_reason,
               coalesce((select ${q.cancelRequestedAt} is not null from ${jobQueue} where ${q.id} = ${id}), false) as already_stopping
        from ${jobs} left join stopping s on true cross join notified
        where ${jobs.id} = ${id} limit 1`,
  );
  return row;
}

// ---------------------------------------------------------------- what operators see

/** One run of a schedule entry: a job row, without payload; the error only where the run failed or waits for a retry. */
export interface EntryRunRow {
  schedule_key: string;
  id: number;
  status: string;
  outcome: string | null;
  attempts: number;
  max_attempts: number;
  scheduled_for_ms: number;
  run_at_ms: number;
  started_at_ms: number | null;
  finished_at_ms: number | null;
  last_error: string | null;
}

/**
 * The `limit` most recent runs of each schedule key, newest slot first (an
 * operator's retry of a slot, sharing it, comes before the original). Per
 * key: its live jobs through job_queue_schedule_idx, and its finished ones
 * through job_history_runs_idx, `limit` rows each. For the newest run alone
 * (`limit` 1: an entry's status) the history is not read:
 * schedule_last_runs holds each entry's last finished run, one row, which
 * is also shown after retention dropped its day.
 *
 * For a strip, `floorsMs` (one per key, or null) bounds the history read to
 * the runs that finished at or after the floor: the planner then skips every
 * older day's partition for that key (run-time pruning of the Merge Append,
 * per row of the outer loop). Without it, a key reads every day's
 * `job_history_runs_idx`, a descent and a heap page per day and status
 * (2.3 leaves per key-day, 0.8 ms per key with 10 days of 1 million rows:
 * docs/benchmarks.md, "Growth"). The key's last finished run
 * (schedule_last_runs) is always a candidate, so a strip whose runs are all
 * older than the floor, or whose days retention dropped, still shows it.
 * With `limit` 1 (an entry's latest run, for its state) a slot skipped by the
 * overlap policy ranks after a live job: the skip happened because that job
 * runs, so the entry is running, not "ok, skipped", until the job ends.
 */
export async function entryRuns(executor: Executor, keys: readonly string[], limit: number, floorsMs?: readonly (number | null)[]): Promise<EntryRunRow[]> {
  if (keys.length === 0) return [];
  // The run columns of a row of the queue (no end yet) or of a finished one (history, last runs).
  type Source = typeof jobQueue | typeof jobHistory | typeof scheduleLastRuns;
  const run = (t: Source, end: { readonly outcome: SQL; readonly finishedAt: SQL }) => sql`
    ${t.id}::float8 as id, ${t.status} as status, ${end.outcome} as outcome, ${t.attempts} as attempts, ${t.maxAttempts} as max_attempts,
    ${epochMs(t.scheduledFor)} as scheduled_for_ms, ${epochMs(t.runAt)} as run_at_ms, ${epochMs(t.startedAt)} as started_at_ms,
    ${end.finishedAt} as finished_at_ms,
    case when ${t.status} in ('failed', 'skipped') or (${t.status} = 'queued' and ${t.attempts} > 0) then ${t.lastError} end as last_error`;
  const q = jobQueue;
  const h = jobHistory;
  const r = scheduleLastRuns;
  const live = sql`select ${run(q, { outcome: sql`null::text`, finishedAt: sql`null::float8` })} from ${jobQueue}
    where ${q.scheduleKey} = k.key order by ${q.scheduledFor} desc, ${q.id} desc limit ${limit}`;
  const lastRun = sql`select ${run(r, { outcome: sql`${r.outcome}`, finishedAt: epochMs(r.finishedAt) })} from ${scheduleLastRuns} where ${r.scheduleKey} = k.key`;
  // A plain comparison with the outer row's value: what run-time partition pruning understands (an OR with IS NULL would not prune).
  const floored = floorsMs === undefined ? sql`` : sql`and ${h.finishedAt} >= k.floor`;
  const finished =
    limit === 1
      ? lastRun
      : sql`(select ${run(h, { outcome: sql`${h.outcome}`, finishedAt: epochMs(h.finishedAt) })} from ${jobHistory}
          where ${h.scheduleKey} = k.key and ${h.finishedAt} <= now() ${floored} order by ${h.scheduledFor} desc, ${h.id} desc limit ${limit})
          union (${lastRun})`;
  const outer =
    floorsMs === undefined
      ? sql`unnest(${array(keys, "text")}) as k(key)`
      : sql`(select u.key, coalesce(to_timestamp(u.floor_ms / 1000), '-infinity'::timestamptz) as floor
             from unnest(${array(keys, "text")}, ${array(floorsMs, "float8")}) as u(key, floor_ms)) as k`;
  return query<EntryRunRow>(
    executor,
    sql`select k.key as schedule_key, r.* from ${outer}
        cross join lateral (
          select * from ((${live}) union all (${finished})) as runs
          order by ${limit === 1 ? sql`(status = 'skipped' and outcome is not distinct from 'overlap'), ` : sql``}scheduled_for_ms desc, id desc
          limit ${limit}
        ) r`,
  );
}

export interface RunningJobRow {
  id: number;
  job_name: string;
  queue: string;
  attempts: number;
  max_attempts: number;
  started_at_ms: number | null;
  heartbeat_at_ms: number | null;
  locked_by: string | null;
  scheduled_for_ms: number | null;
  schedule_key: string | null;
  stop_requested_at_ms: number | null;
  stop_requested_by: string | null;
  stop_reason: string | null;
}

/** Running jobs, longest-running first, at most `limit` (or job `id` alone, if it runs), with any stop request on them. */
export async function runningJobs(executor: Executor, filter: { readonly limit: number; readonly id?: number }): Promise<RunningJobRow[]> {
  const q = jobQueue;
  return query<RunningJobRow>(
    executor,
    sql`select ${q.id}::float8 as id, ${q.jobName} as job_name, ${q.queue} as queue, ${q.attempts} as attempts, ${q.maxAttempts} as max_attempts,
               ${epochMs(q.startedAt)} as started_at_ms, ${epochMs(q.heartbeatAt)} as heartbeat_at_ms, ${q.lockedBy} as locked_by,
               ${epochMs(q.scheduledFor)} as scheduled_for_ms, ${q.scheduleKey} as schedule_key,
               ${epochMs(q.cancelRequestedAt)} as stop_requested_at_ms, ${q.cancelRequestedBy} as stop_requested_by, ${q.cancelReason} as stop_reason
        from ${jobQueue}
        where ${q.status} = 'running' ${filter.id === undefined ? sql`` : sql`and ${q.id} = ${filter.id}`}
        order by ${q.startedAt}, ${q.id}
        limit ${filter.limit}`,
  );
}

export interface RetryingJobRow {
  id: number;
  job_name: string;
  queue: string;
  attempts: number;
  max_attempts: number;
  run_at_ms: number;
  scheduled_for_ms: number | null;
  last_error: string | null;
  retry_policy: string | null;
}

/** Jobs waiting for their next attempt after a failed one, soonest first, at most `limit` (served by jobs_retrying_idx). */
export async function retryingJobs(executor: Executor, limit: number): Promise<RetryingJobRow[]> {
  return query<RetryingJobRow>(
    executor,
    sql`select ${jobQueue.id}::float8 as id, ${jobQueue.jobName} as job_name, ${jobQueue.queue} as queue, ${jobQueue.attempts} as attempts,
               ${jobQueue.maxAttempts} as max_attempts, ${epochMs(jobQueue.runAt)} as run_at_ms, ${epochMs(jobQueue.scheduledFor)} as scheduled_for_ms,
               ${jobQueue.lastError} as last_error, ${jobQueue.retryPolicy}::text as retry_policy
        from ${jobQueue}
        where ${jobQueue.status} = 'queued' and ${jobQueue.attempts} > 0
        order by ${jobQueue.runAt}, ${jobQueue.id}
        limit ${limit}`,
  );
}

/**
 * Per queue, how many jobs are ready (queued, due) and when the oldest of
 * them became due, judged at the database clock. Each queue's ready rows are
 * read from jobs_ready_idx, and at most `cap` of them are counted, so a huge
 * backlog costs a bounded scan (the count then reads `cap`).
 */
export async function readyJobStats(
  executor: Executor,
  queues: readonly string[],
  cap: number,
): Promise<{ queue: string; ready: number; oldest_ms: number | null; now_ms: number }[]> {
  return query(
    executor,
    sql`select q.name as queue, r.ready, r.oldest_ms, ${epochMs(sql`now()`)} as now_ms
        from unnest(${array(queues, "text")}) as q(name)
        cross join lateral (
          select count(*)::int as ready, ${epochMs(sql`min(run_at)`)} as oldest_ms from (
            select ${jobQueue.runAt} as run_at from ${jobQueue}
            where ${jobQueue.queue} = q.name and ${jobQueue.status} = 'queued' and ${jobQueue.runAt} <= now()
            limit ${cap}
          ) as due
        ) r`,
  );
}

// ---------------------------------------------------------------- counts

/**
 * Job counts by queue and status (what the status page and `cronledger
 * status` show): the live jobs counted in the queue, the finished ones
 * summed from job_counts (kept by the statements that move jobs into the
 * history and by retention), so a large history costs nothing here.
 */
export async function jobCounts(executor: Executor): Promise<{ queue: string; status: string; n: number }[]> {
  const c = jobCountsTable;
  return query(
    executor,
    sql`select ${jobQueue.queue} as queue, ${jobQueue.status} as status, count(*)::float8 as n from ${jobQueue} group by 1, 2
        union all
        select ${c.queue} as queue, ${c.status} as status, sum(${c.n})::float8 as n from ${jobCountsTable} group by 1, 2 having sum(${c.n}) > 0`,
  );
}

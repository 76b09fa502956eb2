import { sql } from "drizzle-orm";
import { jobs } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { array, epochMicrosText, epochMs, name } from "./fragments.js";
import { jobInsertCtes } from "./jobs.js";

/**
 * What operators (the status model, the Schedule page, the CLI, the
 * failures API) read and do to `cronledger.jobs` outside a job's own life:
 * failures and their retries, cancel, each entry's recent runs, jobs waiting
 * for a retry, ready-queue statistics and counts. Built on the tables of
 * src/schema.ts like src/db/sql/jobs.ts, which holds the data path.
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
 * cursor (failure instant in microseconds, then id). A failed row without
 * finished_at (written by hand) counts from its creation. Served by
 * jobs_failed_job_name_idx when filtered by job name.
 */
export async function failedJobs(
  executor: Executor,
  filter: { readonly jobName?: string | undefined; readonly before?: { readonly micros: string; readonly id: number } | null; readonly limit: number },
): Promise<FailedJobRow[]> {
  const failedAt = sql`coalesce(${jobs.finishedAt}, ${jobs.createdAt})`;
  const before = filter.before;
  return query<FailedJobRow>(
    executor,
    sql`select ${jobs.id}::float8 as id, ${jobs.jobName} as job_name, ${jobs.queue} as queue, ${jobs.attempts} as attempts,
               ${jobs.maxAttempts} as max_attempts, ${jobs.lastError} as last_error,
               ${epochMs(failedAt)} as failed_at_ms,
               ${epochMicrosText(failedAt)} as failed_at_us,
               ${epochMs(jobs.scheduledFor)} as scheduled_for_ms,
               ${jobs.scheduleKey} as schedule_key, ${jobs.idempotencyKey} as idempotency_key, ${jobs.retryPolicy}::text as retry_policy
        from ${jobs}
        where ${jobs.status} = 'failed'
          ${filter.jobName === undefined ? sql`` : sql`and ${jobs.jobName} = ${filter.jobName}`}
          ${
            before === undefined || before === null
              ? sql``
              : sql`and (${failedAt}, ${jobs.id}) < (timestamptz 'epoch' + ${before.micros}::bigint * interval '1 microsecond', ${before.id}::bigint)`
          }
        order by ${failedAt} desc, ${jobs.id} desc
        limit ${filter.limit}`,
  );
}

/** One job's name, status and idempotency key; undefined when there is no such job. */
export async function jobSummary(executor: Executor, id: number): Promise<{ job_name: string; status: string; idempotency_key: string | null } | undefined> {
  const [row] = await query<{ job_name: string; status: string; idempotency_key: string | null }>(
    executor,
    sql`select ${jobs.jobName} as job_name, ${jobs.status} as status, ${jobs.idempotencyKey} as idempotency_key from ${jobs} where ${jobs.id} = ${id}`,
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
  const [row] = await query<{ id: number }>(
    executor,
    sql`with ${jobInsertCtes(sql`
          select ${jobs.jobName}, ${jobs.queue}, ${jobs.payload}, ${jobs.priority}, now(),
                 case when ${jobs.retryPolicy} is null then coalesce(${maxAttempts}::int, ${jobs.maxAttempts}) else ${jobs.maxAttempts} end,
                 ${idempotencyKey}::text, ${jobs.scheduleKey}, ${jobs.scheduledFor}, ${jobs.retryPolicy}
          from ${jobs} where ${jobs.id} = ${id} and ${jobs.status} = 'failed'`)}
        select inserted.id::float8 as id from inserted cross join notified`,
  );
  return row?.id;
}

// ---------------------------------------------------------------- operators' actions

/**
 * Cancels job `id` if it is queued (waiting for its first run or for a
 * retry): terminal `cancelled`, finished now. A running job is not touched
 * (its worker would overwrite the status), nor a finished one. Returns the
 * status the job had, and whether this statement cancelled it; undefined
 * when there is no such job.
 */
export async function cancelQueuedJob(
  executor: Executor,
  id: number,
): Promise<{ job_name: string; status: string; attempts: number; max_attempts: number; cancelled: boolean } | undefined> {
  const [row] = await query<{ job_name: string; status: string; attempts: number; max_attempts: number; cancelled: boolean }>(
    executor,
    sql`with cancelled as (
          update ${jobs} set ${name(jobs.status)} = 'cancelled', ${name(jobs.finishedAt)} = now()
          where ${jobs.id} = ${id} and ${jobs.status} = 'queued'
          returning ${jobs.id} as id
        )
        select ${jobs.jobName} as job_name, ${jobs.status} as status, ${jobs.attempts} as attempts, ${jobs.maxAttempts} as max_attempts,
               exists (select 1 from cancelled) as cancelled
        from ${jobs} where ${jobs.id} = ${id}`,
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
 * operator's retry of a slot, sharing it, comes before the original). One
 * index range scan per key through jobs_schedule_runs_idx, read backwards,
 * so the cost is keys x limit rows whatever the table holds.
 */
export async function entryRuns(executor: Executor, keys: readonly string[], limit: number): Promise<EntryRunRow[]> {
  if (keys.length === 0) return [];
  return query<EntryRunRow>(
    executor,
    sql`select k.key as schedule_key, r.* from unnest(${array(keys, "text")}) as k(key)
        cross join lateral (
          select ${jobs.id}::float8 as id, ${jobs.status} as status, ${jobs.outcome} as outcome, ${jobs.attempts} as attempts,
                 ${jobs.maxAttempts} as max_attempts, ${epochMs(jobs.scheduledFor)} as scheduled_for_ms, ${epochMs(jobs.runAt)} as run_at_ms,
                 ${epochMs(jobs.startedAt)} as started_at_ms, ${epochMs(jobs.finishedAt)} as finished_at_ms,
                 case when ${jobs.status} = 'failed' or (${jobs.status} = 'queued' and ${jobs.attempts} > 0) then ${jobs.lastError} end as last_error
          from ${jobs}
          where ${jobs.scheduleKey} = k.key
          order by ${jobs.scheduledFor} desc, ${jobs.id} desc
          limit ${limit}
        ) r`,
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
    sql`select ${jobs.id}::float8 as id, ${jobs.jobName} as job_name, ${jobs.queue} as queue, ${jobs.attempts} as attempts,
               ${jobs.maxAttempts} as max_attempts, ${epochMs(jobs.runAt)} as run_at_ms, ${epochMs(jobs.scheduledFor)} as scheduled_for_ms,
               ${jobs.lastError} as last_error, ${jobs.retryPolicy}::text as retry_policy
        from ${jobs}
        where ${jobs.status} = 'queued' and ${jobs.attempts} > 0
        order by ${jobs.runAt}, ${jobs.id}
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
            select ${jobs.runAt} as run_at from ${jobs}
            where ${jobs.queue} = q.name and ${jobs.status} = 'queued' and ${jobs.runAt} <= now()
            limit ${cap}
          ) as due
        ) r`,
  );
}

// ---------------------------------------------------------------- counts

/** Job counts by queue and status (what the status page and `cronledger status` show). */
export async function jobCounts(executor: Executor): Promise<{ queue: string; status: string; n: number }[]> {
  return query(executor, sql`select ${jobs.queue} as queue, ${jobs.status} as status, count(*)::int as n from ${jobs} group by 1, 2`);
}

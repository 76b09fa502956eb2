import { sql, type SQL } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import { LeaseExpiredError } from "../../errors.js";
import { jobs } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { array, arrayLiteral, clock, epochMs, milliseconds, name } from "./fragments.js";
import { registerWorker, type WorkerRegistration } from "./workers.js";

/**
 * Every statement on `cronledger.jobs`. Each is written against the table
 * and column objects of src/schema.ts, so renaming a column there breaks
 * the build here, not a query at run time. The statements are raw SQL
 * (`sql` templates) where drizzle's builder cannot say them: batches
 * travel as parallel arrays through `unnest` (a constant number of
 * parameters whatever the batch size, and one prepared statement), claims
 * need `FOR UPDATE SKIP LOCKED` inside a lateral join, and inserts notify
 * their queues in the same statement. This file holds a job's life (insert,
 * claim, complete, heartbeat, reap, delete); what operators read and do to
 * jobs (failures, retries, cancel, runs, counts) is in src/db/sql/operators.ts.
 */

/** Workers LISTEN on this channel; the payload is the queue that gained ready jobs. */
export const JOBS_CHANNEL = "cronledger_jobs";

/** `jobs` as `j`, for statements that join it with itself or with arrays of rows. */
const j = alias(jobs, "j");

/**
 * A select that notifies each distinct queue among `rows` (a CTE, optionally
 * filtered, with a `queue` column) once; the notifications go out on commit,
 * so a job written in a transaction that rolls back wakes nobody.
 * Wherever jobs become ready, their queues are woken through this.
 */
export function notifyQueues(rows: SQL): SQL {
  return sql`select count(pg_notify(${JOBS_CHANNEL}, queue)) as n from (select distinct queue from ${rows}) as queues`;
}

// ---------------------------------------------------------------- inserting

export interface NewJobRow {
  readonly jobName: string;
  readonly queue: string;
  readonly payloadJson: string;
  readonly priority: number;
  /** ISO instant; null means the database clock plus `delayMs`. */
  readonly runAt: string | null;
  /** With no `runAt`: how long after the database's now the job becomes ready. */
  readonly delayMs: number;
  readonly maxAttempts: number;
  readonly idempotencyKey: string | null;
  readonly scheduleKey: string | null;
  readonly scheduledFor: string | null;
  /** A retry policy given at enqueue, as JSON; null: the job's own. */
  readonly retryPolicyJson: string | null;
}

export interface InsertedJob {
  id: number;
  job_name: string;
  idempotency_key: string | null;
  schedule_key: string | null;
}

/**
 * The one job insert: the `inserted` and `notified` CTEs that insert the
 * rows `select` yields (job_name, queue, payload, priority, run_at,
 * max_attempts, idempotency_key, schedule_key, scheduled_for, retry_policy,
 * in that order). Rows whose (job_name, idempotency_key) exists are skipped, and
 * each queue that gained rows is notified once, on commit. Enqueue, the
 * tick's pass and the retry of a failure all insert through it.
 */
export function jobInsertCtes(select: SQL): SQL {
  return sql`
    inserted as (
      insert into ${jobs}
        (${name(jobs.jobName)}, ${name(jobs.queue)}, ${name(jobs.payload)}, ${name(jobs.priority)}, ${name(jobs.runAt)},
         ${name(jobs.maxAttempts)}, ${name(jobs.idempotencyKey)}, ${name(jobs.scheduleKey)}, ${name(jobs.scheduledFor)}, ${name(jobs.retryPolicy)})
      ${select}
      on conflict (${name(jobs.jobName)}, ${name(jobs.idempotencyKey)}) where ${name(jobs.idempotencyKey)} is not null do nothing
      returning ${name(jobs.id)}, ${name(jobs.jobName)}, ${name(jobs.idempotencyKey)}, ${name(jobs.scheduleKey)}, ${name(jobs.queue)}
    ), notified as (${notifyQueues(sql`inserted`)})`;
}

/** Inserts any number of jobs in one statement: columns travel as parallel arrays through unnest, a constant 11 parameters. */
export async function insertJobs(executor: Executor, rows: readonly NewJobRow[]): Promise<InsertedJob[]> {
  const column = <K extends keyof NewJobRow>(key: K) => arrayLiteral(rows.map((row) => row[key]));
  return query<InsertedJob>(
    executor,
    sql`
    with ${jobInsertCtes(sql`
      select n, q, p::jsonb, pr, coalesce(ra::timestamptz, now() + ${milliseconds(sql`dm`)}), ma, ik, sk, sf::timestamptz, rp::jsonb
      from unnest(
        ${column("jobName")}::text[], ${column("queue")}::text[], ${column("payloadJson")}::text[],
        ${column("priority")}::int[], ${column("runAt")}::text[], ${column("delayMs")}::float8[], ${column("maxAttempts")}::int[],
        ${column("idempotencyKey")}::text[], ${column("scheduleKey")}::text[], ${column("scheduledFor")}::text[], ${column("retryPolicyJson")}::text[]
      ) as t(n, q, p, pr, ra, dm, ma, ik, sk, sf, rp)`)}
    select inserted.id::float8 as id, inserted.job_name, inserted.idempotency_key, inserted.schedule_key
    from inserted cross join notified`,
  );
}

/** The ids (and statuses) of existing jobs holding any of these (job name, idempotency key) pairs. */
export async function jobsByIdempotencyKey(
  executor: Executor,
  jobNames: readonly string[],
  keys: readonly string[],
): Promise<{ id: number; job_name: string; idempotency_key: string; status: string }[]> {
  return query(
    executor,
    sql`select ${jobs.id}::float8 as id, ${jobs.jobName} as job_name, ${jobs.idempotencyKey} as idempotency_key, ${jobs.status} as status
        from ${jobs}
        where ${jobs.jobName} = any(${array(jobNames, "text")}) and ${jobs.idempotencyKey} = any(${array(keys, "text")})`,
  );
}

// ---------------------------------------------------------------- claiming and completing

export interface ClaimedJob {
  readonly id: number;
  readonly jobName: string;
  readonly queue: string;
  readonly payload: string;
  readonly priority: number;
  readonly runAtMs: number;
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly scheduledForMs: number | null;
  readonly scheduleKey: string | null;
  /** The retry policy given at enqueue, as JSON; null: the job's own. */
  readonly retryPolicy: string | null;
}

export interface ClaimRequest {
  readonly workerId: string;
  readonly queues: readonly string[];
  /** The job names the worker can run: a job of any other name is left for a worker that knows it. */
  readonly jobNames: readonly string[];
  /** Most rows to claim. */
  readonly limit: number;
  /**
   * cronledger's chores, claimed ahead of the ordinary jobs and on top of
   * `limit` (the worker runs them outside its slots), so no backlog and no
   * long job can starve the reaper.
   */
  readonly chores?: { readonly queue: string; readonly jobNames: readonly string[]; readonly limit: number } | undefined;
  /** Judge readiness at this instant instead of the database clock (tests). */
  readonly now?: Date | undefined;
}

/**
 * Claims up to `limit` ready jobs of the given queues and names for
 * `workerId`, in priority then run_at order across the queues, plus any
 * ready chores. Each queue is read through jobs_ready_idx by its own
 * lateral subquery (one index range scan each, whatever the other queues
 * hold; names the worker does not know are filtered on the way, so a
 * backlog of them ahead in the queue costs a longer scan, not a wrong
 * claim) and its rows are locked with SKIP LOCKED, so concurrent workers
 * never wait on each other or claim the same row.
 *
 * A claim commits asynchronously (synchronous_commit off for its own
 * transaction, set inside the statement). It is visible to every other
 * worker at once, so nobody claims the job twice; what a server crash can
 * lose is the claim's last few hundred milliseconds, which puts the job back
 * to queued: it runs again, as a job of a worker that died does (at least
 * once). Enqueues and completions stay synchronous. Saves a WAL flush on the
 * path from enqueue to start and on every claim of a drain.
 */
export async function claimJobs(executor: Executor, request: ClaimRequest): Promise<ClaimedJob[]> {
  const ready = (queue: SQL, names: readonly string[], limit: number) => sql`
    select ${jobs.id} as id, ${jobs.priority} as priority, ${jobs.runAt} as run_at from ${jobs}
    where ${jobs.queue} = ${queue} and ${jobs.status} = 'queued' and ${jobs.runAt} <= ${clock(request.now)}
      and ${jobs.jobName} = any(${array(names, "text")})
    order by ${jobs.priority}, ${jobs.runAt}, ${jobs.id}
    limit ${limit}
    for update skip locked`;
  const ordinary =
    request.limit > 0 && request.jobNames.length > 0
      ? sql`array(
          select c.id from unnest(${array(request.queues, "text")}) as q(name)
          cross join lateral (${ready(sql`q.name`, request.jobNames, request.limit)}) c
          order by c.priority, c.run_at, c.id
          limit ${request.limit}
        )`
      : sql`array[]::bigint[]`;
  const { chores } = request;
  const claimed =
    chores === undefined || chores.jobNames.length === 0 || chores.limit <= 0
      ? ordinary
      : sql`array(select id from (${ready(sql`${chores.queue}`, chores.jobNames, chores.limit)}) as chores) || ${ordinary}`;
  return query<ClaimedJob>(
    executor,
    sql`update ${jobs} as j
        set ${name(jobs.status)} = 'running', ${name(jobs.attempts)} = ${j.attempts} + 1, ${name(jobs.lockedBy)} = ${request.workerId},
            ${name(jobs.heartbeatAt)} = now(), ${name(jobs.startedAt)} = now()
        where ${j.id} = any(${claimed})
          -- The claim commits without waiting for its WAL flush (see below).
          and (select set_config('synchronous_commit', 'off', true)) = 'off'
        returning ${j.id}::float8 as "id", ${j.jobName} as "jobName", ${j.queue} as "queue", ${j.payload}::text as "payload",
          ${j.priority} as "priority", ${epochMs(j.runAt)} as "runAtMs", ${j.attempts} as "attempts", ${j.maxAttempts} as "maxAttempts",
          ${epochMs(j.scheduledFor)} as "scheduledForMs", ${j.scheduleKey} as "scheduleKey", ${j.retryPolicy}::text as "retryPolicy"`,
  );
}

/** How one attempt's row is written back. */
export interface CompletionRow {
  readonly id: number;
  /** `queued`: back to the queue, after `delayMs` (a retry) or at once (`returned`). */
  readonly status: "succeeded" | "failed" | "queued";
  readonly outcome: string | null;
  /** Stored as last_error when set; the previous error is kept otherwise. */
  readonly error: string | null;
  readonly delayMs: number;
  /** Handed back unfinished (a shutdown): the interrupted attempt is not counted, and the queue is woken. */
  readonly returned: boolean;
}

/**
 * Writes the ends of many attempts in one statement. Every row is guarded by
 * `locked_by = workerId and status = 'running'`, so a job the reaper took
 * back is never overwritten by its old worker.
 */
export async function completeJobs(executor: Executor, workerId: string, rows: readonly CompletionRow[], now?: Date): Promise<void> {
  const column = <K extends Exclude<keyof CompletionRow, "returned">>(key: K) => arrayLiteral(rows.map((row) => row[key]));
  const returned = arrayLiteral(rows.map((row) => (row.returned ? 1 : 0)));
  await executor.execute(
    sql`with done as (
          update ${jobs} as j set
            ${name(jobs.status)} = t.status,
            ${name(jobs.outcome)} = t.outcome,
            ${name(jobs.lastError)} = coalesce(t.error, ${j.lastError}),
            ${name(jobs.attempts)} = ${j.attempts} - t.returned,
            ${name(jobs.runAt)} = case when t.status = 'queued' then ${clock(now)} + ${milliseconds(sql`t.delay_ms`)} else ${j.runAt} end,
            ${name(jobs.finishedAt)} = case when t.status = 'queued' then null else now() end,
            ${name(jobs.lockedBy)} = null,
            ${name(jobs.heartbeatAt)} = null
          from unnest(
            ${column("id")}::bigint[], ${column("status")}::text[], ${column("outcome")}::text[],
            ${column("error")}::text[], ${column("delayMs")}::float8[], ${returned}::int[]
          ) as t(id, status, outcome, error, delay_ms, returned)
          where ${j.id} = t.id and ${j.lockedBy} = ${workerId} and ${j.status} = 'running'
          returning ${j.queue} as queue, t.returned
        )
        ${notifyQueues(sql`done where returned = 1`)}`,
  );
}

/**
 * Refreshes the heartbeat of the given jobs that this worker still holds and
 * returns those ids; a missing id means the reaper took the job back. The
 * same statement refreshes (or restores) the worker's row in the registry
 * (src/db/sql/workers.ts), so it is sent even when the worker holds nothing.
 */
export async function heartbeatJobs(executor: Executor, worker: WorkerRegistration, ids: readonly number[]): Promise<Set<number>> {
  const rows = await query<{ id: number }>(
    executor,
    sql`with registered as (${registerWorker(worker)})
        update ${jobs} set ${name(jobs.heartbeatAt)} = now()
        where ${jobs.id} = any(${array(ids, "bigint")}) and ${jobs.lockedBy} = ${worker.id} and ${jobs.status} = 'running'
        returning ${jobs.id}::float8 as id`,
  );
  return new Set(rows.map((row) => row.id));
}

// ---------------------------------------------------------------- reaping and retention

export interface ReapCounts {
  /** Jobs returned to the queue for another attempt. */
  readonly requeued: number;
  /** Jobs whose crashed attempt was their last: failed terminally. */
  readonly failed: number;
  /** The terminally failed ones by job name (the failure metrics count them per job type). */
  readonly failedByJob: Readonly<Record<string, number>>;
}

/**
 * Takes back running jobs whose heartbeat is older than the lease: their
 * worker died or lost the database. The lost attempt counts (it may have had
 * effects), so a job with attempts left is requeued at once (at-least-once)
 * and one without fails terminally; last_error is a LeaseExpiredError naming
 * the worker that went quiet. Served by jobs_running_heartbeat_idx; queues
 * that regain jobs are notified.
 *
 * The lease also counts from the server's own start: while PostgreSQL was
 * down nobody could heartbeat, so after a restart every worker gets a whole
 * lease to reconnect and beat before any of its jobs is taken back.
 */
export async function reapStaleJobs(executor: Executor, leaseMs: number, now?: Date): Promise<ReapCounts> {
  const exhausted = sql`${j.attempts} >= ${j.maxAttempts}`;
  const cutoff = sql`${clock(now)} - ${milliseconds(leaseMs)}`;
  const rows = await query<{ status: string; job_name: string; n: number }>(
    executor,
    sql`with stale as (
          select ${jobs.id} as id from ${jobs}
          where ${jobs.status} = 'running' and ${jobs.heartbeatAt} < ${cutoff} and pg_postmaster_start_time() < ${cutoff}
          for update skip locked
        ), reaped as (
          update ${jobs} as j set
            ${name(jobs.status)} = case when ${exhausted} then 'failed' else 'queued' end,
            ${name(jobs.runAt)} = case when ${exhausted} then ${j.runAt} else now() end,
            ${name(jobs.finishedAt)} = case when ${exhausted} then now() else null end,
            ${name(jobs.lastError)} = format(${LeaseExpiredError.FORMAT}::text, coalesce(${j.lockedBy}, '?'), ${j.attempts}, ${j.heartbeatAt}::text,
              ${Math.round(leaseMs)}::int, case when ${exhausted} then ${LeaseExpiredError.FAILED}::text else ${LeaseExpiredError.REQUEUED}::text end),
            ${name(jobs.lockedBy)} = null,
            ${name(jobs.heartbeatAt)} = null
          from stale where ${j.id} = stale.id
          returning ${j.status} as status, ${j.queue} as queue, ${j.jobName} as job_name
        ), notified as (${notifyQueues(sql`reaped where status = 'queued'`)})
        select status, job_name, count(*)::int as n from reaped, notified group by status, job_name`,
  );
  const count = (status: string) => rows.filter((row) => row.status === status).reduce((sum, row) => sum + row.n, 0);
  const failedByJob = Object.fromEntries(rows.filter((row) => row.status === "failed").map((row) => [row.job_name, row.n]));
  return { requeued: count("queued"), failed: count("failed"), failedByJob };
}

/**
 * Deletes at most `limit` finished jobs of one status that finished more
 * than `keepMs` ago, oldest first, and returns how many went. One status
 * makes the scan an ordered range of jobs_finished_idx (status, finished_at)
 * that the LIMIT ends. Queued and running jobs are never touched.
 */
export async function deleteFinishedJobs(
  executor: Executor,
  batch: { readonly status: string; readonly keepMs: number; readonly limit: number; readonly now?: Date | undefined },
): Promise<number> {
  const [row] = await query<{ n: number }>(
    executor,
    sql`with doomed as (
          select ${jobs.id} as id from ${jobs}
          where ${jobs.status} = ${batch.status} and ${jobs.finishedAt} is not null
            and ${jobs.finishedAt} < ${clock(batch.now)} - ${milliseconds(batch.keepMs)}
          order by ${jobs.finishedAt}
          limit ${batch.limit}
        ), deleted as (
          delete from ${jobs} as j using doomed where ${j.id} = doomed.id returning 1
        )
        select count(*)::int as n from deleted`,
  );
  return row?.n ?? 0;
}

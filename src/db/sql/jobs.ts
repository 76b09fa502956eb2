// A job's whole life (insert, claim, completion, heartbeat, reap) in one file, as one reads it; a little over 350 lines.
import { sql, type SQL } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import { LeaseExpiredError, type StopRequest } from "../../errors.js";
import { jobHistory, jobKeys, jobQueue } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { array, clock, epochMs, milliseconds, name, reusable, reusableShapes } from "./fragments.js";
import { archiveCtes, movedToHistory } from "./history.js";
import { registerWorker, type WorkerRegistration } from "./workers.js";

/**
 * A job's life: inserted into `cronledger.job_queue` (its idempotency key
 * into `job_keys`), claimed, heartbeated, and at its end moved into
 * `job_history` by the statement that finishes it (src/db/sql/history.ts).
 * Each statement is written against the table and column objects of
 * src/schema.ts, so renaming a column there breaks the build here, not a
 * query at run time. The statements are raw SQL (`sql` templates) where
 * drizzle's builder cannot say them: batches travel as parallel arrays
 * through `unnest` (a constant number of parameters whatever the batch
 * size, and one prepared statement), claims need `FOR UPDATE SKIP LOCKED`
 * inside a lateral join, and inserts notify their queues in the same
 * statement. What operators read and do to jobs (failures, retries, cancel,
 * runs, counts) is in src/db/sql/operators.ts.
 */

/** Workers LISTEN on this channel; the payload is the queue that gained ready jobs. */
export const JOBS_CHANNEL = "cronledger_jobs";
/** Workers LISTEN on this channel for stop requests (an operator's cancel, an overlap policy's cancel_other); the payload is the running job's id, as text. */
export const CANCEL_CHANNEL = "cronledger_cancel";

/** `job_queue` as `j`, for statements that join it with itself or with arrays of rows. */
const j = alias(jobQueue, "j");

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
 * in that order). Each row draws its id first; a keyed row takes its
 * (job_name, idempotency_key) in `job_keys` and is inserted only if it got
 * it, so a key held by any job, queued, running or finished, is skipped,
 * and two inserts of the same key wait on each other's key row, not on a
 * read that a concurrent finish could slip past. Each queue that gained
 * rows is notified once, on commit. Enqueue, the tick's pass and the retry
 * of a failure all insert through it.
 */
export function jobInsertCtes(select: SQL): SQL {
  const q = jobQueue;
  const columns = [q.jobName, q.queue, q.payload, q.priority, q.runAt, q.maxAttempts, q.idempotencyKey, q.scheduleKey, q.scheduledFor, q.retryPolicy];
  const list = sql.join(
    columns.map((column) => name(column)),
    sql`, `,
  );
  return sql`
    new_jobs as materialized (
      select nextval(${JOB_ID_SEQUENCE}::regclass) as id, s.* from (${select}) as s(${list})
    ), keyed as (
      insert into ${jobKeys} (${name(jobKeys.jobName)}, ${name(jobKeys.idempotencyKey)}, ${name(jobKeys.jobId)})
      select job_name, idempotency_key, id from new_jobs where idempotency_key is not null
      on conflict do nothing
      returning ${jobKeys.jobId} as id
    ), inserted as (
      insert into ${jobQueue} (${name(q.id)}, ${list}) overriding system value
      select id, ${list} from new_jobs where idempotency_key is null or id in (select id from keyed)
      returning ${name(q.id)}, ${name(q.jobName)}, ${name(q.idempotencyKey)}, ${name(q.scheduleKey)}, ${name(q.queue)}
    ), notified as (${notifyQueues(sql`inserted`)})`;
}

/** The hot path's statements are named on cronledger's own pool (src/db/prepared.ts): parsed once per connection. */
const PREPARED = { prepared: true } as const;

/** The sequence of job ids (`job_queue.id`'s identity; history rows keep the id they had, and a skipped slot's row draws one). */
export const JOB_ID_SEQUENCE = "cronledger.job_queue_id_seq";

/** Inserts any number of jobs in one statement: columns travel as parallel arrays through unnest, a constant 11 parameters. */
export async function insertJobs(executor: Executor, rows: readonly NewJobRow[]): Promise<InsertedJob[]> {
  const column = <K extends keyof NewJobRow>(key: K) => rows.map((row) => row[key]);
  return query<InsertedJob>(
    executor,
    insertStatement({
      names: column("jobName"),
      queues: column("queue"),
      payloads: column("payloadJson"),
      priorities: column("priority"),
      runAts: column("runAt"),
      delays: column("delayMs"),
      attempts: column("maxAttempts"),
      keys: column("idempotencyKey"),
      scheduleKeys: column("scheduleKey"),
      slots: column("scheduledFor"),
      policies: column("retryPolicyJson"),
    }),
  );
}

/** The insert's text, rendered once (reusable): every enqueue, whatever its size, is the same statement. */
const insertStatement = reusable<"names" | "queues" | "payloads" | "priorities" | "runAts" | "delays" | "attempts" | "keys" | "scheduleKeys" | "slots" | "policies">(
  (value) => sql`
    with ${jobInsertCtes(sql`
      select n, q, p::jsonb, pr, coalesce(ra::timestamptz, now() + ${milliseconds(sql`dm`)}), ma, ik, sk, sf::timestamptz, rp::jsonb
      from unnest(
        ${value("names")}::text[], ${value("queues")}::text[], ${value("payloads")}::text[],
        ${value("priorities")}::int[], ${value("runAts")}::text[], ${value("delays")}::float8[], ${value("attempts")}::int[],
        ${value("keys")}::text[], ${value("scheduleKeys")}::text[], ${value("slots")}::text[], ${value("policies")}::text[]
      ) as t(n, q, p, pr, ra, dm, ma, ik, sk, sf, rp)`)}
    select inserted.id::float8 as id, inserted.job_name, inserted.idempotency_key, inserted.schedule_key
    from inserted cross join notified`,
  PREPARED,
);

/**
 * The jobs holding any of these (job name, idempotency key) pairs, with
 * their status wherever they are (queue or history; `deleted` for a key
 * whose job was deleted by hand).
 */
export async function jobsByIdempotencyKey(
  executor: Executor,
  jobNames: readonly string[],
  keys: readonly string[],
): Promise<{ id: number; job_name: string; idempotency_key: string; status: string }[]> {
  const k = jobKeys;
  return query(
    executor,
    sql`select ${k.jobId}::float8 as id, ${k.jobName} as job_name, ${k.idempotencyKey} as idempotency_key,
          coalesce(
            (select ${jobQueue.status} from ${jobQueue} where ${jobQueue.id} = ${k.jobId}),
            (select ${jobHistory.status} from ${jobHistory} where ${jobHistory.id} = ${k.jobId} limit 1),
            'deleted'
          ) as status
        from ${jobKeys}
        where ${k.jobName} = any(${array(jobNames, "text")}) and ${k.idempotencyKey} = any(${array(keys, "text")})`,
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
  /** Null for a job enqueued without one; a backfilled run's starts with BACKFILL_KEY_PREFIX (src/keys.ts), a run-now's with `trigger|` (src/jobs/trigger-key.ts). */
  readonly idempotencyKey: string | null;
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
  const ordinary = request.limit > 0 && request.jobNames.length > 0;
  const { chores } = request;
  const withChores = chores !== undefined && chores.jobNames.length > 0 && chores.limit > 0;
  return query<ClaimedJob>(
    executor,
    claimStatement({ ordinary, withChores, fixedClock: request.now !== undefined })({
      worker: request.workerId,
      queues: request.queues,
      names: request.jobNames,
      limit: request.limit,
      choreQueue: chores?.queue ?? null,
      choreNames: chores?.jobNames ?? [],
      choreLimit: chores?.limit ?? 0,
      now: request.now?.toISOString() ?? null,
    }),
  );
}

type ClaimSlot = "worker" | "queues" | "names" | "limit" | "choreQueue" | "choreNames" | "choreLimit" | "now";

/** The claim's text, rendered once per shape: with ordinary jobs, with chores, judged at a given instant. */
const claimStatement = reusableShapes<{ ordinary: boolean; withChores: boolean; fixedClock: boolean }, ClaimSlot>(
  ({ ordinary, withChores, fixedClock }, value) => {
    const q = jobQueue;
    const now = fixedClock ? sql`${value("now")}::timestamptz` : sql`now()`;
    const ready = (queue: SQL, names: SQL, limit: SQL) => sql`
      select ${q.id} as id, ${q.priority} as priority, ${q.runAt} as run_at from ${jobQueue}
      where ${q.queue} = ${queue} and ${q.status} = 'queued' and ${q.runAt} <= ${now}
        and ${q.jobName} = any(${names}::text[])
      order by ${q.priority}, ${q.runAt}, ${q.id}
      limit ${limit}
      for update skip locked`;
    const claimable = ordinary
      ? sql`array(
          select c.id from unnest(${value("queues")}::text[]) as q(name)
          cross join lateral (${ready(sql`q.name`, value("names"), sql`${value("limit")}::int`)}) c
          order by c.priority, c.run_at, c.id
          limit ${value("limit")}::int
        )`
      : sql`array[]::bigint[]`;
    const claimed = withChores
      ? sql`array(select id from (${ready(sql`${value("choreQueue")}::text`, value("choreNames"), sql`${value("choreLimit")}::int`)}) as chores) || ${claimable}`
      : claimable;
    return sql`update ${jobQueue} as j
        set ${name(q.status)} = 'running', ${name(q.attempts)} = ${j.attempts} + 1, ${name(q.lockedBy)} = ${value("worker")}::text,
            ${name(q.heartbeatAt)} = now(), ${name(q.startedAt)} = now()
        where ${j.id} = any(${claimed})
          -- The claim commits without waiting for its WAL flush (see claimJobs).
          and (select set_config('synchronous_commit', 'off', true)) = 'off'
        returning ${j.id}::float8 as "id", ${j.jobName} as "jobName", ${j.queue} as "queue", ${j.payload}::text as "payload",
          ${j.priority} as "priority", ${epochMs(j.runAt)} as "runAtMs", ${j.attempts} as "attempts", ${j.maxAttempts} as "maxAttempts",
          ${epochMs(j.scheduledFor)} as "scheduledForMs", ${j.scheduleKey} as "scheduleKey", ${j.idempotencyKey} as "idempotencyKey", ${j.retryPolicy}::text as "retryPolicy"`;
  },
  PREPARED,
);

/** How one attempt's row is written back. */
export interface CompletionRow {
  readonly id: number;
  /** `queued`: back to the queue, after `delayMs` (a retry) or at once (`returned`); any other status ends the job. */
  readonly status: "succeeded" | "failed" | "cancelled" | "queued";
  readonly outcome: string | null;
  /** Stored as last_error when set; the previous error is kept otherwise. */
  readonly error: string | null;
  readonly delayMs: number;
  /** Handed back unfinished (a shutdown): the interrupted attempt is not counted, and the queue is woken. */
  readonly returned: boolean;
}

/**
 * Whether a completion's own transaction waits for its WAL flush. It does
 * not: a completion that a server crash loses leaves its job running, and
 * the reaper runs it again after the lease (at least once, as for a worker
 * that died). Not waiting keeps completion batches from holding the WAL
 * flush that an enqueue's commit waits behind (docs/decisions.md, "Job storage").
 */
const COMPLETIONS_WAIT_FOR_FLUSH = false;

/**
 * Writes the ends of many attempts in one statement: a job that ends leaves
 * the queue for the history (archiveCtes), a job that will run again is
 * updated in the queue. Every row is guarded by `locked_by = workerId and
 * status = 'running'`, so a job the reaper took back is never overwritten
 * by its old worker.
 */
export async function completeJobs(executor: Executor, workerId: string, rows: readonly CompletionRow[], now?: Date): Promise<void> {
  // Which rows to touch travels as two id arrays (the primary key finds them, whatever the planner thinks
  // of how many are running); each row's own values as one JSON object keyed by id, read by a binary
  // search of its keys. Joined to the rows of an unnest instead, the plan hung on the estimate of running
  // rows: after an ANALYZE that saw none, the planner looped over the whole batch for every row it
  // updated (30-80 ms for 500 rows, against 8).
  // A plain success (no outcome, no error: nearly every row of a drain) is left out of the object; the
  // statement reads a row it does not find there as one (`coalesce(..., 'succeeded')`), so the server parses
  // no JSON for it and the worker builds none (perf of a drain: JSON parsing and lookups were 3-4 % of the
  // server's time). One pass over the rows: the worker's side of a drain is allocation-bound.
  const ended: number[] = [];
  const again: number[] = [];
  const own: Record<number, readonly unknown[]> = {};
  for (const row of rows) {
    (row.status === "queued" ? again : ended).push(row.id);
    if (!plainSuccess(row)) own[row.id] = [row.status, row.outcome, row.error, row.delayMs, row.returned ? 1 : 0];
  }
  const statement = now === undefined ? completionAtDatabaseClock : completionAtFixedClock;
  await executor.execute(
    statement({
      values: JSON.stringify(own),
      ended,
      again,
      worker: workerId,
      now: now?.toISOString() ?? null,
    }),
  );
}

/** A row the completion statement needs no values for: succeeded, with no outcome and no error. */
function plainSuccess(row: CompletionRow): boolean {
  return row.status === "succeeded" && row.outcome === null && row.error === null;
}

/** The completion's text, rendered once (src/db/sql/fragments.ts, reusable); with `fixedClock` a retry counts its delay from `now`. */
function completionStatement(fixedClock: boolean) {
  const q = jobQueue;
  return reusable<"values" | "ended" | "again" | "worker" | "now">((value) => {
    // `<> 'queued'` is `= 'running'` in this table (its check constraint), said so that the planner finds the rows
    // by primary key: matched to the running-heartbeat index's predicate, it read that index whole, dead
    // entries of every batch finished since the last vacuum included, so a drain's completions grew slower
    // as it went (60-120 ms each for 500 rows where 8 would do).
    const held = sql`${j.lockedBy} = ${value("worker")}::text and ${j.status} <> 'queued'`;
    const of = (index: number) => sql`(b.v -> ${j.id}::text ->> ${sql.raw(String(index))})`;
    const clockNow = fixedClock ? sql`${value("now")}::timestamptz` : sql`now()`;
    // The id arrays are columns of the one-row `b`, not constants: against a constant array of 500 ids the
    // planner costs 500 index probes and, on a queue of tens of thousands, prefers reading the whole table
    // (4-8 µs a job); against `b`'s column it probes the primary key.
    return sql`with b as (select ${value("values")}::jsonb as v, ${value("ended")}::bigint[] as ended, ${value("again")}::bigint[] as again), requeued as (
          update ${jobQueue} as j set
            ${name(q.status)} = 'queued',
            ${name(q.lastError)} = coalesce(${of(2)}, ${j.lastError}),
            ${name(q.attempts)} = ${j.attempts} - ${of(4)}::int,
            ${name(q.runAt)} = ${clockNow} + ${milliseconds(sql`${of(3)}::float8`)},
            ${name(q.lockedBy)} = null,
            ${name(q.heartbeatAt)} = null
          from b where ${j.id} = any(b.again) and ${held} and ${j.cancelRequestedAt} is null
          returning ${j.queue} as queue, ${of(4)}::int as returned
        ), finished as (
          delete from ${jobQueue} as j using b where ${j.id} = any(b.ended) and ${held}
            ${COMPLETIONS_WAIT_FOR_FLUSH ? sql`` : sql`and (select set_config('synchronous_commit', 'off', true)) = 'off'`}
          returning ${movedToHistory({ status: sql`coalesce(${of(0)}, 'succeeded')`, outcome: of(1), lastError: sql`coalesce(${of(2)}, ${j.lastError})` })}
        ), stopped as (
          -- A job asked to stop is never queued again: a retry or a shutdown's hand-back ends it cancelled (cancelJob, operators.ts).
          delete from ${jobQueue} as j using b where ${j.id} = any(b.again) and ${held} and ${j.cancelRequestedAt} is not null
          returning ${movedToHistory({ status: sql`'cancelled'`, outcome: sql`null::text`, lastError: sql`coalesce(${of(2)}, ${j.lastError})` })}
        ), moved as (
          select * from finished union all select * from stopped
        ), ${archiveCtes()}
        ${notifyQueues(sql`requeued where returned = 1`)}`;
  }, PREPARED);
}

const completionAtDatabaseClock = completionStatement(false);
const completionAtFixedClock = completionStatement(true);

/** What a heartbeat learns: the ids this worker still holds, and which of them an operator asked to stop. */
export interface HeartbeatAnswer {
  readonly alive: Set<number>;
  readonly stops: readonly StopRequest[];
}

/**
 * Refreshes the heartbeat of the given jobs that this worker still holds and
 * returns those ids; a missing id means the reaper took the job back. With
 * them come the stop requests on those jobs (cancel_requested_*, written by
 * cancelJob in src/db/sql/operators.ts): the heartbeat is how a worker that
 * missed the NOTIFY (behind PgBouncer, a dropped LISTEN connection) still
 * learns of them, within lease/3. The same statement refreshes (or
 * restores) the worker's row in the registry (src/db/sql/workers.ts), so it
 * is sent even when the worker holds nothing.
 */
export async function heartbeatJobs(executor: Executor, worker: WorkerRegistration, ids: readonly number[]): Promise<HeartbeatAnswer> {
  const rows = await query<{ id: number; stop_at_ms: number | null; stop_by: string | null; stop_reason: string | null }>(
    executor,
    sql`with registered as (${registerWorker(worker)})
        update ${jobQueue} set ${name(jobQueue.heartbeatAt)} = now()
        where ${jobQueue.id} = any(${array(ids, "bigint")}) and ${jobQueue.lockedBy} = ${worker.id} and ${jobQueue.status} <> 'queued'
        returning ${jobQueue.id}::float8 as id, ${epochMs(jobQueue.cancelRequestedAt)} as stop_at_ms,
          ${jobQueue.cancelRequestedBy} as stop_by, ${jobQueue.cancelReason} as stop_reason`,
  );
  const stops = rows
    .filter((row) => row.stop_at_ms !== null)
    .map((row) => ({ jobId: row.id, requestedAt: new Date(row.stop_at_ms as number), requestedBy: row.stop_by ?? "unknown", reason: row.stop_reason }));
  return { alive: new Set(rows.map((row) => row.id)), stops };
}

// ---------------------------------------------------------------- reaping

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
 * and one without fails terminally, moving to the history; last_error is a
 * LeaseExpiredError naming the worker that went quiet. Served by
 * job_queue_running_heartbeat_idx; queues that regain jobs are notified.
 *
 * The lease also counts from the server's own start: while PostgreSQL was
 * down nobody could heartbeat, so after a restart every worker gets a whole
 * lease to reconnect and beat before any of its jobs is taken back.
 */
export async function reapStaleJobs(executor: Executor, leaseMs: number, now?: Date): Promise<ReapCounts> {
  const q = jobQueue;
  const exhausted = sql`${j.attempts} >= ${j.maxAttempts}`;
  const cutoff = sql`${clock(now)} - ${milliseconds(leaseMs)}`;
  const leaseError = (outcome: string) =>
    sql`format(${LeaseExpiredError.FORMAT}::text, coalesce(${j.lockedBy}, '?'), ${j.attempts}, ${j.heartbeatAt}::text, ${Math.round(leaseMs)}::int, ${outcome}::text)`;
  const rows = await query<{ status: string; job_name: string; n: number }>(
    executor,
    sql`with stale as (
          select ${q.id} as id from ${jobQueue}
          where ${q.status} = 'running' and ${q.heartbeatAt} < ${cutoff} and pg_postmaster_start_time() < ${cutoff}
          for update skip locked
        ), requeued as (
          update ${jobQueue} as j set
            ${name(q.status)} = 'queued',
            ${name(q.runAt)} = now(),
            ${name(q.lastError)} = ${leaseError(LeaseExpiredError.REQUEUED)},
            ${name(q.lockedBy)} = null,
            ${name(q.heartbeatAt)} = null
          where ${j.id} = any(array(select id from stale)) and not ${exhausted} and ${j.cancelRequestedAt} is null
          returning ${j.queue} as queue, ${j.jobName} as job_name
        ), moved as (
          -- A job asked to stop whose worker died ends cancelled, never requeued.
          delete from ${jobQueue} as j where ${j.id} = any(array(select id from stale)) and (${exhausted} or ${j.cancelRequestedAt} is not null)
          returning ${movedToHistory({
            status: sql`case when ${j.cancelRequestedAt} is null then 'failed' else 'cancelled' end`,
            outcome: sql`null::text`,
            lastError: leaseError(LeaseExpiredError.FAILED),
          })}
        ), ${archiveCtes()}, notified as (${notifyQueues(sql`requeued`)})
        select status, job_name, count(*)::int as n
        from (select 'queued' as status, job_name from requeued union all select status, job_name from moved) as reaped
        cross join notified
        group by status, job_name`,
  );
  const count = (status: string) => rows.filter((row) => row.status === status).reduce((sum, row) => sum + row.n, 0);
  const failedByJob = Object.fromEntries(rows.filter((row) => row.status === "failed").map((row) => [row.job_name, row.n]));
  return { requeued: count("queued"), failed: count("failed"), failedByJob };
}

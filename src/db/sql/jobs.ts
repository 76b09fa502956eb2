// A job's life but its end (insert, claim, heartbeat, reap), as one reads it; about 455 lines, most of them the statements' SQL.
import { sql, type SQL } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import { LeaseExpiredError, type StopRequest } from "../../errors.js";
import { jobHistory, jobKeys, jobQueue } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { ARCHIVE, JOB_INSERT } from "./ctes.js";
import { array, clock, epochMs, JOBS_CHANNEL, milliseconds, name, reusable, reusableShapes } from "./fragments.js";
import { archiveCtes, movedToHistory } from "./history.js";
import { registerWorker, type WorkerRegistration } from "./workers.js";

/**
 * A job's life: inserted into `cronledger.job_queue` (its idempotency key
 * into `job_keys`), claimed, heartbeated, reaped when its lease lapses, and
 * at its end moved into `job_history` by the statement that finishes it
 * (src/db/sql/history.ts): a worker's completions and their fence are in
 * src/db/sql/completions.ts.
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

export { JOBS_CHANNEL } from "./fragments.js";
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
 * trace_context, in that order). Each row draws its id first; a keyed row takes its
 * (job_name, idempotency_key) in `job_keys` and is inserted only if it got
 * it, so a key held by any job, queued, running or finished, is skipped,
 * and two inserts of the same key wait on each other's key row, not on a
 * read that a concurrent finish could slip past. Each queue that gained
 * rows is notified once, on commit. Enqueue, the tick's pass and the retry
 * of a failure all insert through it. With `withStatus`, `select` yields a
 * twelfth column, the job's status (`queued`, or `held` for a job an overlap
 * policy holds back, src/db/sql/slot-policy.ts); a held job wakes nobody.
 * `guardKey`, an expression over the rows (default their idempotency_key), is
 * what job_keys holds: a run-now guards its request key while its job keeps
 * the key that says who asked (src/jobs/trigger-key.ts). With `idGiven`,
 * `select` yields each job's id first, drawn from JOB_ID_SEQUENCE by the
 * caller, which then knows its jobs' ids without joining the insert's rows
 * (src/db/sql/dynamic-fire.ts).
 */
export function jobInsertCtes(
  select: SQL,
  options: { readonly withStatus?: boolean; readonly guardKey?: SQL; readonly idGiven?: boolean } = {},
): SQL {
  const guardKey = options.guardKey ?? sql`idempotency_key`;
  const q = jobQueue;
  const columns = [
    ...[q.jobName, q.queue, q.payload, q.priority, q.runAt, q.maxAttempts, q.idempotencyKey, q.scheduleKey, q.scheduledFor, q.retryPolicy, q.traceContext],
    ...(options.withStatus === true ? [q.status] : []),
  ];
  const list = sql.join(
    columns.map((column) => name(column)),
    sql`, `,
  );
  return sql`
    new_jobs as materialized (
      ${options.idGiven === true ? sql`select s.* from (${select}) as s(id, ${list})` : sql`select nextval(${JOB_ID_SEQUENCE}::regclass) as id, s.* from (${select}) as s(${list})`}
    ), keyed as (
      insert into ${jobKeys} (${name(jobKeys.jobName)}, ${name(jobKeys.idempotencyKey)}, ${name(jobKeys.jobId)})
      select job_name, ${guardKey}, id from new_jobs where idempotency_key is not null
      on conflict do nothing
      returning ${jobKeys.jobId} as id
    ), ${JOB_INSERT.inserted} as (
      insert into ${jobQueue} (${name(q.id)}, ${list}) overriding system value
      select id, ${list} from new_jobs where idempotency_key is null or id in (select id from keyed)
      returning ${name(q.id)}, ${name(q.jobName)}, ${name(q.idempotencyKey)}, ${name(q.scheduleKey)}, ${name(q.queue)}, ${name(q.status)}
    ), ${JOB_INSERT.notified} as (${notifyQueues(options.withStatus === true ? sql`${JOB_INSERT.inserted} where status = 'queued'` : JOB_INSERT.inserted)})`;
}

/** The hot path's statements are named on cronledger's own pool (src/db/prepared.ts): parsed once per connection. */
export const PREPARED = { prepared: true } as const;

/** The sequence of job ids (`job_queue.id`'s identity; history rows keep the id they had, and a skipped slot's row draws one). */
export const JOB_ID_SEQUENCE = "cronledger.job_queue_id_seq";

/**
 * Inserts any number of jobs in one statement: columns travel as parallel arrays through unnest, a constant 12
 * parameters. `traceContextJson` is stored with every row: one enqueue call is one producer span (src/open-telemetry.ts).
 */
export async function insertJobs(executor: Executor, rows: readonly NewJobRow[], traceContextJson: string | null = null): Promise<InsertedJob[]> {
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
      trace: traceContextJson,
    }),
  );
}

/** The insert's text, rendered once (reusable): every enqueue, whatever its size, is the same statement. */
const insertStatement = reusable<"names" | "queues" | "payloads" | "priorities" | "runAts" | "delays" | "attempts" | "keys" | "scheduleKeys" | "slots" | "policies" | "trace">(
  (value) => sql`
    with ${jobInsertCtes(sql`
      select n, q, p::jsonb, pr, coalesce(ra::timestamptz, now() + ${milliseconds(sql`dm`)}), ma, ik, sk, sf::timestamptz, rp::jsonb,
        ${value("trace")}::jsonb
      from unnest(
        ${value("names")}::text[], ${value("queues")}::text[], ${value("payloads")}::text[],
        ${value("priorities")}::int[], ${value("runAts")}::text[], ${value("delays")}::float8[], ${value("attempts")}::int[],
        ${value("keys")}::text[], ${value("scheduleKeys")}::text[], ${value("slots")}::text[], ${value("policies")}::text[]
      ) as t(n, q, p, pr, ra, dm, ma, ik, sk, sf, rp)`)}
    select i.id::float8 as id, i.job_name, i.idempotency_key, i.schedule_key
    from ${JOB_INSERT.inserted} i cross join ${JOB_INSERT.notified}`,
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

// ---------------------------------------------------------------- claiming (a job's end is written by src/db/sql/completions.ts)

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
  /** The enqueuing span's context, as JSON; null when nothing traced the enqueue (src/open-telemetry.ts). */
  readonly traceContext: string | null;
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
 *
 * `started_at` is the clock when the claim ran (`clock_timestamp()`, read
 * once per statement), not `now()`: `now()` is fixed when the statement's
 * transaction began (the Bind message, before the claim's custom plan), but
 * the claim finds its rows in a snapshot taken later, which may hold a
 * completion that committed in between and released a held job
 * (releaseHeldCtes, src/db/sql/history.ts). Stamped with `now()`, that job's
 * start could precede the end (`finished_at`, the completion's `now()`) of
 * the job it waited for; read during the claim, it is after that
 * completion's commit, so a job's history never shows it starting before
 * the end that let it start (docs/decisions.md, "Held jobs").
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
            ${name(q.heartbeatAt)} = now(), ${name(q.startedAt)} = (select clock_timestamp())
        where ${j.id} = any(${claimed})
          -- The claim commits without waiting for its WAL flush (see claimJobs).
          and (select set_config('synchronous_commit', 'off', true)) = 'off'
        returning ${j.id}::float8 as "id", ${j.jobName} as "jobName", ${j.queue} as "queue", ${j.payload}::text as "payload",
          ${j.priority} as "priority", ${epochMs(j.runAt)} as "runAtMs", ${j.attempts} as "attempts", ${j.maxAttempts} as "maxAttempts",
          ${epochMs(j.scheduledFor)} as "scheduledForMs", ${j.scheduleKey} as "scheduleKey", ${j.idempotencyKey} as "idempotencyKey", ${j.retryPolicy}::text as "retryPolicy",
          ${j.traceContext}::text as "traceContext"`;
  },
  PREPARED,
);


/** The outcome the reaper gives a job it ends for a lapsed lease: a later result of the same attempt replaces that verdict. */
export const LEASE_EXPIRED_OUTCOME = "lease_expired";

/** What a heartbeat learns: the jobs this worker's attempts still hold, the stop requests on them, and those the reaper ended. */
export interface HeartbeatAnswer {
  readonly alive: Set<number>;
  readonly stops: readonly StopRequest[];
  /**
   * Held jobs the reaper ended (no attempts left) while this worker could not
   * reach the database, and nobody ran since: the attempt runs on, and its
   * result replaces the reaper's verdict (settleLateCompletions).
   */
  readonly reapedHere: Set<number>;
  /** Held jobs the reaper had returned to the queue, taken back by this beat before anyone claimed them. */
  readonly retaken: readonly number[];
}

/** One attempt a worker holds: the job and the attempt's number, the claim's fencing token. */
export interface HeldAttempt {
  readonly id: number;
  readonly attempt: number;
}

/**
 * Refreshes the heartbeat of the attempts this worker holds and returns the
 * jobs still held; a missing id means another attempt holds the job now (the
 * reaper took it back and someone claimed it) or it ended meanwhile. An
 * attempt the reaper returned to the queue, unclaimed since, is taken back
 * (running again, as it never stopped), so the result it reaches is written
 * and the job does not run twice. With them come the stop requests
 * (cancel_requested_*, written by cancelJob in src/db/sql/operators.ts): the
 * heartbeat is how a worker that missed the NOTIFY (behind PgBouncer, a
 * dropped LISTEN connection) still learns of them, within lease/3. The same
 * statement refreshes (or restores) the worker's row in the registry
 * (src/db/sql/workers.ts), so it is sent even when the worker holds nothing.
 */
export async function heartbeatJobs(executor: Executor, worker: WorkerRegistration, held: readonly HeldAttempt[]): Promise<HeartbeatAnswer> {
  const ids = held.map((attempt) => attempt.id);
  const tokens = sql`(select id, attempt from unnest(${array(ids, "bigint")}, ${array(
    held.map((attempt) => attempt.attempt),
    "int",
  )}) as t(id, attempt))`;
  const h = jobHistory;
  const rows = await query<{ id: number; stop_at_ms: number | null; stop_by: string | null; stop_reason: string | null; state: "alive" | "retaken" | "reaped" }>(
    executor,
    sql`with registered as (${registerWorker(worker)}), returned as (
          select ${jobQueue.id} as id from ${jobQueue}
          where ${jobQueue.id} = any(${array(ids, "bigint")}) and ${jobQueue.lockedBy} = ${worker.id} and ${jobQueue.status} = 'queued'
        ), beat as (
          update ${jobQueue} set ${name(jobQueue.heartbeatAt)} = now(), ${name(jobQueue.status)} = 'running'
          where ${jobQueue.id} = any(${array(ids, "bigint")}) and ${jobQueue.lockedBy} = ${worker.id}
            and (${jobQueue.id}, ${jobQueue.attempts}) in ${tokens}
          returning ${jobQueue.id}::float8 as id, ${epochMs(jobQueue.cancelRequestedAt)} as stop_at_ms,
            ${jobQueue.cancelRequestedBy} as stop_by, ${jobQueue.cancelReason} as stop_reason
        )
        select beat.*, case when beat.id in (select id from returned) then 'retaken' else 'alive' end as state from beat
        union all
        -- Held jobs the beat did not find (usually none: a result written a moment before): did the reaper end them for this attempt?
        select ${h.id}::float8, null, null, null, 'reaped' from ${jobHistory}
        where ${h.id} = any(array(select id from ${tokens} as held where id not in (select id from beat)))
          and ${h.lockedBy} = ${worker.id} and ${h.outcome} = ${LEASE_EXPIRED_OUTCOME} and (${h.id}, ${h.attempts}) in ${tokens}`,
  );
  const live = rows.filter((row) => row.state !== "reaped");
  const stops = live
    .filter((row) => row.stop_at_ms !== null)
    .map((row) => ({ jobId: row.id, requestedAt: new Date(row.stop_at_ms as number), requestedBy: row.stop_by ?? "unknown", reason: row.stop_reason }));
  return {
    alive: new Set(live.map((row) => row.id)),
    stops,
    reapedHere: new Set(rows.filter((row) => row.state === "reaped").map((row) => row.id)),
    retaken: rows.filter((row) => row.state === "retaken").map((row) => row.id),
  };
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
 *
 * The same statement releases every held job whose entry has nothing
 * waiting or running left (archiveCtes' `all`): the completion that should
 * have released it may have raced the pass that held it, or never come.
 */
export async function reapStaleJobs(executor: Executor, leaseMs: number, options: { readonly now?: Date | undefined; readonly sparedJobs?: readonly number[] } = {}): Promise<ReapCounts> {
  const { now, sparedJobs = [] } = options;
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
            and not ${q.id} = any(${array(sparedJobs, "bigint")})
          for update skip locked
        ), requeued as (
          update ${jobQueue} as j set
            ${name(q.status)} = 'queued',
            ${name(q.runAt)} = now(),
            ${name(q.lastError)} = ${leaseError(LeaseExpiredError.REQUEUED)},
            -- locked_by stays: until another attempt claims the job, its attempt still holds it (completeJobs, heartbeatJobs).
            ${name(q.heartbeatAt)} = null
          where ${j.id} = any(array(select id from stale)) and not ${exhausted} and ${j.cancelRequestedAt} is null
          returning ${j.queue} as queue, ${j.jobName} as job_name
        ), ${ARCHIVE.moved} as (
          -- A job asked to stop whose worker died ends cancelled, never requeued.
          delete from ${jobQueue} as j where ${j.id} = any(array(select id from stale)) and (${exhausted} or ${j.cancelRequestedAt} is not null)
          returning ${movedToHistory({
            status: sql`case when ${j.cancelRequestedAt} is null then 'failed' else 'cancelled' end`,
            outcome: sql`${LEASE_EXPIRED_OUTCOME}::text`,
            lastError: leaseError(LeaseExpiredError.FAILED),
          })}
        ), ${archiveCtes("all")}, notified as (${notifyQueues(sql`requeued`)})
        select status, job_name, count(*)::int as n
        from (select 'queued' as status, job_name from requeued union all select status, job_name from moved) as reaped
        cross join notified
        group by status, job_name`,
  );
  const count = (status: string) => rows.filter((row) => row.status === status).reduce((sum, row) => sum + row.n, 0);
  const failedByJob = Object.fromEntries(rows.filter((row) => row.status === "failed").map((row) => [row.job_name, row.n]));
  return { requeued: count("queued"), failed: count("failed"), failedByJob };
}

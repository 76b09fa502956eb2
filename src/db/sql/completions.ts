import { sql } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import { jobCounts, jobHistory, jobQueue, supersededAttempts } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { ARCHIVE } from "./ctes.js";
import { array, clock, milliseconds, name, reusable } from "./fragments.js";
import { archiveCtes, historyColumnList, movedToHistory } from "./history.js";
import { LEASE_EXPIRED_OUTCOME, notifyQueues, PREPARED } from "./jobs.js";

/**
 * An attempt's end, written back: the completions of a batch in one
 * statement fenced by their claims (a job that ends leaves the queue for the
 * history, one that runs again is updated in the queue), the rare results
 * the fence turned away settled (a reaper's verdict amended, or the attempt
 * kept as superseded), and the prune of the superseded attempts. The rest
 * of a job's life (insert, claim, heartbeat, reap) is in src/db/sql/jobs.ts.
 */

/** `job_queue` as `j`, for statements that join it with arrays of rows. */
const j = alias(jobQueue, "j");

/** How one attempt's row is written back. */
export interface CompletionRow {
  readonly id: number;
  /** The attempt that ended (the job's `attempts` when this worker claimed it): with the worker's id, the claim's fencing token. */
  readonly attempt: number;
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
 * updated in the queue. Every row is fenced by its claim: it is written only
 * while the job is still held by that attempt (`locked_by` is this worker
 * and `attempts` the attempt's number), running or taken back by the reaper
 * without anyone claiming it since (the reaper leaves `locked_by` on a job it
 * returns to the queue). So a result reached during a lost connection wins
 * over the lease's expiry, and one whose job another attempt has claimed
 * never overwrites that attempt's row. Resolves with what became of the rows
 * the fence turned away (settleLateCompletions): empty on the hot path.
 */
export async function completeJobs(executor: Executor, workerId: string, rows: readonly CompletionRow[], now?: Date): Promise<LateCompletion[]> {
  // Which rows to touch travels as two id arrays (the primary key finds them, whatever the planner thinks
  // of how many are running); each row's own values as one JSON object keyed by id, read by a binary
  // search of its keys. Joined to the rows of an unnest instead, the plan hung on the estimate of running
  // rows: after an ANALYZE that saw none, the planner looped over the whole batch for every row it
  // updated (30-80 ms for 500 rows, against 8).
  // A plain success (no outcome, no error: nearly every row of a drain) is left out of the object; the
  // statement reads a row it does not find there as one (`coalesce(..., 'succeeded')`), so the server parses
  // no JSON for it and the worker builds none (perf of a drain: JSON parsing and lookups were 3-4 % of the
  // server's time). One pass over the rows: the worker's side of a drain is allocation-bound.
  // The fence's tokens (id, attempt) go as two more arrays, checked by a hash of them above the primary
  // key's probes (EXPLAIN: Index Scan on the primary key, then a Hash Semi Join on the tokens).
  const ended: number[] = [];
  const again: number[] = [];
  const ids: number[] = [];
  const attempts: number[] = [];
  const own: Record<number, readonly unknown[]> = {};
  for (const row of rows) {
    (row.status === "queued" ? again : ended).push(row.id);
    ids.push(row.id);
    attempts.push(row.attempt);
    if (!plainSuccess(row)) own[row.id] = [row.status, row.outcome, row.error, row.delayMs, row.returned ? 1 : 0];
  }
  const statement = now === undefined ? completionAtDatabaseClock : completionAtFixedClock;
  const [written] = await query<{ matched: number }>(
    executor,
    statement({
      values: JSON.stringify(own),
      ended,
      again,
      ids,
      attempts,
      worker: workerId,
      now: now?.toISOString() ?? null,
    }),
  );
  if ((written?.matched ?? 0) >= rows.length) return [];
  return settleLateCompletions(executor, workerId, rows);
}

/** A row the completion statement needs no values for: succeeded, with no outcome and no error. */
function plainSuccess(row: CompletionRow): boolean {
  return row.status === "succeeded" && row.outcome === null && row.error === null;
}

/** The completion's text, rendered once (src/db/sql/fragments.ts, reusable); with `fixedClock` a retry counts its delay from `now`. */
function completionStatement(fixedClock: boolean) {
  const q = jobQueue;
  return reusable<"values" | "ended" | "again" | "ids" | "attempts" | "worker" | "now">((value) => {
    // The claim's fence (completeJobs): this worker's attempt still holds the row. No status test: a row the
    // reaper returned to the queue keeps `locked_by`, and a retry or a hand-back written here clears it.
    const held = sql`${j.lockedBy} = ${value("worker")}::text and (${j.id}, ${j.attempts}) in (select id, attempt from tokens)`;
    const of = (index: number) => sql`(b.v -> ${j.id}::text ->> ${sql.raw(String(index))})`;
    const clockNow = fixedClock ? sql`${value("now")}::timestamptz` : sql`now()`;
    // The id arrays are columns of the one-row `b`, not constants: against a constant array of 500 ids the
    // planner costs 500 index probes and, on a queue of tens of thousands, prefers reading the whole table
    // (4-8 µs a job); against `b`'s column it probes the primary key.
    return sql`with b as (select ${value("values")}::jsonb as v, ${value("ended")}::bigint[] as ended, ${value("again")}::bigint[] as again
        ), tokens as materialized (
          select id, attempt from unnest(${value("ids")}::bigint[], ${value("attempts")}::int[]) as t(id, attempt)
        ), requeued as (
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
        ), ${ARCHIVE.moved} as (
          select * from finished union all select * from stopped
        ), ${archiveCtes()}, notified as (${notifyQueues(sql`requeued where returned = 1`)})
        select ((select count(*) from requeued) + (select count(*) from moved))::int as matched from notified`;
  }, PREPARED);
}

const completionAtDatabaseClock = completionStatement(false);
const completionAtFixedClock = completionStatement(true);

/** What became of a result the claim's fence turned away (settleLateCompletions). */
export interface LateCompletion {
  readonly id: number;
  readonly attempt: number;
  /**
   * `amended`: the reaper had ended the job for its lapsed lease (no attempts left) and nobody ran it since: this
   * result replaced that verdict. `superseded`: another attempt had claimed the job (it ran twice), or it was ended
   * otherwise meanwhile: the result is kept in `superseded_attempts`. `written`: the row already held this result
   * (the write had committed before its answer was lost, and was sent again).
   */
  readonly fate: "amended" | "superseded" | "written";
  readonly jobName: string | null;
  /** Where the job was (superseded): its attempt number and status then; null when it no longer exists. */
  readonly jobAttempts: number | null;
  readonly jobStatus: string | null;
}

/** The status a completion row gives its job, as superseded_attempts records it. */
function attemptEnd(row: CompletionRow): string {
  if (row.status !== "queued") return row.status;
  return row.returned ? "returned" : "retry";
}

/**
 * The rows of a batch that the completion's fence turned away, settled one
 * way or another in one statement (the rare path: after a lost connection).
 * A job the reaper failed (or cancelled) for this very attempt's lapsed
 * lease, with nobody having claimed it since, takes this result instead:
 * its history row is written again with it, and the day's counts moved from
 * the old status to the new one. A row that already holds this result (a
 * write sent again after its answer was lost) is left alone. Any other is a
 * result that arrived after another attempt claimed the job, or after the
 * job ended otherwise: it goes to `superseded_attempts`, with where the job
 * was, so the run it stands for is counted and shown, never dropped.
 */
export async function settleLateCompletions(executor: Executor, workerId: string, rows: readonly CompletionRow[]): Promise<LateCompletion[]> {
  const h = alias(jobHistory, "h");
  const c = jobCounts;
  const sa = supersededAttempts;
  const column = <T>(pick: (row: CompletionRow) => T) => rows.map(pick);
  const rowsOut = await query<{ id: number; attempt: number; fate: LateCompletion["fate"]; job_name: string | null; job_attempts: number | null; job_status: string | null }>(
    executor,
    sql`with input as (
          select * from unnest(
            ${array(column((row) => row.id), "bigint")}, ${array(column((row) => row.attempt), "int")}, ${array(column(attemptEnd), "text")},
            ${array(column((row) => row.outcome), "text")}, ${array(column((row) => row.error), "text")}
          ) as t(id, attempt, ended, outcome, error)
        ), verdicts as (
          -- The reaper's terminal verdict on this very attempt (outcome lease_expired), not yet replaced.
          delete from ${jobHistory} as h using input i
          where ${h.id} = i.id and ${h.lockedBy} = ${workerId} and ${h.attempts} = i.attempt and ${h.outcome} = ${LEASE_EXPIRED_OUTCOME}
            and i.ended in ('succeeded', 'failed', 'cancelled')
          returning ${h.id} as id, ${h.jobName} as job_name, ${h.queue} as queue, ${h.payload} as payload, ${h.priority} as priority,
            ${h.maxAttempts} as max_attempts, ${h.idempotencyKey} as idempotency_key, ${h.scheduleKey} as schedule_key,
            ${h.scheduledFor} as scheduled_for, ${h.retryPolicy} as retry_policy, ${h.createdAt} as created_at, i.ended as status,
            i.outcome as outcome, ${h.runAt} as run_at, ${h.attempts} as attempts, ${h.lockedBy} as locked_by,
            coalesce(i.error, ${h.lastError}) as last_error, ${h.startedAt} as started_at, now() as finished_at,
            ${h.traceContext} as trace_context, ${h.status} as old_status, ${h.finishedAt} as old_finished_at
        ), ${ARCHIVE.moved} as (
          select ${historyColumnList} from verdicts
        ), ${archiveCtes()}, uncounted as (
          insert into ${jobCounts} (${name(c.day)}, ${name(c.shard)}, ${name(c.queue)}, ${name(c.status)}, ${name(c.n)})
          -- The writing backend's shard, negated: archiveCtes counts the new status under the backend's own in this same statement, and one
          -- statement may not write a counter row twice (an amend that keeps the status would).
          select (old_finished_at at time zone 'UTC')::date, -pg_backend_pid(), queue, old_status, -count(*) from verdicts group by 1, 3, 4
          on conflict (${name(c.day)}, ${name(c.shard)}, ${name(c.queue)}, ${name(c.status)}) do update set ${name(c.n)} = ${c.n} + excluded.${name(c.n)}
        ), found as (
          select i.*, coalesce(q.job_name, hh.job_name) as job_name, coalesce(q.attempts, hh.attempts) as job_attempts,
            coalesce(q.status, hh.status) as job_status, coalesce(q.locked_by, hh.locked_by) as job_locked_by
          from input i
          left join ${jobQueue} q on q.id = i.id
          left join lateral (select ${h.jobName} as job_name, ${h.attempts} as attempts, ${h.status} as status, ${h.lockedBy} as locked_by
                             from ${jobHistory} as h where ${h.id} = i.id limit 1) hh on q.id is null
          where i.id not in (select id from verdicts)
        ), judged as (
          select f.*, case
            -- The same result already there: a write that committed, sent again after its answer was lost.
            when f.job_status = f.ended and f.job_locked_by = ${workerId} and f.job_attempts = f.attempt then 'written'
            when f.ended in ('retry', 'returned') and f.job_status = 'queued' and f.job_locked_by is null and f.job_attempts in (f.attempt, f.attempt - 1) then 'written'
            else 'superseded' end as fate
          from found f
        ), kept as (
          insert into ${supersededAttempts} (${name(sa.jobId)}, ${name(sa.attempt)}, ${name(sa.worker)}, ${name(sa.jobName)}, ${name(sa.status)},
            ${name(sa.outcome)}, ${name(sa.error)}, ${name(sa.jobAttempts)}, ${name(sa.jobStatus)})
          select id, attempt, ${workerId}, coalesce(job_name, '?'), ended, outcome, error, job_attempts, job_status from judged where fate = 'superseded'
          on conflict do nothing
        )
        select id::float8 as id, attempts as attempt, 'amended' as fate, job_name, attempts as job_attempts, status as job_status from verdicts
        union all
        select id::float8, attempt, fate, job_name, job_attempts, job_status from judged`,
  );
  return rowsOut.map((row) => ({ id: row.id, attempt: row.attempt, fate: row.fate, jobName: row.job_name, jobAttempts: row.job_attempts, jobStatus: row.job_status }));
}

/** Deletes the superseded attempts recorded longer ago than `retentionMs` (the prune chore, with the history's longest retention). */
export async function pruneSupersededAttempts(executor: Executor, retentionMs: number, now?: Date): Promise<number> {
  const rows = await query<{ n: number }>(
    executor,
    sql`with gone as (delete from ${supersededAttempts} where ${supersededAttempts.recordedAt} < ${clock(now)} - ${milliseconds(retentionMs)} returning 1)
        select count(*)::int as n from gone`,
  );
  return rows[0]?.n ?? 0;
}

import { sql, type SQL } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import { jobQueue } from "../../schema.js";
import { SLOT_POLICY } from "./ctes.js";
import { name } from "./fragments.js";
import { archiveCtes, movedToHistory } from "./history.js";
import { CANCEL_CHANNEL, JOB_ID_SEQUENCE } from "./jobs.js";

/**
 * What the scheduler's pass (runPass, src/db/sql/ledger.ts) decides about a
 * claimed slot besides firing it, inside the pass's one statement and on the
 * rows that statement reads, so two replicas can never decide differently:
 *
 * - an entry paused by an operator (its ledger row's `paused_at`) has its
 *   slot recorded as skipped (outcome `paused`) instead of enqueued;
 * - an entry's overlap policy looks at the entry's live jobs (queued, held
 *   or running, in `job_queue`, any slot or a run-now): `skip` records the
 *   slot as skipped (outcome `overlap`) while any is live; `buffer_one`
 *   records it as skipped while one already waits (queued or held), and
 *   otherwise enqueues it, as `held` while one runs; `cancel_other` cancels
 *   the waiting ones (they end `cancelled`, outcome `overlap`), asks the
 *   running ones to stop (`cancel_requested_*` and a notification on
 *   CANCEL_CHANNEL, which their worker acts on) and enqueues the slot, as
 *   `held` while one runs. `allow_all` enqueues it whatever runs, as before.
 *
 * A held job is never claimed: it becomes `queued` in the statement that
 * ends its entry's last running job (archiveCtes, src/db/sql/history.ts), so
 * runs of an entry with either policy never overlap (Temporal's BufferOne
 * and CancelOther start the next run when the running one has ended).
 *
 * A skipped slot moves the ledger as a fired one does and is written to the
 * history as a finished run of its entry (status `skipped`, its reason in
 * `last_error`), through the archiving CTEs every finishing statement
 * shares. Kept apart from the pass's own CTEs so the pass reads as before
 * plus a few lines (slotPolicyCtes takes the slots to decide), and shared
 * with a run-now (src/db/sql/trigger.ts), to which the entry's policy applies
 * the same way. They define `decided` (one row per slot: `key`, `slot_at`,
 * `skip_reason` and `skip_detail`, null for a slot to enqueue, and `hold`,
 * true for a job to insert as `held`), `moved` (the
 * history rows) and `overlap_notified` (to be joined by the final select, so
 * its notifications are sent).
 */

/** `cancel_requested_by` of a stop an entry's overlap policy asked for. */
export const OVERLAP_REQUESTER = "overlap";

const j = alias(jobQueue, "j");

/**
 * The status a decided slot's job is inserted with (`dc`: its `decided`
 * row): `held` while a job of its entry runs, including one this statement
 * asked to stop that a worker claimed after the statement's snapshot, so
 * the new run never starts beside it; `queued` otherwise.
 */
export function slotJobStatus(dc: SQL): SQL {
  return sql`case when ${dc}.hold or ${dc}.key in (select key from ${SLOT_POLICY.stopAsked}) then 'held' else 'queued' end`;
}

/**
 * The policy's CTEs over `candidates`: a select of the slots to decide, one
 * row per entry, with columns `key`, `slot_at`, `overlap`, `paused`
 * (boolean), `paused_by`, `paused_note`, `job_name`, `queue`, `payload`,
 * `priority`, `max_attempts`. `now` is the instant a skipped run is created
 * at. The pass gives its claimed, non-stale slots; a run-now its one entry
 * (src/db/sql/trigger.ts).
 */
export function slotPolicyCtes(candidates: SQL, now: SQL): SQL {
  const q = jobQueue;
  return sql`slot_candidates as materialized (${candidates}
    ), live as materialized (
      -- The live jobs of the entries that have a policy: one index range each (job_queue_schedule_idx).
      select ${q.scheduleKey} as key, count(*) filter (where ${q.status} = 'queued') as queued,
        count(*) filter (where ${q.status} = 'running') as running, count(*) filter (where ${q.status} = 'held') as held,
        min(${q.id}) as oldest_id, min(${q.id}) filter (where ${q.status} in ('queued', 'held')) as waiting_id
      from ${jobQueue}
      where ${q.scheduleKey} in (select key from slot_candidates where overlap <> 'allow_all' and not paused)
      group by ${q.scheduleKey}
    ), ${SLOT_POLICY.decided} as (
      select c.key, c.slot_at, c.job_name, c.queue, c.payload, c.priority, c.max_attempts,
        c.overlap = 'cancel_other' and not c.paused and lv.key is not null as supersedes,
        case when c.paused then 'paused'
             when c.overlap = 'skip' and lv.key is not null then 'overlap'
             when c.overlap = 'buffer_one' and (lv.queued > 0 or lv.held > 0) then 'overlap'
        end as skip_reason,
        case when c.paused then left('paused by ' || coalesce(c.paused_by, 'an operator') || coalesce(': ' || c.paused_note, ''), 1000)
             when c.overlap = 'skip' and lv.key is not null
               then 'overlap policy skip: job #' || lv.oldest_id || ' of this entry is still ' || case when lv.running > 0 then 'running' else 'queued' end
             when c.overlap = 'buffer_one' and (lv.queued > 0 or lv.held > 0)
               then 'overlap policy buffer_one: job #' || lv.waiting_id || ' of this entry already waits'
        end as skip_detail,
        -- Held back until the running one ends: the waiting ones are skipped above (buffer_one) or cancelled below (cancel_other).
        not c.paused and c.overlap in ('buffer_one', 'cancel_other') and coalesce(lv.running, 0) > 0 as hold
      from slot_candidates c left join live lv on lv.key = c.key
    ), superseding as materialized (
      select key, slot_at from ${SLOT_POLICY.decided} where supersedes
    ), superseded_targets as materialized (
      -- The live jobs of the few superseding entries, one index range each (job_queue_schedule_idx), never a scan of the queue per decision.
      select t.id, dc.slot_at from superseding dc
      cross join lateral (
        select ${q.id} as id from ${jobQueue}
        where ${q.scheduleKey} = dc.key and ${q.status} in ('queued', 'held', 'running') and ${q.cancelRequestedAt} is null
        offset 0 -- keeps the subquery per entry: flattened, it was planned as a scan of the queue joined to every entry
      ) as t
    ), superseded as (
      -- cancel_other: the waiting jobs of an entry whose new slot replaces them end cancelled, a held one too.
      delete from ${jobQueue} as j using superseded_targets t
      where ${j.id} = t.id and ${j.status} in ('queued', 'held')
      returning ${movedToHistory({
        status: sql`'cancelled'`,
        outcome: sql`'overlap'::text`,
        lastError: sql`'cancelled by the overlap policy cancel_other: slot ' || to_char(t.slot_at::timestamptz at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || ' replaced it'`,
      })}
    ), ${SLOT_POLICY.stopAsked} as (
      -- cancel_other: the running ones are asked to stop (a job claimed since this statement's snapshot included: the status is checked again on the row).
      update ${jobQueue} as j set ${name(q.cancelRequestedAt)} = now(), ${name(q.cancelRequestedBy)} = ${OVERLAP_REQUESTER},
        ${name(q.cancelReason)} = 'the overlap policy cancel_other: slot ' || to_char(t.slot_at::timestamptz at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || ' replaces it'
      from superseded_targets t
      where ${j.id} = t.id and ${j.status} in ('queued', 'held', 'running') and ${j.cancelRequestedAt} is null
        and ${j.id} not in (select id from superseded)
      returning ${j.id} as id, ${j.scheduleKey} as key
    ), ${SLOT_POLICY.overlapNotified} as (
      select count(pg_notify(${CANCEL_CHANNEL}, id::text)) as n from ${SLOT_POLICY.stopAsked}
    ), ${SLOT_POLICY.moved} as materialized (
      -- A skipped slot is a finished run of its entry that never ran: no idempotency key, so a deliberate backfill may still fire it.
      select nextval(${JOB_ID_SEQUENCE}::regclass) as id, dc.job_name, dc.queue, dc.payload::jsonb as payload, dc.priority, dc.max_attempts,
        null::text as idempotency_key, dc.key as schedule_key, dc.slot_at::timestamptz as scheduled_for, null::jsonb as retry_policy,
        ${now} as created_at, 'skipped'::text as status, dc.skip_reason as outcome, ${now} as run_at, 0 as attempts,
    null::text as locked_by, dc.skip_detail as last_error, null::timestamptz as started_at, now() as finished_at, null::jsonb as trace_context
      from ${SLOT_POLICY.decided} dc
      where dc.skip_reason is not null
      union all
      select * from superseded
    ), ${archiveCtes()}`;
}

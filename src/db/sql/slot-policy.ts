import { sql, type SQL } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import { jobQueue } from "../../schema.js";
import { name } from "./fragments.js";
import { archiveCtes, movedToHistory } from "./history.js";
import { JOB_ID_SEQUENCE } from "./jobs.js";

/**
 * What the scheduler's pass (runPass, src/db/sql/ledger.ts) decides about a
 * claimed slot besides firing it, inside the pass's one statement and on the
 * rows that statement reads, so two replicas can never decide differently:
 *
 * - an entry paused by an operator (its ledger row's `paused_at`) has its
 *   slot recorded as skipped (outcome `paused`) instead of enqueued;
 * - an entry's overlap policy looks at the entry's live jobs (queued or
 *   running, in `job_queue`, any slot or a run-now): `skip` records the slot
 *   as skipped (outcome `overlap`) while any is live; `buffer_one` enqueues
 *   it unless one already waits (or two are live), skipping the slot
 *   otherwise; `cancel_other` cancels the waiting ones (they end
 *   `cancelled`, outcome `overlap`), asks the running ones to stop
 *   (`cancel_requested_*` and a notification on CANCEL_CHANNEL, which their
 *   worker acts on) and enqueues the slot. `allow_all` enqueues it whatever
 *   runs, as before.
 *
 * A skipped slot moves the ledger as a fired one does and is written to the
 * history as a finished run of its entry (status `skipped`, its reason in
 * `last_error`), through the archiving CTEs every finishing statement
 * shares. Kept apart from the pass's own CTEs so the pass reads as before
 * plus a few lines: these CTEs expect the pass's `clock`, `entry` (with
 * `overlap`, `paused`, `paused_by`, `paused_note`), `due` and `claimed`,
 * and define `decided` (one row per claimed, non-stale slot: `key`,
 * `slot_at`, `skip_reason` and `skip_detail`, null for a slot to enqueue),
 * `moved` (the history rows) and `overlap_notified` (to be joined by the
 * final select, so its notifications are sent).
 */

export const OVERLAP_POLICIES = ["allow_all", "skip", "buffer_one", "cancel_other"] as const;
export type OverlapPolicy = (typeof OVERLAP_POLICIES)[number];

/** Workers LISTEN here for stop requests of running jobs; the payload is the job's id. */
export const CANCEL_CHANNEL = "cronledger_cancel";
/** `cancel_requested_by` of a stop an entry's overlap policy asked for. */
export const OVERLAP_REQUESTER = "overlap";

const j = alias(jobQueue, "j");

export function skippedSlotCtes(): SQL {
  const q = jobQueue;
  return sql`live as materialized (
      -- The live jobs of the claimed entries that have a policy: one index range each (job_queue_schedule_idx).
      select ${q.scheduleKey} as key, count(*) filter (where ${q.status} = 'queued') as queued,
        count(*) filter (where ${q.status} = 'running') as running, min(${q.id}) as oldest_id
      from ${jobQueue}
      where ${q.scheduleKey} in (select cl.key from claimed cl join entry e on e.key = cl.key where e.overlap <> 'allow_all' and not coalesce(e.paused, false))
      group by ${q.scheduleKey}
    ), decided as (
      select d.key, d.slot_at, e.overlap = 'cancel_other' and not coalesce(e.paused, false) and lv.key is not null as supersedes,
        case when e.paused then 'paused'
             when e.overlap = 'skip' and lv.key is not null then 'overlap'
             when e.overlap = 'buffer_one' and (lv.queued > 0 or lv.running > 1) then 'overlap'
        end as skip_reason,
        case when e.paused then left('paused by ' || coalesce(e.paused_by, 'an operator') || coalesce(': ' || e.paused_note, ''), 1000)
             when e.overlap = 'skip' and lv.key is not null
               then 'overlap policy skip: job #' || lv.oldest_id || ' of this entry is still ' || case when lv.running > 0 then 'running' else 'queued' end
             when e.overlap = 'buffer_one' and (lv.queued > 0 or lv.running > 1)
               then 'overlap policy buffer_one: ' || case when lv.queued > 0 then 'a job of this entry already waits' else 'two jobs of this entry are running' end
        end as skip_detail
      -- Driven by the due slots (claimed ones only, as a hashed semi-join): a join on the claim's RETURNING was planned as a nested loop.
      from due d join entry e on e.key = d.key left join live lv on lv.key = d.key
      where not d.stale and d.key in (select key from claimed)
    ), superseding as materialized (
      select key, slot_at from decided where supersedes
    ), superseded_targets as materialized (
      -- The live jobs of the few superseding entries, one index range each (job_queue_schedule_idx), never a scan of the queue per decision.
      select t.id, dc.slot_at from superseding dc
      cross join lateral (
        select ${q.id} as id from ${jobQueue}
        where ${q.scheduleKey} = dc.key and ${q.status} in ('queued', 'running') and ${q.cancelRequestedAt} is null
        offset 0 -- keeps the subquery per entry: flattened, it was planned as a scan of the queue joined to every entry
      ) as t
    ), superseded as (
      -- cancel_other: the waiting jobs of an entry whose new slot replaces them end cancelled.
      delete from ${jobQueue} as j using superseded_targets t
      where ${j.id} = t.id and ${j.status} = 'queued'
      returning ${movedToHistory({
        status: sql`'cancelled'`,
        outcome: sql`'overlap'::text`,
        lastError: sql`'cancelled by the overlap policy cancel_other: slot ' || to_char(t.slot_at::timestamptz at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || ' replaced it'`,
      })}
    ), stop_asked as (
      -- cancel_other: the running ones are asked to stop (a job claimed since this statement's snapshot included: the status is checked again on the row).
      update ${jobQueue} as j set ${name(q.cancelRequestedAt)} = now(), ${name(q.cancelRequestedBy)} = ${OVERLAP_REQUESTER},
        ${name(q.cancelReason)} = 'the overlap policy cancel_other: slot ' || to_char(t.slot_at::timestamptz at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || ' replaces it'
      from superseded_targets t
      where ${j.id} = t.id and ${j.status} in ('queued', 'running') and ${j.cancelRequestedAt} is null
        and ${j.id} not in (select id from superseded)
      returning ${j.id} as id
    ), overlap_notified as (
      select count(pg_notify(${CANCEL_CHANNEL}, id::text)) as n from stop_asked
    ), moved as materialized (
      -- A skipped slot is a finished run of its entry that never ran: no idempotency key, so a deliberate backfill may still fire it.
      select nextval(${JOB_ID_SEQUENCE}::regclass) as id, e.job_name, e.queue, e.payload::jsonb as payload, e.priority, e.max_attempts,
        null::text as idempotency_key, e.key as schedule_key, dc.slot_at::timestamptz as scheduled_for, null::jsonb as retry_policy,
        clock.now as created_at, 'skipped'::text as status, dc.skip_reason as outcome, clock.now as run_at, 0 as attempts,
        null::text as locked_by, dc.skip_detail as last_error, null::timestamptz as started_at, now() as finished_at
      from decided dc join entry e on e.key = dc.key cross join clock
      where dc.skip_reason is not null
      union all
      select * from superseded
    ), ${archiveCtes()}`;
}

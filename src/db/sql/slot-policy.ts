import { sql, type SQL } from "drizzle-orm";
import { archiveCtes } from "./history.js";
import { JOB_ID_SEQUENCE } from "./jobs.js";

/**
 * What the scheduler's pass (runPass, src/db/sql/ledger.ts) decides about a
 * claimed slot besides firing it: an entry paused by an operator (its
 * ledger row's `paused_at`) has its slots recorded as skipped instead of
 * enqueued. The decision is made inside the pass's one statement, on the
 * rows it read, so every replica decides the same; the ledger moves as for
 * a fired slot, so resuming fires the next slot, never the paused ones.
 *
 * Kept apart from the pass's own CTEs so the pass reads as before plus one
 * line: these CTEs expect the pass's `clock`, `entry` (with `paused`,
 * `paused_by`, `paused_note`), `due` and `claimed`, and define `decided`
 * (one row per claimed, non-stale slot: `key`, `slot_at`, `skip_reason`
 * null for a slot to enqueue) and `moved` (the skipped slots' history rows,
 * written through the archiving CTEs every finishing statement shares).
 */
export function skippedSlotCtes(): SQL {
  return sql`decided as (
      select cl.key, d.slot_at, case when e.paused then 'paused' end as skip_reason,
        case when e.paused then left('paused by ' || coalesce(e.paused_by, 'an operator') || coalesce(': ' || e.paused_note, ''), 1000) end as skip_detail
      from claimed cl join due d on d.key = cl.key join entry e on e.key = cl.key
      where not d.stale
    ), moved as materialized (
      -- A skipped slot is a finished run of its entry that never ran: no idempotency key, so a deliberate backfill may still fire it.
      select nextval(${JOB_ID_SEQUENCE}::regclass) as id, e.job_name, e.queue, e.payload::jsonb as payload, e.priority, e.max_attempts,
        null::text as idempotency_key, e.key as schedule_key, dc.slot_at::timestamptz as scheduled_for, null::jsonb as retry_policy,
        clock.now as created_at, 'skipped'::text as status, dc.skip_reason as outcome, clock.now as run_at, 0 as attempts,
        null::text as locked_by, dc.skip_detail as last_error, null::timestamptz as started_at, now() as finished_at
      from decided dc join entry e on e.key = dc.key cross join clock
      where dc.skip_reason is not null
    ), ${archiveCtes()}`;
}

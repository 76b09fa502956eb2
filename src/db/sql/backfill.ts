import { sql } from "drizzle-orm";
import { jobHistory, jobKeys, jobQueue, scheduleState } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { JOB_INSERT } from "./ctes.js";
import { arrayLiteral, epochMs } from "./fragments.js";
import { jobInsertCtes } from "./jobs.js";

/**
 * An operator's backfill of one schedule entry's missed slots: one job per
 * slot, each with its own `scheduled_for`, in one statement. The slots come
 * planned (src/schedule/backfill.ts, from the same slot calendar as the
 * ticker); the statement decides which of them get a job.
 */

export interface BackfillInput {
  /** The entry's ledger key (`schedule_state.key`, the jobs' `schedule_key`). */
  readonly ledgerKey: string;
  readonly jobName: string;
  readonly queue: string;
  readonly payloadJson: string;
  readonly priority: number;
  readonly maxAttempts: number;
  /** The planned slots, oldest first, with each one's backfill idempotency key (src/schedule/identity.ts). */
  readonly slots: readonly { readonly slotMs: number; readonly idempotencyKey: string }[];
  /** List what it would do and write nothing. */
  readonly dryRun: boolean;
  /** The backfill's producer span context, as JSON, stored with each job (src/open-telemetry.ts); omitted when the process does not trace. */
  readonly traceContextJson?: string | null;
}

/** What became of one planned slot. */
export interface BackfillRow {
  slot_ms: number;
  /**
   * `enqueued` (or `would_enqueue` in a dry run); `exists`: the slot already
   * has a job of this entry (fired live, backfilled before, or backfilled by
   * a concurrent backfill that got its key first); `ahead`: after the
   * ledger, so the live ticker's to fire.
   */
  outcome: "enqueued" | "would_enqueue" | "exists" | "ahead";
  job_id: number | null;
  /** The ledger value this statement read (null: the entry has no ledger row yet). */
  ledger_ms: number | null;
}

/**
 * Enqueues a job for each planned slot at or before the entry's ledger
 * value (`last_enqueued_slot`, as this statement's snapshot holds it, and
 * never past the database clock) that has no job of the entry yet: none
 * live in `job_queue`, none finished in `job_history` but a record of a
 * skipped slot (a pause or an overlap policy's skip: the slot never ran).
 *
 * Why this never fires a slot twice, with the ticker and other backfills
 * running: the ticker fires only slots after the ledger, and the ledger
 * only moves forward, so a slot at or before the value this snapshot read is
 * never the ticker's again; every job the ticker made for such a slot was
 * committed with the ledger value, so this snapshot sees it. The ledger row
 * is read, not locked: a lock waited for would hand back a newer ledger
 * value than the snapshot the job reads come from, and a slot claimed in
 * between would look unfired. Two backfills of the same slot are kept apart
 * by the database itself: each backfilled job's idempotency key is derived
 * from (entry, slot), and `job_keys`' primary key lets one insert it; the
 * other waits on that key row and skips the slot.
 */
export async function backfillSlots(executor: Executor, input: BackfillInput): Promise<BackfillRow[]> {
  const q = jobQueue;
  const h = jobHistory;
  const slotAt = arrayLiteral(input.slots.map((slot) => new Date(slot.slotMs).toISOString()));
  const keys = arrayLiteral(input.slots.map((slot) => slot.idempotencyKey));
  const candidates = sql`
    ledger as (
      select ${scheduleState.lastEnqueuedSlot} as at from ${scheduleState} where ${scheduleState.key} = ${input.ledgerKey}
    ), planned as (
      select p.slot_at::timestamptz as slot_at, p.idempotency_key, p.n
      from unnest(${slotAt}::text[], ${keys}::text[]) with ordinality as p(slot_at, idempotency_key, n)
    ), behind as (
      select p.* from planned p cross join ledger l where p.slot_at <= least(l.at, now())
    ), open as (
      select b.* from behind b
      where not exists (select 1 from ${jobQueue} where ${q.scheduleKey} = ${input.ledgerKey} and ${q.scheduledFor} = b.slot_at)
        and not exists (
          select 1 from ${jobHistory} where ${h.scheduleKey} = ${input.ledgerKey} and ${h.scheduledFor} = b.slot_at and ${h.status} <> 'skipped'
        )
        and not exists (select 1 from ${jobKeys} where ${jobKeys.jobName} = ${input.jobName} and ${jobKeys.idempotencyKey} = b.idempotency_key)
    )`;
  const outcome = (enqueued: ReturnType<typeof sql>) => sql`
    select ${epochMs(sql`p.slot_at`)} as slot_ms,
      case when b.n is null then 'ahead' when ${enqueued} then ${input.dryRun ? "would_enqueue" : "enqueued"} else 'exists' end as outcome,
      ${input.dryRun ? sql`null::float8` : sql`i.id::float8`} as job_id,
      (select ${epochMs(sql`at`)} from ledger) as ledger_ms
    from planned p left join behind b on b.n = p.n left join open o on o.n = p.n`;
  if (input.dryRun) {
    return query<BackfillRow>(executor, sql`with ${candidates} ${outcome(sql`o.n is not null`)} order by p.n`);
  }
  return query<BackfillRow>(
    executor,
    sql`with ${candidates}, ${jobInsertCtes(sql`
          select ${input.jobName}::text, ${input.queue}::text, ${input.payloadJson}::jsonb, ${input.priority}::int, now(), ${input.maxAttempts}::int,
                 o.idempotency_key, ${input.ledgerKey}::text, o.slot_at, null::jsonb, ${input.traceContextJson ?? null}::jsonb
          from open o order by o.n`)}
        ${outcome(sql`i.id is not null`)} left join ${JOB_INSERT.inserted} i on i.idempotency_key = p.idempotency_key cross join ${JOB_INSERT.notified}
        order by p.n`,
  );
}

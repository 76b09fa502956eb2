import { sql } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import { scheduleState } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { array, clock, epochMs, name } from "./fragments.js";
import { jobInsertCtes } from "./jobs.js";

/**
 * Every statement on the ledger, `cronledger.schedule_state`, written
 * against src/schema.ts. The scheduler's pass is one raw statement of
 * CTEs (drizzle's builder has no data-modifying CTEs joined to arrays):
 * see passStatement.
 */

/** `schedule_state` as `s`, joined to the arrays of planned entries. */
const s = alias(scheduleState, "s");

/** One entry the pass looks at. */
export interface PassEntry {
  readonly key: string;
  readonly jobName: string;
  readonly catchUpWindowMs: number;
  /** The ledger value this process last saw, recreated if the row vanished; null for an entry never seen. */
  readonly knownLedgerMs: number | null;
  readonly queue: string;
  readonly payloadJson: string;
  readonly priority: number;
  readonly maxAttempts: number;
}

/** One slot that may be its entry's due slot, depending on the clock the statement reads. */
export interface PassSlot {
  readonly key: string;
  readonly slotMs: number;
  readonly fireMs: number;
  readonly idempotencyKey: string;
}

export interface PassInput {
  readonly namespace: string;
  /** `tick({ now })`'s fixed instant; null means the database clock. */
  readonly exactNow: Date | null;
  /** The span the clock must read within for the slots to hold. */
  readonly lowMs: number;
  readonly highMs: number;
  /** Ledger values further ahead of the clock than this are corrupt and repaired to now. */
  readonly futureToleranceMs: number;
  readonly entries: readonly PassEntry[];
  readonly slots: readonly PassSlot[];
}

/** One row per entry of the pass (one row with a null key when it had none). */
export interface PassRow {
  now_ms: number;
  key: string | null;
  old_ms: number | null;
  slot_ms: number | null;
  stale: boolean | null;
  claimed: boolean;
  created_ms: number | null;
  repaired: boolean;
  job_id: number | null;
}

/**
 * The scheduler's pass as one statement: read the ledger rows of the
 * planned entries; create the missing ones at `now` (or at the value the
 * process last saw, for a row that vanished under it); repair values in the
 * future; pick each entry's due slot among its candidates by the clock the
 * statement reads; claim them all in one UPDATE guarded by the value read;
 * insert the jobs of the claimed, non-stale slots through the one job
 * insert. Every step sees the same snapshot, and a replica that claimed
 * first makes the guard fail (0 rows: a lost race). A statement is atomic:
 * a crash leaves the claim and its job, or neither.
 */
export async function runPass(executor: Executor, input: PassInput): Promise<PassRow[]> {
  const truncatedNow = sql`date_trunc('milliseconds', ${clock(input.exactNow)})`;
  // The idle pass, every second on every replica: the clock alone, without planning the empty statement.
  if (input.entries.length === 0) {
    return query<PassRow>(
      executor,
      sql`select ${epochMs(truncatedNow)} as now_ms, null as key, null as old_ms, null as slot_ms, null as stale,
            false as claimed, null as created_ms, false as repaired, null as job_id`,
    );
  }
  const entry = <K extends keyof PassEntry>(key: K) => sql.param(input.entries.map((row) => row[key]));
  const slot = <K extends keyof PassSlot>(key: K) => sql.param(input.slots.map((row) => row[key]));
  const knownStart = sql.param(input.entries.map((row) => (row.knownLedgerMs === null ? null : new Date(row.knownLedgerMs).toISOString())));
  const slotAt = sql.param(input.slots.map((row) => new Date(row.slotMs).toISOString()));
  const ledgerMs = epochMs(s.lastEnqueuedSlot);
  return query<PassRow>(
    executor,
    sql`
    with clock as (
      select t as now, ${epochMs(sql`t`)} as now_ms from (select ${truncatedNow} as t) as c
    ), entry as (
      select e.*, ${ledgerMs} as old_ms
      from unnest(
        ${entry("key")}::text[], ${entry("jobName")}::text[], ${entry("catchUpWindowMs")}::float8[], ${knownStart}::text[],
        ${entry("queue")}::text[], ${entry("payloadJson")}::text[], ${entry("priority")}::int[], ${entry("maxAttempts")}::int[]
      ) as e(key, job_name, window_ms, start_at, queue, payload, priority, max_attempts)
      left join ${scheduleState} as s on ${s.key} = e.key
    ), due as (
      select distinct on (c.key) c.key, c.slot_ms, c.slot_at, c.idempotency_key, e.old_ms,
        c.slot_ms < clock.now_ms - e.window_ms as stale
      from unnest(
        ${slot("key")}::text[], ${slot("slotMs")}::float8[], ${slotAt}::text[], ${slot("fireMs")}::float8[], ${slot("idempotencyKey")}::text[]
      ) as c(key, slot_ms, slot_at, fire_ms, idempotency_key)
      join entry e on e.key = c.key
      cross join clock
      where clock.now_ms between ${input.lowMs}::float8 and ${input.highMs}::float8
        and e.old_ms <= clock.now_ms + ${input.futureToleranceMs}::float8
        and c.fire_ms <= clock.now_ms
        and c.slot_ms > e.old_ms
      order by c.key, c.slot_ms desc
    ), created as (
      insert into ${scheduleState} (${name(scheduleState.key)}, ${name(scheduleState.namespace)}, ${name(scheduleState.jobName)}, ${name(scheduleState.lastEnqueuedSlot)})
      select e.key, ${input.namespace}, e.job_name, coalesce(e.start_at::timestamptz, clock.now)
      from entry e cross join clock
      where e.old_ms is null
      on conflict (${name(scheduleState.key)}) do nothing
      returning ${name(scheduleState.key)} as key, ${epochMs(scheduleState.lastEnqueuedSlot)} as ms
    ), repaired as (
      update ${scheduleState} as s set ${name(scheduleState.lastEnqueuedSlot)} = (select now from clock), ${name(scheduleState.updatedAt)} = now()
      from entry e
      -- The clock as a scalar, so the filter picks the few corrupt rows before the join instead of after it.
      where ${s.key} = e.key and e.old_ms > (select now_ms from clock) + ${input.futureToleranceMs}::float8 and ${ledgerMs} = e.old_ms
      returning ${s.key} as key
    ), claimed as (
      update ${scheduleState} as s set ${name(scheduleState.lastEnqueuedSlot)} = d.slot_at::timestamptz, ${name(scheduleState.updatedAt)} = now()
      from due d
      where ${s.key} = d.key and ${ledgerMs} = d.old_ms
      returning ${s.key} as key
    ), ${jobInsertCtes(sql`
      select e.job_name, e.queue, e.payload::jsonb, e.priority, clock.now, e.max_attempts, d.idempotency_key, e.key, d.slot_at::timestamptz, null::jsonb
      from claimed cl join due d on d.key = cl.key join entry e on e.key = cl.key cross join clock
      where not d.stale`)}
    select clock.now_ms, e.key, e.old_ms, d.slot_ms, d.stale, cl.key is not null as claimed, cr.ms as created_ms,
      rp.key is not null as repaired, i.id::float8 as job_id
    from clock cross join notified
    left join entry e on true
    left join due d on d.key = e.key
    left join claimed cl on cl.key = e.key
    left join created cr on cr.key = e.key
    left join repaired rp on rp.key = e.key
    left join inserted i on i.schedule_key = e.key`,
  );
}

export interface LedgerRow {
  key: string;
  slot_ms: number;
  created_ms: number;
  /** False while the row holds the value it was created with: no slot was handled (claimed, skipped or repaired) since. */
  handled: boolean;
}

/** The ledger rows of a namespace: what the status shows. */
export async function ledgerRows(executor: Executor, namespace: string): Promise<LedgerRow[]> {
  return query<LedgerRow>(
    executor,
    sql`select ${scheduleState.key} as key, ${epochMs(scheduleState.lastEnqueuedSlot)} as slot_ms, ${epochMs(scheduleState.createdAt)} as created_ms,
               ${scheduleState.updatedAt} <> ${scheduleState.createdAt} as handled
        from ${scheduleState} where ${scheduleState.namespace} = ${namespace}`,
  );
}

/** Deletes the ledger rows of `namespace` whose key is not in `keep`; returns how many went. */
export async function deleteLedgerRowsExcept(executor: Executor, namespace: string, keep: readonly string[]): Promise<number> {
  const [row] = await query<{ n: number }>(
    executor,
    sql`with deleted as (
          delete from ${scheduleState}
          where ${scheduleState.namespace} = ${namespace} and not (${scheduleState.key} = any(${array(keep, "text")}))
          returning 1
        )
        select count(*)::int as n from deleted`,
  );
  return row?.n ?? 0;
}

/** The database clock, in epoch milliseconds. */
export async function databaseNowMs(executor: Executor): Promise<number> {
  const [row] = await query<{ now_ms: number }>(executor, sql`select ${epochMs(sql`now()`)} as now_ms`);
  return row?.now_ms ?? Date.now();
}

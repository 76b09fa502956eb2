import { sql, type SQL, type SQLWrapper } from "drizzle-orm";
import { dynamicSchedules, scheduleState } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { JOB_INSERT } from "./ctes.js";
import { d, ledgerKeyOf, s, slotArrays, type DynamicDefinitionColumns, type DynamicSlots } from "./dynamic.js";
import { array, clock, epochMs, milliseconds, name, reusableShapes } from "./fragments.js";
import { JOB_ID_SEQUENCE, jobInsertCtes } from "./jobs.js";

/**
 * The due dynamic entries (`cronledger.dynamic_schedules`, src/db/sql/dynamic.ts
 * stores them): the probe that says whether any is due, the statement that
 * takes them and fires those it can, and the release that writes back each
 * one's slots. The scheduler's pass runs them (src/schedule/tick.ts,
 * takeDynamic and runDynamic); docs/decisions.md, "What a due dynamic entry
 * costs", says why the take fires.
 */

/** What fireDue takes of a namespace's due entries. */
export interface DueTake {
  readonly namespace: string;
  /** The namespace of their ledger rows. */
  readonly ledgerNamespace: string;
  /** The most entries one statement takes. */
  readonly limit: number;
  /** How long the entries it leaves to the pass are its replica's (src/schedule/tick.ts, DYNAMIC_LEASE_MS). */
  readonly leaseMs: number;
}

export interface FireDueInput extends DueTake {
  /** tick({ now })'s instant; null: the database clock. */
  readonly exactNow: Date | null;
  readonly traceContextJson: string | null;
  /** A ledger value further ahead of the clock than this is corrupt: the pass repairs it (src/schedule/tick.ts). */
  readonly toleranceMs: number;
}

/** A due entry as fireDue took it: what the pass needs of one it fired, and all of one it left to the pass. */
export interface TakenRow {
  key: string;
  job_name: string;
  cron: string;
  timezone: string;
  jitter_ms: number;
  version: number;
  /** The slot the statement fired; null when it left the entry to the pass. */
  fired_slot_ms: number | null;
  /**
   * The fired slot's job, its id drawn before the insert: were its idempotency key already taken (the ledger's guard
   * leaves that to a ledger edited by hand), no job would have it.
   */
  job_id: number | null;
  /** A fired entry's next slot and its fire time, as the statement moved them (its following slot's). */
  next_slot_ms: number | null;
  next_fire_ms: number | null;
  /** An entry left to the pass: its definition and its ledger row as the statement's snapshot had them. Null for a fired one. */
  left: LeftState | null;
}

/** What the pass needs of an entry the take left to it: its definition and ledger state. */
export interface LeftState extends Omit<DynamicDefinitionColumns, "key" | "job_name" | "cron" | "timezone" | "jitter_ms"> {
  payload: string;
  /** The ledger value; null when the row is gone (the entry was removed and re-created meanwhile, or never had one). */
  ledger_ms: number | null;
  paused: boolean;
  quarantined_until_ms: number | null;
}

/** What fireDue found: the clock it read, the entries it took, and the next fire of the rest (null: none stored). */
export interface Taken {
  readonly nowMs: number;
  readonly rows: readonly TakenRow[];
  readonly nextMs: number | null;
}

type FireDueValue = "now" | "namespace" | "ledgerNamespace" | "limit" | "leaseMs" | "traceContext" | "toleranceMs";

/**
 * The clock, the earliest `next_fire_at` of a namespace (a lease's end
 * included) and how many entries are due, counted up to `limit`: whether
 * anything is due, and how many statements to take it with, from the due
 * index. The idle pass is this statement alone (0.04-0.08 ms of server
 * time at a million stored); fireDue, dozens of CTEs to plan, runs only when
 * it finds something due.
 */
export async function dynamicDue(executor: Executor, input: { readonly namespace: string; readonly exactNow: Date | null; readonly limit: number }): Promise<DueProbe> {
  const now = sql`date_trunc('milliseconds', ${clock(input.exactNow)})`;
  const [row] = await query<{ now_ms: number; dyn_next_ms: number | null; dyn_due: number }>(
    executor,
    sql`select ${epochMs(now)} as now_ms, ${dueProbeColumns(sql`${input.namespace}::text`, sql`${input.limit}::int`, now)}`,
  );
  return { nowMs: row?.now_ms ?? Date.now(), nextMs: row?.dyn_next_ms ?? null, due: row?.dyn_due ?? 0 };
}

/** Whether dynamic entries are due: the clock read, the earliest next fire (a lease's end included; null: none stored), how many are due (up to a limit). */
export interface DueProbe {
  readonly nowMs: number;
  readonly nextMs: number | null;
  readonly due: number;
}

/** What dynamicDue reads, as two columns of any statement (`dyn_next_ms`, `dyn_due`): the pass's first statement asks it too (src/db/sql/ledger.ts). */
export function dueProbeColumns(namespace: SQL, limit: SQL, now: SQL): SQL {
  return sql`(select ${epochMs(sql`min(${d.nextFireAt})`)} from ${dynamicSchedules} as d where ${d.namespace} = ${namespace}) as dyn_next_ms,
    (select count(*)::int from (select 1 from ${dynamicSchedules} as d where ${d.namespace} = ${namespace} and ${d.nextFireAt} <= ${now}
      limit ${limit}) as due) as dyn_due`;
}

/**
 * Takes a namespace's due entries and fires those it can, in one statement:
 * at most `limit`, earliest first, from the due index, `for update skip
 * locked` (a replica's statement skips the rows another is taking, and
 * rows an application's open transaction is changing). An entry whose
 * stored next slot is the one to fire (its following slot's fire time is
 * still ahead, it is not stale) and that no pause, quarantine or overlap
 * policy concerns is fired here: its ledger row claimed from the value read
 * (a compare-and-set on a row it locks, as the pass statement does,
 * src/db/sql/ledger.ts), its job inserted with the slot's idempotency key,
 * its `next_fire_at` and next slot moved to the following ones, which the
 * process computed when it last wrote the row. The others (and a fired
 * entry whose ledger row another session held) get their `next_fire_at` a
 * lease ahead, so other replicas skip them until the pass that fires them
 * releases them (releaseDynamic) or, had it died, the lease ends. A replica
 * that dies after this statement loses nothing: a fired entry's row holds
 * its next slot, only its following one unknown, and such an entry is left
 * to the pass next time. One row per entry taken (one row of nulls when
 * none), each with the clock and the next fire of the entries not taken.
 */
export async function fireDue(executor: Executor, input: FireDueInput): Promise<Taken> {
  const rows = await query<TakenRow & { now_ms: number | null; next_ms: number | null }>(
    executor,
    fireDueStatement({ fixedClock: input.exactNow !== null })({
      now: input.exactNow?.toISOString() ?? null,
      namespace: input.namespace,
      ledgerNamespace: input.ledgerNamespace,
      limit: input.limit,
      leaseMs: input.leaseMs,
      traceContext: input.traceContextJson,
      toleranceMs: input.toleranceMs,
    }),
  );
  // The clock's row first (a union's branches come in order), then one per entry taken.
  const clockRow = rows[0];
  return { nowMs: clockRow?.now_ms ?? Date.now(), nextMs: clockRow?.next_ms ?? null, rows: rows.slice(1) };
}

/**
 * fireDue's columns, as its union's two branches give them: the clock's
 * row (now_ms, next_ms) and a taken entry's (the rest). The entries' rows
 * carry their jobs' ids, drawn before the insert, not joined from it: the
 * planner takes the statement's CTEs for a row or two and joined 5,000 by
 * 5,000 rows in nested loops (25 million comparisons, JIT-compiled,
 * seconds). An entry left to the pass brings its definition and ledger
 * state as one JSON value: a fired one, most of them, parses 12 columns.
 */
const FIRE_DUE_COLUMNS = {
  now_ms: "float8",
  next_ms: "float8",
  key: "text",
  job_name: "text",
  cron: "text",
  timezone: "text",
  jitter_ms: "float8",
  version: "int",
  fired_slot_ms: "float8",
  job_id: "float8",
  next_slot_ms: "float8",
  next_fire_ms: "float8",
  left: "json",
} as const satisfies Partial<Record<keyof TakenRow | "now_ms" | "next_ms", string>>;

/** One branch of fireDue's union: the columns given, every other one a typed null. */
function fireDueBranch(values: Partial<Record<keyof typeof FIRE_DUE_COLUMNS, SQL>>): SQL {
  return sql.join(
    Object.entries(FIRE_DUE_COLUMNS).map(([column, type]) => sql`${values[column as keyof typeof FIRE_DUE_COLUMNS] ?? sql.raw(`null::${type}`)} as ${sql.identifier(column)}`),
    sql`, `,
  );
}

/**
 * A slot's idempotency key as src/schedule/identity.ts (slotIdempotencyKey)
 * builds it for a dynamic entry (`<ledger namespace>|dynamic:<key>@<slot, ISO>`),
 * for a slot the statement fires; test/dynamic-fire.test.ts holds the two
 * equal. A key longer than 255 bytes is bounded by a digest there, not
 * here: fireDue leaves such an entry to the pass.
 */
function slotKeySql(ledgerNamespace: SQL, key: SQLWrapper, slot: SQLWrapper): SQL {
  return sql`(${ledgerNamespace} || '|dynamic:' || ${key} || '@' || to_char(${slot} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`;
}

const fireDueStatement = reusableShapes<{ fixedClock: boolean }, FireDueValue>(({ fixedClock }, value) => {
  const ns = sql`${value("namespace")}::text`;
  const ledgerNs = sql`${value("ledgerNamespace")}::text`;
  const now = sql`(select now from fire_clock)`;
  const slotKey = slotKeySql(ledgerNs, d.key, d.nextSlotAt);
  // Whether the take fires the entry: its next slot is the one due (the following one's fire time still ahead), not
  // stale, and no pause, quarantine or overlap policy concerns it; its ledger row is behind the slot and not corrupt.
  const eligible = sql`coalesce(${d.overlap} = 'allow_all' and ${d.followingFireAt} > ${now}
        and ${d.nextSlotAt} >= ${now} - ${milliseconds(d.catchUpWindowMs)}
        and ${s.lastEnqueuedSlot} < ${d.nextSlotAt} and ${s.lastEnqueuedSlot} <= ${now} + ${milliseconds(sql`${value("toleranceMs")}::float8`)}
        and ${s.pausedAt} is null and ${s.quarantinedUntil} is null and octet_length(${slotKey}) <= 255, false)`;
  const jobs = sql`select f.job_id, f.job_name, f.queue, f.payload, f.priority, clock.now, f.max_attempts, f.idempotency_key, f.ledger_key, f.next_slot_at,
      null::jsonb, ${value("traceContext")}::jsonb
    from fire f cross join fire_clock as clock where f.ledger_key in (select key from fire_claimed)`;
  const fired = sql`x.job_id is not null`;
  const left = sql`json_build_object('payload', x.payload::text, 'catch_up_window_ms', x.catch_up_window_ms, 'queue', x.queue, 'priority', x.priority,
      'max_attempts', x.max_attempts, 'overlap', x.overlap, 'ledger_ms', ${epochMs(sql`x.ledger_at`)}, 'paused', coalesce(x.paused, false),
      'quarantined_until_ms', ${epochMs(sql`x.quarantined_until`)})`;
  return sql`with fire_clock as (
      select t as now, ${epochMs(sql`t`)} as now_ms from (select date_trunc('milliseconds', ${fixedClock ? sql`${value("now")}::timestamptz` : sql`now()`}) as t) as c
    ), due as (
      select ${d.key} as key, ${ledgerKeyOf(ledgerNs, d.key)} as ledger_key, ${d.jobName} as job_name, ${d.payload} as payload, ${d.queue} as queue,
        ${d.priority} as priority, ${d.maxAttempts} as max_attempts, ${d.overlap} as overlap, ${d.catchUpWindowMs} as catch_up_window_ms,
        ${d.nextSlotAt} as next_slot_at, ${s.lastEnqueuedSlot} as ledger_at, ${s.pausedAt} is not null as paused, ${s.quarantinedUntil} as quarantined_until,
        ${slotKey} as idempotency_key, ${eligible} as eligible
      from ${dynamicSchedules} as d left join ${scheduleState} as s on ${s.key} = ${ledgerKeyOf(ledgerNs, d.key)}
      where ${d.namespace} = ${ns} and ${d.nextFireAt} <= ${now}
      order by ${d.nextFireAt} limit ${value("limit")}::int
      for update of d skip locked
    ), fire as (
      select *, nextval(${JOB_ID_SEQUENCE}::regclass) as job_id from due where eligible
    ), fire_locked as (
      select ${s.key} as key from ${scheduleState} as s where ${s.key} = any(array(select ledger_key from fire))
      for update of s skip locked
    ), fire_claimed as (
      -- A compare-and-set on the value the statement read, as the pass's claim (src/db/sql/ledger.ts); a pause or a
      -- quarantine committed since the statement's snapshot is seen here (the row's latest version), and leaves the slot to the pass.
      update ${scheduleState} as s set ${name(scheduleState.lastEnqueuedSlot)} = f.next_slot_at, ${name(scheduleState.updatedAt)} = now()
      from fire f
      where ${s.key} = f.ledger_key and ${s.lastEnqueuedSlot} = f.ledger_at and ${s.pausedAt} is null and ${s.quarantinedUntil} is null
        and f.ledger_key in (select key from fire_locked)
      returning ${s.key} as key
    ), ${jobInsertCtes(jobs, { idGiven: true })}, fired as (
      select f.key, f.next_slot_at, f.job_id, null::jsonb as payload, null::float8 as catch_up_window_ms, null::text as queue, null::int as priority,
        null::int as max_attempts, null::text as overlap, null::timestamptz as ledger_at, null::boolean as paused, null::timestamptz as quarantined_until
      from fire f where f.ledger_key in (select key from fire_claimed)
      union all
      select u.key, u.next_slot_at, null, u.payload, u.catch_up_window_ms, u.queue, u.priority, u.max_attempts, u.overlap, u.ledger_at, u.paused, u.quarantined_until
      from due u where u.ledger_key not in (select key from fire_claimed)
    ), moved as (
      update ${dynamicSchedules} as d set
        ${name(dynamicSchedules.nextFireAt)} = case when ${fired} then nullif(${d.followingFireAt}, 'infinity')
          else ${now} + ${milliseconds(sql`${value("leaseMs")}::float8`)} end,
        ${name(dynamicSchedules.nextSlotAt)} = case when ${fired} then ${d.followingSlotAt} else ${d.nextSlotAt} end,
        ${name(dynamicSchedules.followingSlotAt)} = case when ${fired} then null else ${d.followingSlotAt} end,
        ${name(dynamicSchedules.followingFireAt)} = case when ${fired} then null else ${d.followingFireAt} end
      from fired x
      where ${d.namespace} = ${ns} and ${d.key} = x.key
      returning ${fireDueBranch({
        key: sql`${d.key}`,
        job_name: sql`${d.jobName}`,
        cron: sql`${d.cron}`,
        timezone: sql`${d.timezone}`,
        jitter_ms: sql`${d.jitterMs}`,
        version: sql`${d.version}`,
        fired_slot_ms: sql`case when ${fired} then ${epochMs(sql`x.next_slot_at`)} end`,
        job_id: sql`x.job_id::float8`,
        next_slot_ms: sql`case when ${fired} then ${epochMs(d.nextSlotAt)} end`,
        next_fire_ms: sql`case when ${fired} then ${epochMs(d.nextFireAt)} end`,
        left: sql`case when ${fired} then null else ${left} end`,
      })}
    )
    select ${fireDueBranch({
      now_ms: sql`clock.now_ms`,
      next_ms: sql`(select ${epochMs(sql`min(${d.nextFireAt})`)} from ${dynamicSchedules} as d where ${d.namespace} = ${ns} and ${d.nextFireAt} > clock.now)`,
    })}
    from fire_clock as clock cross join ${JOB_INSERT.notified}
    union all select * from moved`;
});

/** A taken entry's slots, written back unless the entry changed meanwhile (its version). */
export interface Release {
  readonly key: string;
  readonly ledgerKey: string;
  readonly version: number;
  readonly slots: DynamicSlots;
}

/**
 * Writes each taken entry's slots (DynamicSlots), guarded by the version
 * the take read (an upsert in between wrote its own), and deletes the
 * ledger rows of taken entries removed meanwhile (a pass that took one may
 * have recreated it). For an entry the take fired, only its following slot
 * changes: no indexed column, so with the table's fillfactor a HOT update.
 * One statement, whatever the number taken.
 */
export async function releaseDynamic(executor: Executor, namespace: string, releases: readonly Release[]): Promise<void> {
  if (releases.length === 0) return;
  await query(
    executor,
    sql`with r as (
          select * from unnest(${array(
            releases.map((release) => release.key),
            "text",
          )}, ${array(
            releases.map((release) => release.ledgerKey),
            "text",
          )}, ${array(
            releases.map((release) => release.version),
            "int",
          )}, ${sql.join(
            slotArrays(releases.map((release) => release.slots)),
            sql`, `,
          )}) as r(key, ledger_key, version, next_fire_at, next_slot_at, following_slot_at, following_fire_at)
        ), released as (
          update ${dynamicSchedules} as d set ${name(dynamicSchedules.nextFireAt)} = r.next_fire_at::timestamptz,
            ${name(dynamicSchedules.nextSlotAt)} = r.next_slot_at::timestamptz, ${name(dynamicSchedules.followingSlotAt)} = r.following_slot_at::timestamptz,
            ${name(dynamicSchedules.followingFireAt)} = r.following_fire_at::timestamptz
          from r where ${d.namespace} = ${namespace} and ${d.key} = r.key and ${d.version} = r.version
        ), gone as (
          delete from ${scheduleState} as s using r
          where ${s.key} = r.ledger_key and not exists (select 1 from ${dynamicSchedules} as d where ${d.namespace} = ${namespace} and ${d.key} = r.key)
        )
        select 1`,
  );
}

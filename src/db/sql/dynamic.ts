import { sql, type SQL } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import { dynamicScheduleCounts, dynamicSchedules, scheduleLastRuns, scheduleState, type OverlapPolicy, type UpsertOutcome } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { array, clock, epochMs, isoOf, name } from "./fragments.js";

/**
 * Schedules as data (`cronledger.dynamic_schedules`): the statements that
 * store an application's runtime entries, list them, and hand the due ones
 * to the scheduler's pass. An entry's ledger row is an ordinary
 * `schedule_state` row (in the namespace `<namespace>#dynamic`), claimed by
 * the same pass statement as a static entry's (src/db/sql/ledger.ts); this
 * file only adds how the pass finds what is due (takeDueCtes) and how it
 * records each entry's next fire (releaseDynamic). Longer than most: the
 * statements share the table's row shapes and are read together.
 */

export const d = alias(dynamicSchedules, "d");
export const s = alias(scheduleState, "s");

/** A dynamic entry as it is stored: validated and resolved (src/schedule/dynamic-entry.ts). */
export interface DynamicEntryRow {
  readonly key: string;
  readonly jobName: string;
  /** The canonical cron. */
  readonly cron: string;
  readonly timezone: string;
  readonly payloadJson: string;
  readonly jitterMs: number;
  readonly catchUpWindowMs: number;
  readonly queue: string;
  readonly priority: number;
  readonly maxAttempts: number;
  readonly overlap: OverlapPolicy;
  /** Its first slot after the upserting process's clock less a tolerance, the slot after that, and their fire times. */
  readonly slots: DynamicSlots;
}

/**
 * An entry's next slot and the one after it, with their fire times, as the
 * process's calendar computes them (src/schedule/dynamic-entry.ts,
 * slotsFrom) and its row stores them: the take fires an entry whose next
 * slot is the only one due (fireDue). nextFireMs null: it never fires
 * again. nextSlotMs null: the slot is not known (a quarantine's wait), the
 * following ones neither. followingSlotMs and followingFireMs null, with a
 * next slot: there is none after it.
 */
export interface DynamicSlots {
  readonly nextFireMs: number | null;
  readonly nextSlotMs: number | null;
  readonly followingSlotMs: number | null;
  readonly followingFireMs: number | null;
}

/**
 * Each of `slots`' four columns as one array parameter of texts, cast in the
 * statement: next fire, next slot, following slot, following fire
 * ('infinity' for "no following slot"; null for unknown). A column at a
 * time: the entries of a timing share their instants, and isoOf converts
 * only an instant unlike the one before.
 */
export function slotArrays(slots: readonly DynamicSlots[]): SQL[] {
  const following = (row: DynamicSlots) => (row.nextSlotMs === null ? null : (isoOf(row.followingFireMs) ?? "infinity"));
  return [(row: DynamicSlots) => isoOf(row.nextFireMs), (row: DynamicSlots) => isoOf(row.nextSlotMs), (row: DynamicSlots) => isoOf(row.followingSlotMs), following].map(
    (text) =>
      array(
        slots.map((row) => text(row)),
        "text",
      ),
  );
}



/**
 * Creates or changes entries, in one statement on `executor` (cronledger's
 * database or the application's transaction). An unchanged entry is not
 * written at all. A new entry's ledger row is created at the statement's
 * clock (`now()`, or the instant given), so it never fires a slot before it existed; a retimed one (cron,
 * zone or jitter changed) has its ledger moved to `now()` if it was behind,
 * so the new timing fires no slot before the switch, and the ledger's guard
 * keeps a slot the old timing fired from firing again. Existing rows are
 * locked first (`for update`), so two upserts of one key see each other.
 */
export async function upsertDynamic(
  executor: Executor,
  at: { readonly namespace: string; readonly ledgerNamespace: string; readonly now: Date | null },
  rows: readonly DynamicEntryRow[],
): Promise<{ key: string; outcome: UpsertOutcome }[]> {
  if (rows.length === 0) return [];
  const { namespace, ledgerNamespace } = at;
  const now = clock(at.now);
  const column = <K extends keyof DynamicEntryRow>(key: K) => rows.map((row) => row[key]) as (string | number | null)[];
  // The definition a bulk load repeats (job, timing, policy) goes once per distinct one, each row naming its own by
  // position: 4 arrays of N values instead of 12 to build, send and parse. 100,000 rows of one timing into 1,000,000
  // stored, interleaved at load 6-10: median 9.9 s before, 6.5 s after (docs/benchmarks.md).
  const { timings, timingIndex } = distinctTimings(rows);
  const shared = (key: (typeof TIMING_COLUMNS)[number], type: "text" | "int" | "float8") =>
    sql`(${array(
      timings.map((row) => row[key]),
      type,
    )})[u.t]`;
  const sameTiming = sql`o.cron = u.cron and o.timezone = u.timezone and o.jitter_ms = u.jitter_ms`;
  const definition = [d.jobName, d.cron, d.timezone, d.payload, d.jitterMs, d.catchUpWindowMs, d.queue, d.priority, d.maxAttempts, d.overlap];
  const columns = [
    dynamicSchedules.namespace,
    dynamicSchedules.key,
    dynamicSchedules.jobName,
    dynamicSchedules.cron,
    dynamicSchedules.timezone,
    dynamicSchedules.payload,
    dynamicSchedules.jitterMs,
    dynamicSchedules.catchUpWindowMs,
    dynamicSchedules.queue,
    dynamicSchedules.priority,
    dynamicSchedules.maxAttempts,
    dynamicSchedules.overlap,
    ...SLOT_COLUMNS,
  ];
  const list = sql.join(
    columns.map((c) => name(c)),
    sql`, `,
  );
  const excluded = sql.join(
    definition.map((c) => sql`excluded.${name(c)}`),
    sql`, `,
  );
  const changed = await query<{ key: string; outcome: UpsertOutcome }>(
    executor,
    sql`with i as (
          select u.key, ${shared("jobName", "text")} as job_name, ${shared("cron", "text")} as cron, ${shared("timezone", "text")} as timezone,
            u.payload, ${shared("jitterMs", "float8")} as jitter_ms, ${shared("catchUpWindowMs", "float8")} as window_ms,
            ${shared("queue", "text")} as queue, ${shared("priority", "int")} as priority, ${shared("maxAttempts", "int")} as max_attempts,
            ${shared("overlap", "text")} as overlap, u.next_fire_at, u.next_slot_at, u.following_slot_at, u.following_fire_at
          from unnest(${array(column("key"), "text")}, ${array(timingIndex, "int")}, ${array(column("payloadJson"), "text")}, ${sql.join(
            slotArrays(rows.map((row) => row.slots)),
            sql`, `,
          )}) as u(key, t, payload, next_fire_at, next_slot_at, following_slot_at, following_fire_at)
        ), o as (
          select ${d.key} as key, ${d.cron} as cron, ${d.timezone} as timezone, ${d.jitterMs} as jitter_ms from ${dynamicSchedules} as d
          where ${d.namespace} = ${namespace} and ${d.key} = any(array(select key from i))
          for update
        ), upserted as (
          insert into ${dynamicSchedules} as d (${list})
          select ${namespace}, i.key, i.job_name, i.cron, i.timezone, i.payload::jsonb, i.jitter_ms, i.window_ms, i.queue, i.priority, i.max_attempts, i.overlap,
            i.next_fire_at::timestamptz, i.next_slot_at::timestamptz, i.following_slot_at::timestamptz, i.following_fire_at::timestamptz
          -- o first, whatever order the plan reads the CTEs in: a row this statement has updated can no longer be locked by it, and o would miss it.
          from i where (select count(*) from o) >= 0
          on conflict (${name(dynamicSchedules.namespace)}, ${name(dynamicSchedules.key)}) do update set
            ${sql.join(
              definition.map((c) => sql`${name(c)} = excluded.${name(c)}`),
              sql`, `,
            )},
            ${sql.join(
              SLOT_COLUMNS.map(
                (c) => sql`${name(c)} = case
              when (${d.cron}, ${d.timezone}, ${d.jitterMs}) = (excluded.${name(d.cron)}, excluded.${name(d.timezone)}, excluded.${name(d.jitterMs)})
              then d.${name(c)} else excluded.${name(c)} end`,
              ),
              sql`, `,
            )},
            ${name(dynamicSchedules.version)} = ${d.version} + 1, ${name(dynamicSchedules.updatedAt)} = now()
          where (${sql.join(definition, sql`, `)}) is distinct from (${excluded})
          -- xmax is 0 on a row this statement inserted, not on one it updated: exact even when another transaction inserted the key meanwhile.
          returning ${d.key} as key, (d.xmax::text = '0') as inserted, ${d.jobName} as job_name, ${d.cron} as cron, ${d.timezone} as timezone, ${d.jitterMs} as jitter_ms
        ), counted as (
          ${countDelta(namespace, sql`(select count(*) from upserted where inserted)`)}
        ), ledger as (
          insert into ${scheduleState} as s (${name(scheduleState.key)}, ${name(scheduleState.namespace)}, ${name(scheduleState.jobName)}, ${name(scheduleState.lastEnqueuedSlot)})
          select ${ledgerKeyOf(ledgerNamespace, sql`u.key`)}, ${ledgerNamespace}, u.job_name, ${now} from upserted u left join o on o.key = u.key
          where o.key is null or not (${sameTiming})
          on conflict (${name(scheduleState.key)}) do update set
            ${name(scheduleState.lastEnqueuedSlot)} = greatest(${s.lastEnqueuedSlot}, excluded.${name(scheduleState.lastEnqueuedSlot)}),
            ${name(scheduleState.jobName)} = excluded.${name(scheduleState.jobName)}, ${name(scheduleState.updatedAt)} = now()
        )
        select u.key, case when o.key is null then 'created' when ${sameTiming} then 'updated' else 'retimed' end as outcome
        from upserted u left join o on o.key = u.key`,
  );
  // Only the entries written come back: joining every given key to them was estimated at N²/200 rows (50 million for
  // 100,000), which made PostgreSQL JIT-compile the statement (3.4 s of a 10 s upsert of 100,000 at a million stored).
  const outcomes = new Map(changed.map((row) => [row.key, row.outcome]));
  return rows.map((row) => ({ key: row.key, outcome: outcomes.get(row.key) ?? "unchanged" }));
}

/** An entry's slot columns (DynamicSlots), in slotArrays' order. */
const SLOT_COLUMNS = [dynamicSchedules.nextFireAt, dynamicSchedules.nextSlotAt, dynamicSchedules.followingSlotAt, dynamicSchedules.followingFireAt];

/** The columns of a row that entries of one definition share: upsertDynamic sends each distinct set once. */
const TIMING_COLUMNS = ["jobName", "cron", "timezone", "jitterMs", "catchUpWindowMs", "queue", "priority", "maxAttempts", "overlap"] as const;

/** The distinct definitions of `rows` (TIMING_COLUMNS), and each row's position among them, from 1 (SQL arrays). */
function distinctTimings(rows: readonly DynamicEntryRow[]): { timings: DynamicEntryRow[]; timingIndex: number[] } {
  const timings: DynamicEntryRow[] = [];
  const positions = new Map<string, number>();
  let last: DynamicEntryRow | undefined;
  let lastAt = 0;
  const timingIndex = rows.map((row) => {
    // Rows of a bulk load come in runs of one definition: a comparison with the row before, not a lookup, for most.
    if (last !== undefined && TIMING_COLUMNS.every((column) => row[column] === last![column])) return lastAt;
    const id = JSON.stringify(TIMING_COLUMNS.map((column) => row[column]));
    let at = positions.get(id);
    if (at === undefined) {
      timings.push(row);
      at = timings.length;
      positions.set(id, at);
    }
    last = row;
    lastAt = at;
    return at;
  });
  return { timings, timingIndex };
}

const counts = dynamicScheduleCounts;

/**
 * The CTE body that adds `delta` (a scalar: the entries a statement created,
 * or minus those it removed) to this backend's counter row of the namespace
 * (dynamic_schedule_counts); nothing when it is 0. One writer per row, so a
 * transaction never waits on another's count.
 */
function countDelta(namespace: string, delta: SQL): SQL {
  return sql`insert into ${counts} (${name(counts.namespace)}, ${name(counts.shard)}, ${name(counts.n)})
          select ${namespace}, pg_backend_pid(), delta from (select ${delta} as delta) c where delta <> 0
          on conflict (${name(counts.namespace)}, ${name(counts.shard)}) do update set ${name(counts.n)} = ${counts.n} + excluded.${name(counts.n)}`;
}

/** Folds every backend's counter row into shard 0 (the prune chore): the rows summed on read stay few. */
export async function foldDynamicCounts(executor: Executor): Promise<void> {
  await query(
    executor,
    sql`with folded as (
          delete from ${counts} where ${counts.shard} <> 0 returning ${counts.namespace} as namespace, ${counts.n} as n
        )
        insert into ${counts} (${name(counts.namespace)}, ${name(counts.shard)}, ${name(counts.n)})
        select namespace, 0, sum(n) from folded group by namespace
        on conflict (${name(counts.namespace)}, ${name(counts.shard)}) do update set ${name(counts.n)} = ${counts.n} + excluded.${name(counts.n)}`,
  );
}

/**
 * Removes entries: their definition, ledger row and last run, in one
 * statement on `executor`. From its commit no pass fires them: a pass that
 * took one before finds its ledger row gone and fires nothing (it may
 * recreate the row, which its release deletes). Their queued or running
 * jobs are left alone (docs/decisions.md). Returns the keys it removed.
 */
export async function removeDynamic(executor: Executor, namespace: string, entries: readonly { key: string; ledgerKey: string }[]): Promise<string[]> {
  if (entries.length === 0) return [];
  const rows = await query<{ key: string }>(
    executor,
    sql`with removed as (
          delete from ${dynamicSchedules} as d where ${d.namespace} = ${namespace} and ${d.key} = any(${array(
            entries.map((entry) => entry.key),
            "text",
          )})
          returning ${d.key} as key
        ), counted as (
          ${countDelta(namespace, sql`-(select count(*) from removed)`)}
        ), ledger as (
          delete from ${scheduleState} where ${scheduleState.key} = any(${array(
            entries.map((entry) => entry.ledgerKey),
            "text",
          )})
        ), last_runs as (
          delete from ${scheduleLastRuns} where ${scheduleLastRuns.scheduleKey} = any(${array(
            entries.map((entry) => entry.ledgerKey),
            "text",
          )})
        )
        select key from removed`,
  );
  return rows.map((row) => row.key);
}

/** A stored entry's definition columns, as every read of `dynamic_schedules` returns them (the payload aside). */
export interface DynamicDefinitionColumns {
  key: string;
  job_name: string;
  cron: string;
  timezone: string;
  jitter_ms: number;
  catch_up_window_ms: number;
  queue: string;
  priority: number;
  max_attempts: number;
  overlap: string;
}

/** A stored entry with its ledger state and last run, as get and list return it. */
export interface DynamicEntryState extends DynamicDefinitionColumns {
  payload: unknown;
  next_fire_ms: number | null;
  version: number;
  created_ms: number;
  updated_ms: number;
  /** The ledger: the last slot handled. */
  slot_ms: number | null;
  paused_at_ms: number | null;
  paused_by: string | null;
  paused_note: string | null;
  quarantined_until_ms: number | null;
  quarantine_reason: string | null;
  last_run_status: string | null;
  last_run_slot_ms: number | null;
  last_run_finished_ms: number | null;
}

/**
 * An entry's ledger key built from its key, in the database's collation: the
 * key column is `collate "C"`, and a key built from it would be too, which
 * the ledger's primary key (default collation) cannot be searched by. Without
 * it, a page or a pass joined every ledger row (seconds at a million entries).
 */
export function ledgerKeyOf(ledgerNamespace: string | SQL, key: SQL | typeof d.key): SQL {
  return sql`(${ledgerNamespace} || '|' || ${key}) collate "default"`;
}

function stateSelect(ledgerNamespace: string): SQL {
  const r = scheduleLastRuns;
  return sql`select ${d.key} as key, ${d.jobName} as job_name, ${d.cron} as cron, ${d.timezone} as timezone, ${d.payload} as payload,
      ${d.jitterMs} as jitter_ms, ${d.catchUpWindowMs} as catch_up_window_ms, ${d.queue} as queue, ${d.priority} as priority,
      ${d.maxAttempts} as max_attempts, ${d.overlap} as overlap, ${epochMs(d.nextFireAt)} as next_fire_ms, ${d.version} as version,
      ${epochMs(d.createdAt)} as created_ms, ${epochMs(d.updatedAt)} as updated_ms,
      ${epochMs(s.lastEnqueuedSlot)} as slot_ms, ${epochMs(s.pausedAt)} as paused_at_ms, ${s.pausedBy} as paused_by, ${s.pausedNote} as paused_note,
      ${epochMs(s.quarantinedUntil)} as quarantined_until_ms, ${s.quarantineReason} as quarantine_reason,
      ${r.status} as last_run_status, ${epochMs(r.scheduledFor)} as last_run_slot_ms, ${epochMs(r.finishedAt)} as last_run_finished_ms
    from ${dynamicSchedules} as d
    left join ${scheduleState} as s on ${s.key} = ${ledgerKeyOf(ledgerNamespace, d.key)}
    left join ${scheduleLastRuns} on ${r.scheduleKey} = ${ledgerKeyOf(ledgerNamespace, d.key)}`;
}

export async function getDynamic(executor: Executor, namespace: string, ledgerNamespace: string, key: string): Promise<DynamicEntryState | undefined> {
  const [row] = await query<DynamicEntryState>(executor, sql`${stateSelect(ledgerNamespace)} where ${d.namespace} = ${namespace} and ${d.key} = ${key}`);
  return row;
}

export interface DynamicListInput {
  /** Only keys that start with it (byte-wise: the key column is `collate "C"`). */
  readonly prefix: string;
  /** Keyset paging: only keys after this one. */
  readonly after: string | null;
  readonly limit: number;
}

/**
 * One page of entries in key order: a range of the primary key's index
 * (`[prefix, prefix~)`, `~` being after every character a key may hold),
 * after `after`, so the page costs its own rows whatever is stored.
 */
export async function listDynamic(executor: Executor, namespace: string, ledgerNamespace: string, input: DynamicListInput): Promise<DynamicEntryState[]> {
  const low = input.after !== null && input.after >= input.prefix ? sql`${d.key} > ${input.after}` : sql`${d.key} >= ${input.prefix}`;
  return query<DynamicEntryState>(
    executor,
    sql`${stateSelect(ledgerNamespace)} where ${d.namespace} = ${namespace} and ${low} and ${d.key} < ${`${input.prefix}~`}
        order by ${d.key} limit ${input.limit}`,
  );
}

/** The entries of a namespace by state: the sum of its counter rows, ranges of the due index and two partial indexes of the ledger. */
export interface DynamicCounts {
  total: number;
  due: number;
  paused: number;
  quarantined: number;
  never: number;
}

export async function dynamicCounts(executor: Executor, namespace: string, ledgerNamespace: string): Promise<DynamicCounts> {
  const [row] = await query<DynamicCounts>(
    executor,
    sql`select
          (select coalesce(sum(${counts.n}), 0) from ${counts} where ${counts.namespace} = ${namespace})::int as total,
          (select count(*) from ${dynamicSchedules} where ${dynamicSchedules.namespace} = ${namespace} and ${dynamicSchedules.nextFireAt} <= now())::int as due,
          (select count(*) from ${dynamicSchedules} where ${dynamicSchedules.namespace} = ${namespace} and ${dynamicSchedules.nextFireAt} is null)::int as never,
          (select count(*) from ${scheduleState} where ${scheduleState.namespace} = ${ledgerNamespace} and ${scheduleState.pausedAt} is not null)::int as paused,
          (select count(*) from ${scheduleState} where ${scheduleState.namespace} = ${ledgerNamespace} and ${scheduleState.quarantinedUntil} is not null
            and ${scheduleState.quarantinedUntil} > now())::int as quarantined`,
  );
  return row ?? { total: 0, due: 0, paused: 0, quarantined: 0, never: 0 };
}

/** How many stored entries of a namespace run a job not in `jobNames`: what a deploy without those jobs would orphan. */
export async function countDynamicOrphans(executor: Executor, namespace: string, jobNames: readonly string[]): Promise<{ total: number; byJob: Record<string, number> }> {
  const rows = await query<{ job_name: string; n: number }>(
    executor,
    sql`select ${dynamicSchedules.jobName} as job_name, count(*)::int as n from ${dynamicSchedules}
        where ${dynamicSchedules.namespace} = ${namespace} and not (${dynamicSchedules.jobName} = any(${array(jobNames, "text")}))
        group by 1 order by 1`,
  );
  return { total: rows.reduce((sum, row) => sum + row.n, 0), byJob: Object.fromEntries(rows.map((row) => [row.job_name, row.n])) };
}

/**
 * countDynamicOrphans, or null when the database has no dynamic entries'
 * table yet (a deploy plan reads a database whose migrations have not run).
 */
export async function dynamicOrphansIfStored(executor: Executor, namespace: string, jobNames: readonly string[]): Promise<{ total: number; byJob: Record<string, number> } | null> {
  const [table] = await query<{ exists: boolean }>(executor, sql`select to_regclass('cronledger.dynamic_schedules') is not null as exists`);
  return table?.exists === true ? countDynamicOrphans(executor, namespace, jobNames) : null;
}

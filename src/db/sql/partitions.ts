import { sql } from "drizzle-orm";
import { jobCounts, jobHistory, jobKeys } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { name } from "./fragments.js";
import { isLockTimeout } from "../../error-chain.js";

/**
 * The partitions of `cronledger.job_history` (its layout is described in
 * src/db/sql/history.ts): made ahead of time, made out of a plain table by
 * `cronledger migrate`, and dropped whole by retention. Every statement here
 * is DDL or catalog reading except the key and counter cleanup that goes with
 * a drop; DDL runs in DO blocks, one transaction each with its own
 * lock_timeout, so it needs no session state (PgBouncer's transaction mode).
 * About 420 lines: the DDL of the three jobs above (with retention's detach
 * and leaf-by-leaf drop) reads best together.
 */


/** How many days ahead of today the history has partitions; the default partition catches anything beyond. */
export const PARTITION_DAYS_AHEAD = 3;
/** Partitions are dropped and empty day tables removed only if their locks come within this: never a long wait in front of a completion. */
const DROP_LOCK_TIMEOUT_MS = 50;
/** Making a partition waits this long for its locks (it is days ahead; the next prune tries again). */
const CREATE_LOCK_TIMEOUT_MS = 1_000;
/**
 * A day's `_done` leaf is split by hash of id into this many tables, so that
 * retention drops a day as several files, one transaction each: a drop's
 * commit removes its files, about 0.6-0.8 ms per MB on the shared machine
 * (163 MB, a day of 1,000,000 jobs with its indexes, took 112 ms in one
 * commit; docs/benchmarks.md, "Growth"). A quarter keeps each drop near
 * 30 ms at a million jobs a day, under 100 ms up to about 3 million.
 */
export const DONE_PARTS = 4;

const SCHEMA = "cronledger";
const PARENT = "job_history";
const PARTITION_NAME = /^job_history_p(\d{8})(?:_(failed|done))?$/;
const LEGACY_NAME = /^job_history_legacy_(\d{8})$/;

/** One range partition of the history: a day (split into failed and done leaves), the legacy table, or the default. */
export interface HistoryPartition {
  readonly table: string;
  readonly kind: "day" | "legacy" | "default";
  /** UTC day the partition starts (day) or ends before (legacy), as YYYYMMDD; empty for the default. */
  readonly day: string;
  /** For a day: the leaves it still has. */
  readonly leaves: readonly ("failed" | "done")[];
}

const compact = (day: Date) => day.toISOString().slice(0, 10).replace(/-/g, "");
const isoDay = (compactDay: string) => `${compactDay.slice(0, 4)}-${compactDay.slice(4, 6)}-${compactDay.slice(6, 8)}`;
const dayStart = (compactDay: string) => `${isoDay(compactDay)}T00:00:00Z`;
const addDays = (compactDay: string, days: number) => compact(new Date(Date.parse(dayStart(compactDay)) + days * 86_400_000));
/** Identifiers this file makes are plain ASCII (checked), so quoting them is enough. */
const ident = (table: string) => {
  if (!/^[a-z_][a-z0-9_]*$/.test(table)) throw new Error(`cronledger: not a history partition name: ${table}`);
  return `"${SCHEMA}"."${table}"`;
};

/** Whether `cronledger.job_history` is partitioned (made by `cronledger migrate`) or a plain table (made by drizzle-kit alone). */
export async function historyIsPartitioned(executor: Executor): Promise<boolean> {
  const [row] = await query<{ kind: string | null }>(executor, sql`select relkind::text as kind from pg_class where oid = to_regclass(${`${SCHEMA}.${PARENT}`})`);
  return row?.kind === "p";
}

/** The history's partitions, read from the catalog. */
export async function historyPartitions(executor: Executor): Promise<HistoryPartition[]> {
  const parent = `${SCHEMA}.${PARENT}`;
  // Two levels: the history's partitions, and the failed and done leaves of each day.
  const rows = await query<{ child: string; parent: string }>(
    executor,
    sql`select c.relname::text as child, p.relname::text as parent
        from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent
        where i.inhparent = to_regclass(${parent})
           or i.inhparent in (select inhrelid from pg_inherits where inhparent = to_regclass(${parent}))`,
  );
  const partitions = new Map<string, { table: string; kind: HistoryPartition["kind"]; day: string; leaves: ("failed" | "done")[] }>();
  for (const row of rows.filter((candidate) => candidate.parent === PARENT)) {
    const day = PARTITION_NAME.exec(row.child);
    const legacy = LEGACY_NAME.exec(row.child);
    if (day?.[1] !== undefined) partitions.set(row.child, { table: row.child, kind: "day", day: day[1], leaves: [] });
    else if (legacy?.[1] !== undefined) partitions.set(row.child, { table: row.child, kind: "legacy", day: legacy[1], leaves: [] });
    else if (row.child === `${PARENT}_default`) partitions.set(row.child, { table: row.child, kind: "default", day: "", leaves: [] });
  }
  for (const row of rows.filter((candidate) => candidate.parent !== PARENT)) {
    const leaf = PARTITION_NAME.exec(row.child)?.[2];
    const parent = partitions.get(row.parent);
    if (parent !== undefined && (leaf === "failed" || leaf === "done")) parent.leaves.push(leaf);
  }
  return [...partitions.values()].sort((a, b) => a.day.localeCompare(b.day));
}

/** One DO block: the statements run as one transaction, with `lock_timeout` for it alone. */
async function atomically(executor: Executor, lockTimeoutMs: number, statements: readonly string[]): Promise<void> {
  await executor.execute(
    sql.raw(`do $cronledger$ begin perform set_config('lock_timeout', '${Math.round(lockTimeoutMs)}', true); ${statements.join("; ")}; end $cronledger$`),
  );
}

/**
 * Makes the partition of one UTC day: a table for the day split into its
 * failed and done leaves (the done one split again by hash of id into
 * DONE_PARTS tables), filled with any rows the default partition caught
 * for that day, then attached. Attaching takes a SHARE UPDATE EXCLUSIVE lock
 * on the history, which no insert or read waits for (`CREATE TABLE ...
 * PARTITION OF` would take ACCESS EXCLUSIVE).
 */
async function createDay(executor: Executor, day: string): Promise<void> {
  const table = `${PARENT}_p${day}`;
  const from = `'${dayStart(day)}'`;
  const to = `'${dayStart(addDays(day, 1))}'`;
  await atomically(executor, CREATE_LOCK_TIMEOUT_MS, [
    `create table ${ident(table)} (like ${ident(PARENT)} including defaults including constraints) partition by list (status)`,
    `create table ${ident(`${table}_failed`)} partition of ${ident(table)} for values in ('failed')`,
    `create table ${ident(`${table}_done`)} partition of ${ident(table)} default partition by hash (id)`,
    ...Array.from({ length: DONE_PARTS }, (_, part) => `create table ${ident(`${table}_done_${part}`)} partition of ${ident(`${table}_done`)} for values with (modulus ${DONE_PARTS}, remainder ${part})`),
    `with caught as (delete from ${ident(`${PARENT}_default`)} where finished_at >= ${from} and finished_at < ${to} returning *) insert into ${ident(table)} select * from caught`,
    `alter table ${ident(PARENT)} attach partition ${ident(table)} for values from (${from}) to (${to})`,
  ]);
}

/**
 * Makes the partition of the UTC day of `day` if it does not exist (rows the
 * default partition holds for it move in): for loading history that finished
 * on earlier days. Returns whether it made one.
 */
export async function createHistoryPartition(executor: Executor, day: Date): Promise<boolean> {
  const wanted = compact(day);
  const existing = await historyPartitions(executor);
  const legacyEnd = existing.find((partition) => partition.kind === "legacy")?.day ?? "";
  if (wanted < legacyEnd || existing.some((partition) => partition.kind === "day" && partition.day === wanted)) return false;
  await createDay(executor, wanted);
  return true;
}

/**
 * Makes the partitions of today and PARTITION_DAYS_AHEAD days ahead, and of
 * any day the default partition holds rows for, that do not exist yet.
 * Always by the database clock: `finished_at` is written by it, whatever
 * instant a test or a replay judges by. Returns the days made. A partition
 * whose locks do not come in time is left for the next call.
 */
export async function ensureHistoryPartitions(executor: Executor): Promise<string[]> {
  if (!(await historyIsPartitioned(executor))) return [];
  const existing = await historyPartitions(executor);
  const have = new Set(existing.filter((partition) => partition.kind === "day").map((partition) => partition.day));
  const legacyEnd = existing.find((partition) => partition.kind === "legacy")?.day ?? "";
  const [clock] = await query<{ today: string }>(executor, sql`select to_char(now() at time zone 'UTC', 'YYYYMMDD') as today`);
  const today = clock?.today ?? compact(new Date());
  const caught = existing.some((partition) => partition.kind === "default")
    ? await query<{ day: string }>(executor, sql.raw(`select distinct to_char(finished_at at time zone 'UTC', 'YYYYMMDD') as day from ${ident(`${PARENT}_default`)}`))
    : [];
  const wanted = new Set([...Array.from({ length: PARTITION_DAYS_AHEAD + 1 }, (_, offset) => addDays(today, offset)), ...caught.map((row) => row.day)]);
  const made: string[] = [];
  // Days the legacy partition covers stay there: ranges must not overlap.
  for (const day of [...wanted].sort()) {
    if (have.has(day) || day < legacyEnd) continue;
    try {
      await createDay(executor, day);
      made.push(day);
    } catch (error) {
      if (!isLockTimeout(error)) throw error;
    }
  }
  return made;
}

/**
 * Makes a plain `job_history` (drizzle-kit's, or the one migration 0003 made
 * out of the previous release's jobs table) partitioned: the plain table,
 * if it holds rows, becomes the legacy partition up to the end of today (its
 * indexes are attached, not rebuilt, as they have the parent's definitions),
 * else it is dropped; the `jobs` view is pointed at the new table. Run by
 * `cronledger migrate` under its lock; does nothing when the history is
 * partitioned already. Returns whether it changed anything.
 */
export async function partitionHistory(executor: Executor): Promise<boolean> {
  const [plain] = await query<{ kind: string | null; rows: boolean; upper: string }>(
    executor,
    sql`select c.relkind::text as kind, exists (select 1 from ${jobHistory}) as rows,
          to_char(greatest(now(), (select max(${jobHistory.finishedAt}) from ${jobHistory})) at time zone 'UTC' + interval '1 day', 'YYYYMMDD') as upper
        from pg_class c where c.oid = to_regclass(${`${SCHEMA}.${PARENT}`})`,
  );
  if (plain?.kind !== "r") return false;
  const legacy = `${PARENT}_legacy_${plain.upper}`;
  const indexes = await query<{ name: string }>(
    executor,
    sql`select c.relname::text as name from pg_index i join pg_class c on c.oid = i.indexrelid where i.indrelid = to_regclass(${`${SCHEMA}.${PARENT}`})`,
  );
  const view = await query<{ definition: string }>(executor, sql`select pg_get_viewdef(to_regclass(${`${SCHEMA}.jobs`}), true) as definition`);
  const statements = [
    `alter table ${ident(PARENT)} rename to ${legacy}`,
    // Index names are the schema's: the parent's indexes take them, the legacy table's get its prefix.
    ...indexes.map((index) => `alter index ${ident(index.name)} rename to ${index.name.replace(PARENT, legacy).slice(0, 63)}`),
    `create table ${ident(PARENT)} (like ${ident(legacy)} including defaults including constraints) partition by range (finished_at)`,
    ...partitionedIndexes(),
    `create table ${ident(`${PARENT}_default`)} partition of ${ident(PARENT)} default`,
  ];
  // The view names its tables by identity: recreated from its definition (read before the rename), it reads the new parent.
  const definition = view[0]?.definition;
  if (definition) statements.push(`create or replace view "${SCHEMA}"."jobs" as ${definition.replace(/;\s*$/, "")}`);
  statements.push(
    plain.rows
      ? `alter table ${ident(PARENT)} attach partition ${ident(legacy)} for values from (minvalue) to ('${dayStart(plain.upper)}')`
      : `drop table ${ident(legacy)}`,
  );
  await atomically(executor, CREATE_LOCK_TIMEOUT_MS * 30, statements);
  return true;
}

/** The CREATE INDEX statements of src/schema.ts's history indexes, for the partitioned parent. */
function partitionedIndexes(): string[] {
  return [
    `create index job_history_id_idx on ${ident(PARENT)} (id)`,
    `create index job_history_runs_idx on ${ident(PARENT)} (schedule_key, scheduled_for, id) where schedule_key is not null`,
    `create index job_history_failed_idx on ${ident(PARENT)} (finished_at, id) where status = 'failed'`,
    `create index job_history_failed_job_name_idx on ${ident(PARENT)} (job_name, finished_at) where status = 'failed'`,
    `create index job_history_keyed_idx on ${ident(PARENT)} (id) where idempotency_key is not null`,
  ];
}

// ---------------------------------------------------------------- retention

export interface HistoryRetention {
  /** Succeeded, cancelled and skipped jobs are kept this long after they finish. */
  readonly succeededMs: number;
  /** Failed jobs (the failure tickets) are kept this long. */
  readonly failedMs: number;
  /** Idempotency keys deleted per statement ahead of a drop (keyed jobs only). */
  readonly batchSize: number;
  /** Judge the cutoffs at this instant instead of the database clock (tests). */
  readonly now?: Date | undefined;
}

/** What a retention pass removed. */
export interface HistoryPruned {
  /** Finished jobs removed (counted from job_counts before their partitions were dropped). */
  readonly rows: number;
  /** Partitions (leaves, days, the legacy table) dropped. */
  readonly partitions: number;
  /** Partitions left for the next pass because their lock did not come within 50 ms. */
  readonly deferred: number;
}

/** A droppable piece of the history: which table, the table it is a partition of, which rows of job_counts describe it. */
interface Doomed {
  readonly table: string;
  readonly parent: string;
  /** job_counts rows of these days [from, to) and statuses describe its rows. */
  readonly fromDay: string | null;
  readonly toDay: string;
  readonly statuses: "failed" | "done" | "all";
}

/**
 * Retention without deleting rows: every leaf (day and class) whose whole
 * day is older than its class's period leaves the history, and the legacy
 * partition once all of it is. Before that, the idempotency keys of its
 * keyed rows are deleted in batches (a key holds as long as its job exists).
 * Then one short transaction deletes its job_counts rows and detaches it
 * (catalog only: no file is removed, so the lock on the history is held for
 * milliseconds); a day table left without leaves is dropped too. Each of
 * those waits at most 50 ms for its lock and is otherwise left for the next
 * pass. The detached tables, which nothing reads, are then dropped one file
 * set at a time (dropDetached), so no statement removes more than a leaf's
 * files. Then past days' counters are folded into one row each.
 *
 * A crash between the steps leaves either an attached piece with its
 * counters (the next pass starts over: its keys are gone already) or a
 * detached table without them (the next pass drops it): the counters always
 * describe the history's attached rows.
 */
export async function pruneHistory(executor: Executor, retention: HistoryRetention): Promise<HistoryPruned> {
  if (!(await historyIsPartitioned(executor))) return { rows: 0, partitions: 0, deferred: 0 };
  const [clock] = await query<{ succeeded: string; failed: string }>(
    executor,
    sql`select to_char((c.now - ${retention.succeededMs}::float8 * interval '1 millisecond') at time zone 'UTC', 'YYYYMMDD') as succeeded,
               to_char((c.now - ${retention.failedMs}::float8 * interval '1 millisecond') at time zone 'UTC', 'YYYYMMDD') as failed
        from (select ${retention.now === undefined ? sql`now()` : sql`${retention.now.toISOString()}::timestamptz`} as now) as c`,
  );
  if (clock === undefined) return { rows: 0, partitions: 0, deferred: 0 };
  // A day is past its period when the day that holds the cutoff instant starts after it ends.
  const past = (day: string, cutoffDay: string) => addDays(day, 1) <= cutoffDay;
  const doomed: Doomed[] = [];
  for (const partition of await historyPartitions(executor)) {
    if (partition.kind === "legacy" && partition.day <= clock.succeeded && partition.day <= clock.failed) {
      doomed.push({ table: partition.table, parent: PARENT, fromDay: null, toDay: partition.day, statuses: "all" });
    }
    if (partition.kind !== "day") continue;
    const next = addDays(partition.day, 1);
    const failedPast = past(partition.day, clock.failed);
    const donePast = past(partition.day, clock.succeeded);
    if (failedPast && donePast) doomed.push({ table: partition.table, parent: PARENT, fromDay: partition.day, toDay: next, statuses: "all" });
    else if (failedPast && partition.leaves.includes("failed")) doomed.push({ table: `${partition.table}_failed`, parent: partition.table, fromDay: partition.day, toDay: next, statuses: "failed" });
    else if (donePast && partition.leaves.includes("done")) doomed.push({ table: `${partition.table}_done`, parent: partition.table, fromDay: partition.day, toDay: next, statuses: "done" });
  }
  let rows = 0;
  let partitions = 0;
  let deferred = 0;
  for (const piece of doomed) {
    await deleteKeysOf(executor, piece.table, retention.batchSize);
    const counted = countsWhere(piece);
    const [held] = await query<{ n: number }>(executor, sql.raw(`select coalesce(sum(n), 0)::float8 as n from ${ident("job_counts")} where ${counted}`));
    try {
      await atomically(executor, DROP_LOCK_TIMEOUT_MS, [`delete from ${ident("job_counts")} where ${counted}`, `alter table ${ident(piece.parent)} detach partition ${ident(piece.table)}`]);
      rows += held?.n ?? 0;
      partitions += 1;
    } catch (error) {
      if (!isLockTimeout(error)) throw error;
      deferred += 1;
    }
  }
  deferred += await dropEmptyDays(executor);
  deferred += await dropDetached(executor);
  await foldCounts(executor);
  return { rows, partitions, deferred };
}

/** A table of the history's names that is no partition: what retention detached (this pass, or one a crash stopped). */
const DETACHED_NAME = /^job_history_(p\d{8}(_(failed|done)(_\d+)?)?|legacy_\d{8})$/;

/**
 * Drops the tables retention detached from the history, a leaf (one heap
 * and its indexes) per transaction, then the partitioned tables above them
 * in one, as they have no files. Nothing reads them: they are no longer part of the
 * history, and their counters went in the detaching transaction. A drop
 * whose lock does not come within 50 ms is left for the next pass.
 */
async function dropDetached(executor: Executor): Promise<number> {
  const tables = await query<{ name: string; leaves: string }>(
    executor,
    sql.raw(`select c.relname::text as name,
        coalesce((select string_agg(t.relid::regclass::text, ' ' order by t.level desc) from pg_partition_tree(c.oid) t join pg_class l on l.oid = t.relid
          where t.relid <> c.oid and l.relkind = 'r'), '') as leaves
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = '${SCHEMA}' and c.relkind in ('r', 'p') and not c.relispartition and c.relname like 'job\\_history\\_%'`),
  );
  let deferred = 0;
  for (const table of tables.filter((candidate) => DETACHED_NAME.test(candidate.name))) {
    // The tables with files one by one (a hash part of a done leaf, a failed leaf), then the rest at once: partitioned tables have no files.
    const leaves = table.leaves.split(" ").filter(Boolean);
    const names = [...leaves.map((leaf) => leaf.replace(/^"?cronledger"?\./, "").replace(/"/g, "")), table.name];
    try {
      for (const name of names) await atomically(executor, DROP_LOCK_TIMEOUT_MS, [`drop table if exists ${ident(name)}`]);
    } catch (error) {
      if (!isLockTimeout(error)) throw error;
      deferred += 1;
    }
  }
  return deferred;
}

/** The job_counts rows that describe a doomed piece of the history. */
function countsWhere(piece: Doomed): string {
  const days = `day < '${isoDay(piece.toDay)}'${piece.fromDay === null ? "" : ` and day >= '${isoDay(piece.fromDay)}'`}`;
  if (piece.statuses === "all") return days;
  return `${days} and status ${piece.statuses === "failed" ? "=" : "<>"} 'failed'`;
}

/**
 * Deletes the idempotency keys of a table's keyed rows, `batchSize` per
 * statement, in id order: the ids come from `job_history_keyed_idx` alone
 * (an index-only scan once the day is vacuumed), and the keys go by
 * `job_keys_job_id_idx`, where one day's keys sit together. Matching by
 * name and key instead read a heap page of the day and one of job_keys per
 * key: 0.39 s per 1,000 keys with a cold cache (docs/benchmarks.md, "Growth").
 * The batch's id range is spelled out: joined to the batch alone, the
 * planner read all of job_keys into a hash (0.45 s for 110,000 keys); with
 * the range it reads the range's index entries and heap pages (27 ms).
 */
async function deleteKeysOf(executor: Executor, table: string, batchSize: number): Promise<void> {
  const k = jobKeys;
  for (let after = -1; ; ) {
    const [row] = await query<{ last: number | null; n: number }>(
      executor,
      sql`with batch as (
            select id from ${sql.raw(ident(table))}
            where idempotency_key is not null and id > ${after} order by id limit ${batchSize}
          ), bounds as (
            select min(id) as lo, max(id) as hi from batch
          ), deleted as (
            delete from ${jobKeys} using batch, bounds where ${k.jobId} = batch.id and ${k.jobId} between bounds.lo and bounds.hi
          )
          select max(id)::float8 as last, count(*)::int as n from batch`,
    );
    if (row?.last === null || row?.last === undefined || row.n < batchSize) return;
    after = row.last;
  }
}

/** Day tables whose leaves are all gone: dropped (this locks the history itself, so only if the lock comes at once). */
async function dropEmptyDays(executor: Executor): Promise<number> {
  let deferred = 0;
  for (const partition of await historyPartitions(executor)) {
    if (partition.kind !== "day" || partition.leaves.length > 0) continue;
    try {
      await atomically(executor, DROP_LOCK_TIMEOUT_MS, [`drop table ${ident(partition.table)}`]);
    } catch (error) {
      if (!isLockTimeout(error)) throw error;
      deferred += 1;
    }
  }
  return deferred;
}

/** Folds the counters of days before today into shard 0: one row per (day, queue, status) instead of one per backend that wrote. */
async function foldCounts(executor: Executor): Promise<void> {
  const c = jobCounts;
  await executor.execute(
    sql`with folded as (
          delete from ${jobCounts} where ${c.day} < (now() at time zone 'UTC')::date and ${c.shard} <> 0
          returning ${c.day} as day, ${c.queue} as queue, ${c.status} as status, ${c.n} as n
        )
        insert into ${jobCounts} (${name(c.day)}, ${name(c.shard)}, ${name(c.queue)}, ${name(c.status)}, ${name(c.n)})
        select day, 0, queue, status, sum(n) from folded group by day, queue, status
        on conflict (${name(c.day)}, ${name(c.shard)}, ${name(c.queue)}, ${name(c.status)}) do update set ${name(c.n)} = ${c.n} + excluded.${name(c.n)}`,
  );
}

// Finished jobs in bulk for the benches (bench/growth.ts, bench/status.ts): written by the same
// archiving CTEs as cronledger's own statements (the history, job_counts, schedule_last_runs; keys
// into job_keys), made by generate_series instead of run, with the history's indexes built after
// the rows as a restore would (minutes faster than row by row).
import { sql as drizzleSql } from "drizzle-orm";
import postgres from "postgres";
import { archiveCtes } from "../src/db/sql/history.js";
import { createHistoryPartition } from "../src/db/sql/partitions.js";
import { createCronledger, silentLogger } from "../src/index.js";

export interface HistoryShape {
  /** How many finished rows. */
  readonly rows: number;
  /** The newest row finishes this long before `end`; each row `spacingMs` after the one before. */
  readonly end: Date;
  readonly spacingMs: number;
  /** Every `scheduledEvery`-th row is a run of one of these schedule keys (round robin), with its slot's idempotency key. */
  readonly scheduleKeys?: readonly string[];
  readonly scheduledEvery?: number;
  /** Every `keyedEvery`-th row has an idempotency key of its own (an enqueue with a key). */
  readonly keyedEvery?: number;
  /** Every `failedEvery`-th row failed (a failure ticket); the rest succeeded. */
  readonly failedEvery?: number;
  /** Rows added to a history that has its indexes (BENCH_REUSE's refill of a dropped day): they stay, and the id sequence is not moved back. */
  readonly addToExisting?: boolean;
}

/** Writes the history of `shape` into the database at `url` (migrated); returns the seconds it took. */
export async function generateHistory(url: string, shape: HistoryShape): Promise<number> {
  const started = performance.now();
  const first = shape.end.getTime() - shape.rows * shape.spacingMs;
  // The days' partitions first, so no row lands in the default partition.
  const ledger = createCronledger({ database: { url, poolSize: 2 }, logger: silentLogger, chores: false });
  try {
    // Rounded: a first row a float error before midnight would make an empty day before it.
    for (let day = Math.floor((first + 1) / 86_400_000) * 86_400_000; day < shape.end.getTime(); day += 86_400_000) {
      await createHistoryPartition(ledger.database.db, new Date(day));
    }
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const indexes = await sql<{ name: string; definition: string }[]>`
        select indexname as name, indexdef as definition from pg_indexes where schemaname = 'cronledger' and tablename = 'job_history'`;
      if (!shape.addToExisting) for (const index of indexes) await sql.unsafe(`drop index cronledger."${index.name}"`);
      await sql`set synchronous_commit = off`;
      const keys = shape.scheduleKeys ?? [];
      const scheduledEvery = keys.length === 0 ? 0 : (shape.scheduledEvery ?? 100);
      const statement = drizzleSql`
        with moved as (
          select g::bigint as id, case when ${scheduledEvery} > 0 and g % ${scheduledEvery} = 0 then 'bench.scheduled' else 'bench.history' end as job_name,
            'default' as queue, '{}'::jsonb as payload, 0 as priority, 5 as max_attempts,
            case when ${scheduledEvery} > 0 and g % ${scheduledEvery} = 0 then k.key || '@' || to_char(t, 'YYYY-MM-DD"T"HH24:MI:SS.MS')
                 when ${shape.keyedEvery ?? 0} > 0 and g % ${shape.keyedEvery ?? 1} = 0 then 'bench-key-' || g end as idempotency_key,
            case when ${scheduledEvery} > 0 and g % ${scheduledEvery} = 0 then k.key end as schedule_key,
            case when ${scheduledEvery} > 0 and g % ${scheduledEvery} = 0 then t end as scheduled_for,
            null::jsonb as retry_policy, t as created_at,
            case when g % ${shape.failedEvery ?? 50} = 1 then 'failed' else 'succeeded' end as status, null::text as outcome,
            t as run_at, 1 as attempts, 'bench:1:history' as locked_by,
            case when g % ${shape.failedEvery ?? 50} = 1 then 'Error: downstream said no' end as last_error,
            t as started_at, t + interval '3 milliseconds' as finished_at, null::jsonb as trace_context
          from generate_series(1, ${shape.rows}) as g
          cross join lateral (select to_timestamp(${first / 1000}::float8 + g * ${shape.spacingMs / 1000}::float8) as t) as x
          left join lateral (select ${JSON.stringify(keys)}::jsonb ->> ((g / greatest(${scheduledEvery}, 1)) % greatest(${keys.length}, 1))::int as key) as k on true
        ), ${archiveCtes()}, keyed as (
          insert into cronledger.job_keys (job_name, idempotency_key, job_id) select job_name, idempotency_key, id from moved where idempotency_key is not null
        )
        select 1`;
      await ledger.database.db.execute(statement);
      if (!shape.addToExisting) {
        await sql`select setval('cronledger.job_queue_id_seq', ${shape.rows})`;
        // pg_indexes gives a partitioned index as `ON ONLY` the parent, which would build no partition's index.
        for (const index of indexes) await sql.unsafe(index.definition.replace(" ON ONLY ", " ON "));
      }
      await sql`vacuum (analyze) cronledger.job_history, cronledger.job_keys, cronledger.job_counts, cronledger.schedule_last_runs`;
    } finally {
      await sql.end({ timeout: 1 });
    }
  } finally {
    await ledger.close();
  }
  return (performance.now() - started) / 1000;
}

/** The history's heap and index sizes, over all its partitions. */
export async function historySize(url: string): Promise<{ table: string; indexes: string }> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [size] = await sql<{ table: string; indexes: string }[]>`
      select pg_size_pretty(sum(pg_table_size(relid))) as table, pg_size_pretty(sum(pg_indexes_size(relid))) as indexes
      from pg_partition_tree('cronledger.job_history') where isleaf`;
    return size ?? { table: "?", indexes: "?" };
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/** Every job table emptied (the jobs view reads them). */
export const TRUNCATE_JOBS = "truncate cronledger.job_queue, cronledger.job_history, cronledger.job_keys, cronledger.job_counts, cronledger.schedule_last_runs";

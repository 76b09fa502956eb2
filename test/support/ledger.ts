import { sql } from "drizzle-orm";
import { createCronledger, type Cronledger, type CronledgerOptions } from "../../src/cronledger.js";
import { openDatabase, resolveDatabaseSetting, query, type Database } from "../../src/db/connection.js";
import { migrateDatabase } from "../../src/db/migrate.js";
import { silentLogger } from "../../src/log.js";
import { createTestDatabase } from "./database.js";

export type Backend = "postgres" | "pglite";

/** The backends a scheduler test runs on; concurrency tests stay on PostgreSQL. */
export const BACKENDS: readonly Backend[] = ["postgres", "pglite"];

export interface TestStore {
  readonly backend: Backend;
  /** Opens a migrated ledger over this store; PGlite stores are one instance, so they share it. */
  open(options?: Omit<CronledgerOptions, "database">): Promise<Cronledger>;
  dispose(): Promise<void>;
}

/**
 * A fresh database for one test: its own PostgreSQL database, or an
 * in-memory PGlite. Every ledger opened on it sees the same rows.
 */
export async function createTestStore(backend: Backend, label: string): Promise<TestStore> {
  const opened: Cronledger[] = [];
  if (backend === "postgres") {
    const database = await createTestDatabase(label);
    return {
      backend,
      async open(options = {}) {
        const ledger = createCronledger({ logger: silentLogger, ...options, database: { url: database.url, poolSize: 4 } });
        opened.push(ledger);
        await ledger.migrate();
        return ledger;
      },
      async dispose() {
        await Promise.all(opened.map((ledger) => ledger.close()));
        await database.drop();
      },
    };
  }
  // Booting PGlite costs seconds, so a test file keeps one migrated instance and empties it per store.
  embedded ??= (async () => {
    const database = openDatabase(resolveDatabaseSetting("memory://"));
    await migrateDatabase(database);
    return database;
  })();
  const database = await embedded;
  await query(database.db, sql`truncate cronledger.job_queue, cronledger.job_history, cronledger.job_keys, cronledger.job_counts, cronledger.schedule_last_runs, cronledger.schedule_state, cronledger.workers, cronledger.schedule_versions, cronledger.dynamic_schedules, cronledger.dynamic_schedule_counts`);
  return {
    backend,
    async open(options = {}) {
      return createCronledger({ logger: silentLogger, ...options, database });
    },
    async dispose() {},
  };
}

let embedded: Promise<Database> | undefined;

export async function rows<T>(ledger: Cronledger, statement: ReturnType<typeof sql>): Promise<T[]> {
  return query<T>(ledger.database.db, statement);
}

export async function jobCount(ledger: Cronledger, jobName?: string): Promise<number> {
  const [row] = await rows<{ n: number }>(
    ledger,
    jobName === undefined
      ? sql`select count(*)::int as n from cronledger.jobs`
      : sql`select count(*)::int as n from cronledger.jobs where job_name = ${jobName}`,
  );
  return row?.n ?? 0;
}

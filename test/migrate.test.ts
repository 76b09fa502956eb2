import { sql } from "drizzle-orm";
import postgres from "postgres";
import { describe, expect, it } from "vitest";
import { openDatabase, resolveDatabaseSetting, query } from "../src/db/connection.js";
import { availableMigrations, migrateDatabase, MIGRATIONS_SCHEMA, MIGRATIONS_TABLE } from "../src/db/migrate.js";
import { watch } from "./support/child.js";
import { useTestDatabase } from "./support/database.js";

const FIXTURE = new URL("./fixtures/migrate-process.ts", import.meta.url).pathname;

/** One replica booting in its own OS process; resolves with what it printed. */
async function migrateInProcess(url: string): Promise<string> {
  const finished = await watch(process.execPath, ["--import", "tsx", FIXTURE], { env: { ...process.env, DATABASE_URL: url } }).exited;
  if (finished.code !== 0) throw new Error(`migrate process exited ${finished.code}: ${finished.stderr}`);
  return finished.stdout.trim();
}

describe("migrate()", () => {
  const database = useTestDatabase(import.meta.url);

  it("applies once from 4 processes at once, leaves the application's drizzle journal untouched, and is a no-op twice", async () => {
    // The application's own drizzle journal, as drizzle-kit's migrator leaves it.
    const app = postgres(database.url, { max: 1, onnotice: () => {} });
    await app`create schema drizzle`;
    await app`create table drizzle.__drizzle_migrations (id serial primary key, hash text not null, created_at bigint)`;
    await app`insert into drizzle.__drizzle_migrations (hash, created_at) values ('app-0001', 4102444800000)`;

    const outputs = await Promise.all([1, 2, 3, 4].map(() => migrateInProcess(database.url)));
    const applied = outputs.map((output) => (JSON.parse(output) as { applied: number }).applied).sort();
    expect(applied).toEqual([0, 0, 0, availableMigrations()]);

    const [journal] = await app<{ n: number }[]>`select count(*)::int as n from drizzle.__cronledger_migrations`;
    expect(journal?.n).toBe(availableMigrations());
    const appJournal = await app<{ hash: string }[]>`select hash from drizzle.__drizzle_migrations`;
    expect(appJournal.map((row) => row.hash)).toEqual(["app-0001"]);
    const tables = await app<{ name: string; kind: string }[]>`
      select relname::text as name, relkind::text as kind from pg_class
      where relnamespace = 'cronledger'::regnamespace and relkind in ('r', 'p', 'v') and not relispartition order by relname`;
    expect(tables).toEqual([
      { name: "dynamic_schedule_counts", kind: "r" },
      { name: "dynamic_schedules", kind: "r" },
      { name: "job_counts", kind: "r" },
      { name: "job_history", kind: "p" },
      { name: "job_keys", kind: "r" },
      { name: "job_queue", kind: "r" },
      { name: "jobs", kind: "v" },
      { name: "schedule_last_runs", kind: "r" },
      { name: "schedule_state", kind: "r" },
      { name: "schedule_versions", kind: "r" },
      { name: "superseded_attempts", kind: "r" },
      { name: "workers", kind: "r" },
    ]);
    await app.end({ timeout: 1 });

    const again = openDatabase(resolveDatabaseSetting({ url: database.url, poolSize: 2 }));
    try {
      expect(await migrateDatabase(again)).toEqual({ applied: 0, adopted: 0 });
      const [count] = await query<{ n: number }>(
        again.db,
        sql`select count(*)::int as n from ${sql.identifier(MIGRATIONS_SCHEMA)}.${sql.identifier(MIGRATIONS_TABLE)}`,
      );
      expect(count?.n).toBe(availableMigrations());
    } finally {
      await again.close();
    }
  });

  it("migrates embedded PGlite with the same migrations", async () => {
    const embedded = openDatabase(resolveDatabaseSetting("memory://"));
    try {
      expect(await migrateDatabase(embedded)).toEqual({ applied: availableMigrations(), adopted: 0 });
      expect(await migrateDatabase(embedded)).toEqual({ applied: 0, adopted: 0 });
    } finally {
      await embedded.close();
    }
  });
});

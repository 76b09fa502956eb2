import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { is } from "drizzle-orm";
import { getTableConfig, getViewConfig, PgTable, PgView } from "drizzle-orm/pg-core";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createCronledger } from "../src/cronledger.js";
import { openDatabase, resolveDatabaseSetting, query } from "../src/db/connection.js";
import { availableMigrations, migrateDatabase } from "../src/db/migrate.js";
import { ensureSchema, inspectSchema, MIGRATIONS_FOLDER, schemaVersions, type SchemaVersion } from "../src/db/schema-check.js";
import { ConfigError, MigrationError, MigrationRequiredError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { defineSchedule } from "../src/schedule/define-schedule.js";
import * as schema from "../src/schema.js";
import { envWithout, runCli } from "./support/child.js";
import { useTestDatabase } from "./support/database.js";
import { parseExposition } from "./support/prometheus.js";

const GOOD_CONFIG = fileURLToPath(new URL("./fixtures/cli/good.config.mjs", import.meta.url));
const ping = defineJob({ name: "schema-check.ping", payload: z.object({ n: z.number() }), run: () => {} });
const schedule = defineSchedule([{ job: ping, cron: "* * * * * *", payload: { n: 1 } }]);

/** Everything src/schema.ts declares, named as the schema check names catalog objects. */
function declaredObjects(): Set<string> {
  const objects = new Set<string>();
  // Every table src/schema.ts exports: a table added without a migration fails the test below.
  for (const table of (Object.values(schema) as unknown[]).filter((value): value is PgTable => is(value, PgTable))) {
    const config = getTableConfig(table);
    const qualified = `${config.schema}.${config.name}`;
    objects.add(`table ${qualified}`);
    for (const column of config.columns) {
      objects.add(`column ${qualified}.${column.name}`);
      if (column.primary) objects.add(`constraint ${config.schema}.${config.name}_pkey`);
    }
    for (const index of config.indexes) objects.add(`index ${config.schema}.${index.config.name}`);
    for (const check of config.checks) objects.add(`constraint ${config.schema}.${check.name}`);
    for (const key of config.primaryKeys) objects.add(`constraint ${config.schema}.${key.getName()}`);
  }
  for (const view of (Object.values(schema) as unknown[]).filter((value): value is PgView => is(value, PgView))) {
    const config = getViewConfig(view);
    objects.add(`view ${config.schema}.${config.name}`);
    for (const column of Object.values(config.selectedFields) as { name: string }[]) objects.add(`column ${config.schema}.${config.name}.${column.name}`);
  }
  return objects;
}

/** What the server holds in the cronledger and drizzle schemas: a write of any kind shows up here. */
async function footprint(url: string): Promise<{ schemas: string[]; relations: number }> {
  const client = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const schemas = await client<{ nspname: string }[]>`select nspname from pg_namespace where nspname in ('cronledger', 'drizzle') order by 1`;
    const [relations] = await client<{ n: number }[]>`
      select count(*)::int as n from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname in ('cronledger', 'drizzle')`;
    return { schemas: schemas.map((row) => row.nspname), relations: relations?.n ?? 0 };
  } finally {
    await client.end({ timeout: 1 });
  }
}

/** Runs the statements of a drizzle-kit migration file as `drizzle-kit migrate` does: split at its breakpoints. */
async function applySqlFile(url: string, file: string): Promise<void> {
  const client = postgres(url, { max: 1, onnotice: () => {} });
  try {
    for (const statement of readFileSync(file, "utf8").split("--> statement-breakpoint")) await client.unsafe(statement);
  } finally {
    await client.end({ timeout: 1 });
  }
}

/** The newest schema version this checkout ships. */
function latest(): SchemaVersion {
  const versions = schemaVersions();
  const last = versions[versions.length - 1];
  if (last === undefined) throw new Error("no migrations shipped");
  return last;
}

describe("the shipped schema versions", () => {
  it("end with exactly what src/schema.ts declares (a schema change without a generated migration fails here)", () => {
    const versions = schemaVersions();
    expect(versions).toHaveLength(availableMigrations());
    expect(versions.at(-1)?.objects).toEqual(declaredObjects());
    expect(versions[0]).toMatchObject({ version: 1, tag: "0000_init" });
  });
});

describe("an empty database", () => {
  const database = useTestDatabase(import.meta.url);

  it("enqueue, enqueueMany, tick, work and start each throw one MigrationRequiredError, set the init gauge, and write nothing", async () => {
    const ledger = createCronledger({ database: { url: database.url, poolSize: 2 }, jobs: [ping], schedule, logger: silentLogger });
    try {
      const attempts: [string, () => Promise<unknown>][] = [
        ["enqueue", () => ledger.enqueue(ping, { n: 1 })],
        ["enqueueMany", () => ledger.enqueueMany([{ job: ping, payload: { n: 2 } }])],
        ["tick", () => ledger.tick()],
        ["work", () => ledger.work({ once: true })],
        ["start", () => ledger.start()],
      ];
      for (const [name, attempt] of attempts) {
        const error = await attempt().then(
          () => new Error(`${name} resolved`),
          (thrown: unknown) => thrown,
        );
        expect(error, name).toBeInstanceOf(MigrationRequiredError);
        expect(error).toMatchObject({ code: "migration_required", foundVersion: 0, requiredVersion: availableMigrations() });
        expect((error as Error).message).toMatch(
          new RegExp(`^cronledger's tables do not exist in PostgreSQL .* \\(schema version 0\\); this version of cronledger needs schema version ${latest().version} \\(migration ${latest().tag}\\)\\. Run \`cronledger migrate\``),
        );
      }
      const gauge = parseExposition((await ledger.metrics?.registry.metrics()) ?? "").value("cronledger_init_failure");
      expect(gauge).toBe(1);
      expect(await footprint(database.url)).toEqual({ schemas: [], relations: 0 });

      // After the migration the same ledger passes the check (a failure is not remembered) and clears the gauge.
      await ledger.migrate();
      await ledger.enqueue(ping, { n: 3 });
      expect(parseExposition((await ledger.metrics?.registry.metrics()) ?? "").value("cronledger_init_failure")).toBe(0);
    } finally {
      await ledger.close();
    }
  });
});

describe("every CLI command against an empty database", () => {
  const database = useTestDatabase(import.meta.url);

  const commands: readonly (readonly string[])[] = [["worker"], ["tick", "--once"], ["status"], ["failures"]];
  it.each(commands)("cronledger %s prints one migration_required error naming `cronledger migrate`, exits 1, writes nothing", async (...command) => {
    const result = await runCli([...command, "--config", GOOD_CONFIG], { env: { ...process.env, DATABASE_URL: database.url } });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    const errors = result.stderr.split("\n").filter((line) => line.startsWith("error"));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(new RegExp(`^error \\[migration_required\\]: cronledger's tables do not exist in .*schema version 0.*needs schema version ${latest().version}.*Run \`cronledger migrate\``));
    expect(result.stderr).not.toMatch(/DrizzleQueryError|relation .* does not exist|at .*\.js:\d+/);
    expect(await footprint(database.url)).toEqual({ schemas: [], relations: 0 });
  });
});

describe("an older or incomplete schema", () => {
  const database = useTestDatabase(import.meta.url);

  it("names the version found, the version needed and what is missing", async () => {
    const opened = openDatabase(resolveDatabaseSetting({ url: database.url, poolSize: 2 }));
    try {
      await migrateDatabase(opened);
      // A next version that adds one column: the database, at the shipped latest, lacks it.
      const shipped = schemaVersions();
      const current = latest().version;
      const next: SchemaVersion = { version: current + 1, tag: "9999_next", objects: new Set([...latest().objects, "column cronledger.job_queue.next_column"]) };
      const inspection = await inspectSchema(opened.db, [...shipped, next]);
      expect(inspection).toMatchObject({ foundVersion: current, requiredVersion: current + 1, missing: ["column cronledger.job_queue.next_column"], partial: [], empty: false });

      await opened.db.execute("drop index cronledger.job_queue_ready_idx");
      const error = await ensureSchema(opened).catch((thrown: unknown) => thrown);
      expect(error).toBeInstanceOf(MigrationRequiredError);
      expect((error as Error).message).toMatch(new RegExp(`are at schema version 0 and lack index cronledger\\.job_queue_ready_idx; this version of cronledger needs schema version ${current}`));
    } finally {
      await opened.close();
    }
  });
});

describe("tables created by the application's own migrations (route b)", () => {
  const database = useTestDatabase(import.meta.url);

  it("are adopted by migrate(), which partitions the history (the check asks for it until then), and a half-made schema or a journal ahead of the tables is refused", async () => {
    const opened = openDatabase(resolveDatabaseSetting({ url: database.url, poolSize: 2 }));
    try {
      // What the application's drizzle-kit run creates: every table of cronledger/schema, here from cronledger's own SQL.
      for (const version of schemaVersions()) await applySqlFile(database.url, join(MIGRATIONS_FOLDER, `${version.tag}.sql`));
      // drizzle-kit cannot partition a table: the check names the one thing `cronledger migrate` adds.
      const refused = await ensureSchema(opened).catch((thrown: unknown) => thrown);
      expect(refused).toBeInstanceOf(MigrationRequiredError);
      expect(refused).toMatchObject({ missing: ["partitioning of cronledger.job_history"] });
      expect((refused as Error).message).toMatch(/lack partitioning of cronledger\.job_history; .*Run `cronledger migrate` .* once: drizzle-kit cannot create partitioned tables/);
      expect(await migrateDatabase(opened)).toEqual({ applied: 0, adopted: availableMigrations() });
      await ensureSchema(opened);
      expect(await migrateDatabase(opened)).toEqual({ applied: 0, adopted: 0 });
      const [journal] = await query<{ n: number }>(opened.db, sql`select count(*)::int as n from drizzle.__cronledger_migrations`);
      expect(journal).toEqual({ n: availableMigrations() });

      // Our journal says applied, but someone dropped the tables to start over.
      await opened.db.execute("drop schema cronledger cascade");
      await expect(migrateDatabase(opened)).rejects.toThrow(new RegExp(`records ${availableMigrations()} migration\\(s\\), but the tables are at schema version 0.*drop table drizzle\\.__cronledger_migrations`));
      await opened.db.execute("drop table drizzle.__cronledger_migrations");

      // Half a schema: one table only.
      await opened.db.execute("create schema cronledger");
      await opened.db.execute("create table cronledger.schedule_state (key text primary key)");
      const error = await migrateDatabase(opened).catch((thrown: unknown) => thrown);
      expect(error).toBeInstanceOf(MigrationError);
      expect((error as Error).message).toMatch(/is incomplete: it has table cronledger\.schedule_state, .* but lacks table cronledger\.dynamic_schedule(_counts|s)/);
      await opened.db.execute("drop schema cronledger cascade");
      expect(await migrateDatabase(opened)).toEqual({ applied: availableMigrations(), adopted: 0 });
    } finally {
      await opened.close();
    }
  });
});

describe("no database configured with NODE_ENV=production", () => {
  let cwd: string;
  beforeAll(() => {
    cwd = mkdtempSync(join(tmpdir(), "cronledger-production-"));
  });
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  it("refuses the embedded fallback, naming the missing setting", () => {
    expect(() => openDatabase(undefined, { NODE_ENV: "production" })).toThrow(ConfigError);
    expect(() => openDatabase(undefined, { NODE_ENV: "production" })).toThrow(/set DATABASE_URL, or `database` in createCronledger\(\)/);
    expect(() => openDatabase(resolveDatabaseSetting(""), { NODE_ENV: "production", DATABASE_URL: "" })).toThrow(/NODE_ENV is production/);
  });

  it("stops the CLI with the error and creates no .cronledger directory", async () => {
    const result = await runCli(["status", "--config", GOOD_CONFIG], { cwd, env: { ...envWithout("DATABASE_URL"), NODE_ENV: "production" } });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/error \[invalid_config\]: No database configured and NODE_ENV is production: set DATABASE_URL/);
    expect(existsSync(join(cwd, ".cronledger"))).toBe(false);
  });
});

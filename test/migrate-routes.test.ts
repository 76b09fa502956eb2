import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MIGRATIONS_FOLDER } from "../src/db/migrate.js";
import { DONE_PARTS, PARTITION_DAYS_AHEAD } from "../src/db/sql/partitions.js";
import { REPO_ROOT, runCli, watch } from "./support/child.js";
import { createTestDatabase } from "./support/database.js";

/**
 * The two migration routes (README, "Migrations"; docs/operations.md,
 * "Migrations: two routes") on a fresh database each, compared through the
 * server's catalog: tables and their kind, columns, indexes, constraints,
 * views and the history's partitions with their bounds.
 *
 * - `cronledger migrate` alone;
 * - route (b) as an application runs it: `drizzle-kit generate` from a schema
 *   that is cronledger's, then `drizzle-kit migrate`, then `cronledger migrate`;
 * - drizzle's migrator over the package's `drizzle/` folder (an app that
 *   points its migrator there), then `cronledger migrate`.
 *
 * Day partitions are named after the UTC day each database's migrate ran
 * (by its clock), so they are compared as days after that one: the routes
 * agree on whatever day the test runs, and across a midnight between two of
 * them. Before `cronledger migrate`, drizzle-kit's tables differ from the
 * others by exactly what the README says that route leaves to it.
 */

type Row = Record<string, unknown>;
interface Catalog {
  readonly tables: Row[];
  readonly columns: Row[];
  readonly indexes: Row[];
  readonly constraints: Row[];
  readonly views: Row[];
}

const DRIZZLE_KIT = join(REPO_ROOT, "node_modules", ".bin", "drizzle-kit");
const DAY = /(?<!\d)(\d{4})-?(\d{2})-?(\d{2})(?!\d)/g;

/** `20261206` or `2026-12-06` as `D+n`, n days after `today` (YYYYMMDD). */
function relativeDays(text: string, today: string): string {
  const base = Date.UTC(Number(today.slice(0, 4)), Number(today.slice(4, 6)) - 1, Number(today.slice(6, 8)));
  return text.replace(DAY, (_whole, year: string, month: string, day: string) => `D+${(Date.UTC(Number(year), Number(month) - 1, Number(day)) - base) / 86_400_000}`);
}

async function catalogOf(url: string, today: string): Promise<Catalog> {
  const client = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const tables = await client`
      select c.relname::text as name, c.relkind::text as kind, coalesce(pg_get_partkeydef(c.oid), '') as partition_key,
             coalesce(p.relname::text, '') as parent, coalesce(pg_get_expr(c.relpartbound, c.oid), '') as bound
      from pg_class c
      left join pg_inherits i on i.inhrelid = c.oid
      left join pg_class p on p.oid = i.inhparent
      where c.relnamespace = 'cronledger'::regnamespace and c.relkind in ('r', 'p', 'v')
      order by 1`;
    const columns = await client`
      select table_name::text, column_name::text, data_type::text, is_nullable::text, column_default::text, is_identity::text, identity_generation::text
      from information_schema.columns where table_schema = 'cronledger' order by 1, 2`;
    const indexes = await client`select tablename::text, indexname::text, indexdef from pg_indexes where schemaname = 'cronledger' order by 2`;
    const constraints = await client`
      select conrelid::regclass::text as on_table, conname::text, pg_get_constraintdef(oid) as definition
      from pg_constraint where connamespace = 'cronledger'::regnamespace order by 2, 1`;
    const views = await client`select viewname::text, definition from pg_views where schemaname = 'cronledger' order by 1`;
    const relative = (rows: readonly Row[]) =>
      rows
        .map((row) => Object.fromEntries(Object.entries(row).map(([key, value]) => [key, typeof value === "string" ? relativeDays(value, today) : value])))
        .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
    return { tables: relative(tables), columns: relative(columns), indexes: relative(indexes), constraints: relative(constraints), views: relative(views) };
  } finally {
    await client.end({ timeout: 1 });
  }
}

/** The UTC day by the database's clock, as partitions are named. */
async function databaseDay(url: string): Promise<string> {
  const client = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [row] = await client<{ today: string }[]>`select to_char(now() at time zone 'UTC', 'YYYYMMDD') as today`;
    return row?.today ?? "";
  } finally {
    await client.end({ timeout: 1 });
  }
}

/** `cronledger migrate` (the built CLI), and the day its partitions were made for. */
async function cronledgerMigrate(url: string): Promise<string> {
  const today = await databaseDay(url);
  const result = await runCli(["migrate"], { cwd: tmpdir(), env: { ...process.env, DATABASE_URL: url } });
  expect(result.code, result.stderr).toBe(0);
  // Made across a midnight, the partitions would start a day later: take the later day, the one they were made for.
  const after = await databaseDay(url);
  return after > today ? after : today;
}

const names = (catalog: Catalog) => new Set(catalog.tables.map((table) => String(table.name)));

describe("drizzle-kit's route and `cronledger migrate` make the same schema", () => {
  const databases: Awaited<ReturnType<typeof createTestDatabase>>[] = [];
  let workDir: string;
  const fresh = async (label: string) => {
    const database = await createTestDatabase(label);
    databases.push(database);
    return database.url;
  };

  beforeAll(() => {
    workDir = mkdtempSync(join(tmpdir(), "cronledger-routes-"));
  });

  afterAll(async () => {
    for (const database of databases) await database.drop();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it("on a fresh database each: cronledger migrate; drizzle-kit generate + migrate, then cronledger migrate; drizzle's migrator over drizzle/, then cronledger migrate", async () => {
    const own = await fresh("routes_cronledger");
    const ownDay = await cronledgerMigrate(own);
    const reference = await catalogOf(own, ownDay);

    // Route (b): the application's drizzle-kit generates a migration of its own from cronledger's schema, and applies it.
    const kit = await fresh("routes_drizzle_kit");
    writeFileSync(
      join(workDir, "drizzle.config.ts"),
      `export default { dialect: "postgresql", schema: ${JSON.stringify(join(REPO_ROOT, "src", "schema.ts"))}, out: ${JSON.stringify(join(workDir, "drizzle"))}, dbCredentials: { url: process.env.DATABASE_URL } };\n`,
    );
    for (const command of ["generate", "migrate"]) {
      const result = await watch(DRIZZLE_KIT, [command, "--config", join(workDir, "drizzle.config.ts")], { cwd: workDir, env: { ...process.env, DATABASE_URL: kit } }).exited;
      expect(result.code, `drizzle-kit ${command}: ${result.stdout}\n${result.stderr}`).toBe(0);
    }
    const kitDay = await databaseDay(kit);
    const kitAlone = await catalogOf(kit, kitDay);

    // What drizzle-kit leaves to `cronledger migrate` (README): the history's partitioning and its partitions, nothing else.
    const partitions = [
      "job_history_default",
      ...Array.from({ length: PARTITION_DAYS_AHEAD + 1 }, (_, n) => [`job_history_pD+${n}`, `job_history_pD+${n}_failed`, `job_history_pD+${n}_done`]).flat(),
    ];
    const onlyInReference = [...names(reference)].filter((name) => !names(kitAlone).has(name));
    expect(onlyInReference.filter((name) => !/^job_history_pD\+\d+_done_\d+$/.test(name)).sort()).toEqual([...partitions].sort());
    expect([...names(kitAlone)].filter((name) => !names(reference).has(name))).toEqual([]);
    expect(kitAlone.tables.find((table) => table.name === "job_history")).toMatchObject({ kind: "r", partition_key: "" });
    expect(reference.tables.find((table) => table.name === "job_history")).toMatchObject({ kind: "p", partition_key: "RANGE (finished_at)" });
    const unpartitioned = (catalog: Catalog) => ({
      ...catalog,
      tables: catalog.tables.filter((table) => !String(table.name).startsWith("job_history")),
      columns: catalog.columns.filter((column) => !String(column.table_name).startsWith("job_history_")),
      indexes: catalog.indexes.filter((index) => !String(index.tablename).startsWith("job_history")),
      constraints: catalog.constraints.filter((constraint) => !String(constraint.on_table).includes("job_history")),
    });
    expect(unpartitioned(kitAlone)).toEqual(unpartitioned(reference));

    const kitDayAfter = await cronledgerMigrate(kit);
    expect(await catalogOf(kit, kitDayAfter)).toEqual(reference);

    // An application whose own migrator runs the package's drizzle/ folder (drizzle's default journal), then cronledger migrate.
    const folder = await fresh("routes_drizzle_folder");
    const client = postgres(folder, { max: 1, onnotice: () => {} });
    try {
      await migrate(drizzle(client), { migrationsFolder: MIGRATIONS_FOLDER });
    } finally {
      await client.end({ timeout: 1 });
    }
    const folderDay = await cronledgerMigrate(folder);
    expect(await catalogOf(folder, folderDay)).toEqual(reference);
  }, 240_000);

  it("is described in the README and docs/operations.md as the test finds it: what drizzle-kit leaves to cronledger migrate", () => {
    const flat = (file: string) => readFileSync(join(REPO_ROOT, file), "utf8").replace(/\s+/g, " ");
    const ahead = ["no", "the next day", "the next 2 days", "the next 3 days", "the next 4 days"][PARTITION_DAYS_AHEAD] ?? `the next ${PARTITION_DAYS_AHEAD} days`;
    const readme = flat("README.md");
    expect(readme).toContain("What the drizzle-kit route leaves to `cronledger migrate`, and only that:");
    expect(readme).toContain(`the partitions of today and ${ahead} (UTC, by the database's clock)`);
    expect(readme).toContain("the first start does not do it for you");
    const operations = flat("docs/operations.md");
    expect(operations).toContain("What drizzle-kit leaves to `cronledger migrate`, and only that:");
    expect(operations).toContain(`the day partitions of today and the next ${PARTITION_DAYS_AHEAD} days`);
    expect(operations).toContain(`the latter in ${DONE_PARTS} hash parts`);
  });
});

import { sql } from "drizzle-orm";
import { readMigrationFiles } from "drizzle-orm/migrator";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import type { PgliteDatabase } from "drizzle-orm/pglite";
import { migrate as migratePostgres } from "drizzle-orm/postgres-js/migrator";
import type { PostgresJsDatabase } from "drizzle-orm/postgres-js";
import { fileURLToPath } from "node:url";
import { MigrationError } from "../errors.js";
import { query, type Database } from "./connection.js";
import { rootMessage } from "./transient.js";

/**
 * Our own journal table. Sharing the application's drizzle journal makes the
 * migrator skip our migrations silently, and a journal inside the
 * `cronledger` schema would break our first migration (the migrator creates
 * its schema before running it).
 */
export const MIGRATIONS_SCHEMA = "drizzle";
export const MIGRATIONS_TABLE = "__cronledger_migrations";
export const MIGRATIONS_FOLDER = fileURLToPath(new URL("../../drizzle", import.meta.url));

// Fixed so that every replica and the CLI contend for the same lock ("cron", "ledg").
const MIGRATION_LOCK: readonly [number, number] = [0x63726f6e, 0x6c656467];

const config = { migrationsFolder: MIGRATIONS_FOLDER, migrationsSchema: MIGRATIONS_SCHEMA, migrationsTable: MIGRATIONS_TABLE };

/**
 * Applies drizzle/ under an advisory lock: drizzle's migrator takes none, so
 * replicas migrating at boot would otherwise race on the same DDL.
 * Idempotent; returns how many migrations this call applied.
 */
export async function migrateDatabase(database: Database): Promise<{ applied: number }> {
  try {
    return await database.withAdvisoryLock(MIGRATION_LOCK, async () => {
      const before = await appliedMigrations(database);
      if (database.kind === "pglite") await migratePglite(database.db as unknown as PgliteDatabase, config);
      else await migratePostgres(database.db as unknown as PostgresJsDatabase, config);
      const after = await appliedMigrations(database);
      return { applied: after - before };
    });
  } catch (error) {
    throw new MigrationError(
      `cronledger migration failed: ${rootMessage(error)}. Each migration runs in a transaction, so nothing is half-applied: fix the cause (see docs/operations.md, "Migration failure") and run \`cronledger migrate\` again.`,
      { cause: error },
    );
  }
}

/** The migrations shipped with this version of cronledger. */
export function availableMigrations(): number {
  return readMigrationFiles(config).length;
}

async function appliedMigrations(database: Database): Promise<number> {
  const journal = `${MIGRATIONS_SCHEMA}.${MIGRATIONS_TABLE}`;
  const [exists] = await query<{ present: boolean }>(database.db, sql`select to_regclass(${journal}) is not null as present`);
  if (!exists?.present) return 0;
  const [row] = await query<{ n: number }>(
    database.db,
    sql`select count(*)::int as n from ${sql.identifier(MIGRATIONS_SCHEMA)}.${sql.identifier(MIGRATIONS_TABLE)}`,
  );
  return row?.n ?? 0;
}

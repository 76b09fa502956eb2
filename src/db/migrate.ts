import { sql } from "drizzle-orm";
import { readMigrationFiles } from "drizzle-orm/migrator";
import { migrate as migrateDrizzle } from "drizzle-orm/postgres-js/migrator";
import type { PostgresJsDatabase } from "drizzle-orm/postgres-js";
import { MigrationError } from "../errors.js";
import { query, type Database } from "./connection.js";
import { inspectSchema, MIGRATIONS_FOLDER } from "./schema-check.js";
import { ensureHistoryPartitions, partitionHistory } from "./sql/partitions.js";
import { rootMessage } from "./transient.js";

/**
 * Our own journal table. Sharing the application's drizzle journal makes the
 * migrator skip our migrations silently, and a journal inside the
 * `cronledger` schema would break our first migration (the migrator creates
 * its schema before running it).
 */
export const MIGRATIONS_SCHEMA = "drizzle";
export const MIGRATIONS_TABLE = "__cronledger_migrations";
export { MIGRATIONS_FOLDER };

// Fixed so that every replica and the CLI contend for the same lock ("cron", "ledg").
const MIGRATION_LOCK: readonly [number, number] = [0x63726f6e, 0x6c656467];

const config = { migrationsFolder: MIGRATIONS_FOLDER, migrationsSchema: MIGRATIONS_SCHEMA, migrationsTable: MIGRATIONS_TABLE };

/**
 * Applies drizzle/ under an advisory lock: drizzle's migrator takes none, so
 * replicas migrating at boot would otherwise race on the same DDL. Then
 * partitions the job history if it is a plain table (migration 0003 leaves
 * it so, and so does the application's drizzle-kit), and makes its next
 * days' partitions (src/db/sql/history.ts).
 * Idempotent; returns how many migrations this call applied, and how many it
 * adopted: found already applied by the application's own drizzle-kit run.
 */
export async function migrateDatabase(database: Database): Promise<{ applied: number; adopted: number }> {
  try {
    return await database.withAdvisoryLock(MIGRATION_LOCK, async () => {
      const before = await appliedMigrations(database);
      const adopted = await adoptExistingTables(database, before);
      // Every drizzle driver's migrator is the same two lines over the dialect, so this one serves PGlite too without loading it.
      await migrateDrizzle(database.db as unknown as PostgresJsDatabase, config);
      // What drizzle-kit cannot say, whichever route made the tables: the history partitioned, and its next days' partitions.
      await partitionHistory(database.db);
      await ensureHistoryPartitions(database.db);
      const after = await appliedMigrations(database);
      return { applied: after - before - adopted, adopted };
    });
  } catch (error) {
    if (error instanceof MigrationError) throw error;
    throw new MigrationError(
      `cronledger migration failed: ${rootMessage(error)}. Each migration runs in a transaction, so nothing is half-applied: fix the cause (see docs/operations.md, "Migration failure") and run \`cronledger migrate\` again.`,
      { cause: error },
    );
  }
}

/**
 * The second migration route: the application's drizzle-kit migrations,
 * generated from a schema that re-exports `cronledger/schema`, created our
 * tables and recorded them in the app's journal, not ours. drizzle's
 * migrator would then run our first migration again and fail on "schema
 * already exists". Instead, the migrations whose objects are all in the
 * catalog are recorded in our journal as applied, and the migrator applies
 * only the rest. A half-made schema, or a journal ahead of the tables, is
 * refused with what to do. Returns how many migrations it recorded.
 */
async function adoptExistingTables(database: Database, journalled: number): Promise<number> {
  const inspection = await inspectSchema(database.db);
  if (inspection.partial.length > 0) {
    throw new MigrationError(
      `cronledger's schema in ${database.label} is incomplete: it has ${inspection.partial.slice(0, 5).join(", ")} but lacks ` +
        `${inspection.missing.slice(0, 5).join(", ")}${inspection.missing.length > 5 ? ` and ${inspection.missing.length - 5} more` : ""}, ` +
        "so no migration can continue from it (tables created by hand, or edited). Complete it with your drizzle-kit migrations from " +
        "`cronledger/schema`, or drop it (`drop schema cronledger cascade`, which deletes its jobs) and run `cronledger migrate` again.",
    );
  }
  if (inspection.foundVersion < journalled) {
    throw new MigrationError(
      `cronledger's journal ${MIGRATIONS_SCHEMA}.${MIGRATIONS_TABLE} in ${database.label} records ${journalled} migration(s), but the tables ` +
        `are at schema version ${inspection.foundVersion} (missing ${inspection.missing.slice(0, 5).join(", ")}): they were dropped or ` +
        `changed by hand. To start over, also \`drop table ${MIGRATIONS_SCHEMA}.${MIGRATIONS_TABLE}\` and run \`cronledger migrate\` again.`,
    );
  }
  if (inspection.foundVersion === journalled) return 0;
  const adopted = readMigrationFiles(config).slice(journalled, inspection.foundVersion);
  // The journal as drizzle's migrator creates it, which reads only the newest created_at.
  await database.db.execute(sql`create schema if not exists ${sql.identifier(MIGRATIONS_SCHEMA)}`);
  await database.db.execute(
    sql`create table if not exists ${sql.identifier(MIGRATIONS_SCHEMA)}.${sql.identifier(MIGRATIONS_TABLE)} (id serial primary key, hash text not null, created_at bigint)`,
  );
  await database.db.execute(
    sql`insert into ${sql.identifier(MIGRATIONS_SCHEMA)}.${sql.identifier(MIGRATIONS_TABLE)} (hash, created_at) values ${sql.join(
      adopted.map((migration) => sql`(${migration.hash}, ${migration.folderMillis})`),
      sql`, `,
    )}`,
  );
  return adopted.length;
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

import { getTableName, sql } from "drizzle-orm";
import { cronledgerSchema, jobQueue } from "../../schema.js";
import { query, type Executor } from "../executor.js";

/** Which database a connection or transaction is on: the database's name and its cluster's system identifier. */
export interface DatabaseIdentity {
  readonly name: string;
  /** pg_control_system()'s system_identifier: two servers (a primary and its copy restored elsewhere) differ here. */
  readonly system: string;
}

/** One catalog read; run only on an error path (src/db/transaction-database.ts), never before a write. */
export async function databaseIdentity(executor: Executor): Promise<DatabaseIdentity> {
  const [row] = await query<DatabaseIdentity>(
    executor,
    sql`select current_database()::text as name, (select system_identifier::text from pg_control_system()) as system`,
  );
  if (row === undefined) throw new Error("cronledger: current_database() returned no row");
  return row;
}

/** Same database on the same cluster. */
export function sameDatabase(a: DatabaseIdentity, b: DatabaseIdentity): boolean {
  return a.name === b.name && a.system === b.system;
}

/** cronledger's job table exists where `executor` runs: the write that just failed on a `db` would have found it here. */
export async function hasJobTable(executor: Executor): Promise<boolean> {
  const table = `${cronledgerSchema.schemaName}.${getTableName(jobQueue)}`;
  const [row] = await query<{ present: boolean }>(executor, sql`select to_regclass(${table}) is not null as present`);
  return row?.present === true;
}

import { sql } from "drizzle-orm";
import { query, type Database } from "../db/connection.js";

/**
 * Deletes this namespace's ledger rows whose key is not in the full current
 * schedule: entries removed from code, or whose timing changed (a new
 * identity). Rows of other namespaces are never touched.
 */
export async function pruneLedger(database: Database, namespace: string, currentKeys: readonly string[]): Promise<number> {
  const removed = await query<{ key: string }>(
    database.db,
    sql`delete from cronledger.schedule_state
        where namespace = ${namespace} and not (key = any(${sql.param([...currentKeys])}::text[]))
        returning key`,
  );
  return removed.length;
}

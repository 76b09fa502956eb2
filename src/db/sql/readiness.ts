import { getTableName, sql } from "drizzle-orm";
import { jobs, scheduleState } from "../../schema.js";
import { query, type Executor } from "../executor.js";

/**
 * Whether cronledger's tables exist, in one round trip: a connection that
 * cannot be made fails the statement, and a database nobody migrated
 * answers false.
 */
export async function cronledgerTablesPresent(executor: Executor): Promise<boolean> {
  const [row] = await query<{ present: boolean }>(
    executor,
    sql`select to_regclass(${`cronledger.${getTableName(jobs)}`}) is not null and to_regclass(${`cronledger.${getTableName(scheduleState)}`}) is not null as present`,
  );
  return row?.present === true;
}

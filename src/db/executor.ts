import { is, type SQL } from "drizzle-orm";
import { PgDatabase, type PgQueryResultHKT } from "drizzle-orm/pg-core";
import { InvalidArgumentError } from "../errors.js";

/**
 * What a statement runs on: cronledger's own drizzle database, or the
 * application's drizzle database or transaction (`db.transaction(async (tx) => ...)`)
 * over postgres-js, node-postgres or PGlite. Every statement of the SQL layer
 * takes one, so a job can be written in the same transaction as the
 * business row it belongs to.
 */
export type Executor = PgDatabase<PgQueryResultHKT, Record<string, unknown>>;

/** Runs a statement and returns its rows, whichever driver is underneath (postgres-js returns an array, the others `{ rows }`). */
export async function query<T>(executor: Executor, statement: SQL): Promise<T[]> {
  const result: unknown = await executor.execute(statement);
  if (Array.isArray(result)) return result as T[];
  return (result as { rows: T[] }).rows;
}

/**
 * The application's database or transaction, checked: TypeScript cannot stop
 * a JavaScript caller (or a cast) from passing a raw pool or client.
 */
export function asExecutor(value: unknown, what: string): Executor {
  if (is(value, PgDatabase)) return value as Executor;
  const shown = value === null ? "null" : typeof value === "object" ? (value.constructor?.name ?? "an object") : typeof value;
  throw new InvalidArgumentError(
    `${what} must be a drizzle PostgreSQL database or transaction (from drizzle-orm/postgres-js, drizzle-orm/node-postgres ` +
      `or drizzle-orm/pglite, or the \`tx\` of db.transaction(async (tx) => ...)); got ${shown}. Wrap a raw client with drizzle(client) first.`,
  );
}

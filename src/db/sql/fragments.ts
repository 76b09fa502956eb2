import { sql, type Param, type SQL, type SQLWrapper } from "drizzle-orm";
import type { AnyPgColumn } from "drizzle-orm/pg-core";

/**
 * The pieces every statement of the SQL layer shares. Instants cross the wire
 * as epoch milliseconds in float8 (and ISO strings on the way in), so every
 * driver (postgres-js, node-postgres, PGlite) returns the same JavaScript
 * numbers and no driver's timestamp parsing or time zone setting is involved.
 */

/** An instant as epoch milliseconds (float8); null stays null. */
export function epochMs(instant: SQLWrapper): SQL<number> {
  return sql<number>`(extract(epoch from ${instant}) * 1000)::float8`;
}

/** An instant as whole epoch microseconds, in text: exact, for cursors that must not lose a row to float rounding. */
export function epochMicrosText(instant: SQLWrapper): SQL<string> {
  return sql<string>`(extract(epoch from ${instant}) * 1000000)::bigint::text`;
}

/** The database clock, or a fixed instant when one is given (tests, replays, `tick({ now })`). */
export function clock(now?: Date | null): SQL {
  return now === undefined || now === null ? sql`now()` : sql`${now.toISOString()}::timestamptz`;
}

/** `ms` milliseconds as an interval, for adding to a timestamptz. */
export function milliseconds(ms: number | SQLWrapper): SQL {
  return sql`${ms}::float8 * interval '1 millisecond'`;
}

/** A column's bare name, where SQL wants it unqualified (an INSERT's column list, an UPDATE's SET target). */
export function name(column: AnyPgColumn): SQL {
  return sql`${sql.identifier(column.name)}`;
}

/**
 * A JavaScript array as one parameter holding a PostgreSQL array literal
 * (`{"a","b",NULL}`), to be cast to its type: every driver sends it as text,
 * whatever it knows of array types. cronledger's own postgres.js pool runs
 * with `fetch_types: false` (src/db/connection.ts says why), where a
 * JavaScript array would be sent as "a,b"; an application's postgres.js, on
 * whose transaction `enqueue(..., { db: tx })` runs, may have either setting.
 */
export function arrayLiteral(values: readonly (string | number | null | undefined)[]): Param {
  const elements = values.map((value) =>
    value === null || value === undefined ? "NULL" : typeof value === "number" ? String(value) : `"${value.replace(/[\\"]/g, "\\$&")}"`,
  );
  return sql.param(`{${elements.join(",")}}`);
}

/** A JavaScript array as one parameter, cast to `type[]`: a constant parameter count whatever its length. */
export function array(values: readonly (string | number | null)[], type: "text" | "int" | "bigint" | "float8"): SQL {
  return sql`${arrayLiteral(values)}::${sql.raw(type)}[]`;
}

import { is, Placeholder, SQL, sql, StringChunk, type BuildQueryConfig, type Param, type Query, type QueryWithTypings, type SQLWrapper } from "drizzle-orm";
import { PgDialect, type AnyPgColumn } from "drizzle-orm/pg-core";
import { prepareText } from "../prepared.js";

/**
 * The pieces every statement of the SQL layer shares. Instants cross the wire
 * as epoch milliseconds in float8 (and ISO strings on the way in), so every
 * driver (postgres-js, node-postgres, PGlite) returns the same JavaScript
 * numbers and no driver's timestamp parsing or time zone setting is involved.
 */

/** Workers LISTEN on this channel; the payload is the queue that gained ready jobs. */
export const JOBS_CHANNEL = "cronledger_jobs";

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

let lastIsoMs = Number.NaN;
let lastIso = "";

/**
 * An instant's ISO text (`Date.prototype.toISOString`), null for null. The
 * last one is kept: a pass of 5,000 due dynamic entries writes the same few
 * instants (their slot, their ledger value, their next fire) 20,000 times,
 * 15-37 ms of a Date and its text each time, 0.1-4 ms with this.
 */
export function isoOf(ms: number): string;
export function isoOf(ms: number | null): string | null;
export function isoOf(ms: number | null): string | null {
  if (ms === null) return null;
  if (ms !== lastIsoMs) {
    lastIso = new Date(ms).toISOString();
    lastIsoMs = ms;
  }
  return lastIso;
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
  return sql.param(arrayLiteralText(values));
}

/** The text of arrayLiteral's parameter. */
function arrayLiteralText(values: readonly (string | number | null | undefined)[]): string {
  // One string built in a loop, the escaping regex only for a value that needs it: a pass of 5,000 due dynamic entries
  // builds 18 arrays of 5,000, at 2.5-3.6 ms each with map + join + a replace per value, 0.8-1.6 ms each this way.
  let text = "{";
  for (let index = 0; index < values.length; index += 1) {
    const value = values[index];
    if (index > 0) text += ",";
    if (value === null || value === undefined) text += "NULL";
    else if (typeof value === "number") text += String(value);
    else text += NEEDS_ESCAPE.test(value) ? `"${value.replace(/[\\"]/g, "\\$&")}"` : `"${value}"`;
  }
  return `${text}}`;
}

const NEEDS_ESCAPE = /[\\"]/;

/** A JavaScript array as one parameter, cast to `type[]`: a constant parameter count whatever its length. */
export function array(values: readonly (string | number | null)[], type: "text" | "int" | "bigint" | "float8"): SQL {
  return sql`${arrayLiteral(values)}::${sql.raw(type)}[]`;
}

const dialect = new PgDialect();

/** A reusable statement's value as the driver gets it; an array as an array literal (see arrayLiteral). */
function paramValue(value: unknown): unknown {
  return Array.isArray(value) ? arrayLiteralText(value as (string | number | null)[]) : value;
}

/**
 * A reusable statement as drizzle executes it: its text and parameters are
 * given as they are, not rendered again from pieces. drizzle's `execute()`
 * asks an SQL for its query (`toQuery`), and rendering the pieces cost the
 * enqueue 25 µs and 7-8 kB of its 33 kB a call (a loop of single enqueues:
 * drizzle's render and its `is` checks were 17 % of the caller's CPU, and
 * the text it built anew was hashed again to find it prepared). Whatever
 * reads the pieces instead (this SQL inside another) gets them, built then,
 * so it renders the same text either way.
 */
class ReusableSQL extends SQL {
  constructor(
    private readonly query: Query,
    pieces: () => (StringChunk | Param)[],
  ) {
    super([]);
    Object.defineProperty(this, "queryChunks", { get: pieces, configurable: true, enumerable: true });
  }

  /** Values written into the text (`.inlineParams()`, or a config asking for it) are drizzle's to render. */
  private inline = false;

  override inlineParams(): this {
    this.inline = true;
    return super.inlineParams();
  }

  override toQuery(config: BuildQueryConfig): QueryWithTypings {
    // The parameters are this call's own array (reusable builds one per call), so no copy is made.
    return config.inlineParams === true || this.inline ? super.toQuery(config) : this.query;
  }
}

/**
 * A statement of the hot path whose text is rendered once. Built from the
 * schema objects as a drizzle template, such a statement costs 0.1-0.7 ms of
 * the worker's CPU to render on every call (a completion's: 650 µs, most of
 * a small batch's cost on the worker's side); here `build` runs once, with
 * named slots (`value("ids")`) where the values go, and every call pairs
 * the cached text with its values as parameters (ReusableSQL). Each
 * distinct shape of a statement (a clause present or not) is its own cached
 * statement. With `prepared`, cronledger's own pool sends it as a named
 * prepared statement (src/db/prepared.ts): only for statements whose plan
 * does not depend on their values' sizes (PostgreSQL may switch a named
 * statement to a generic plan after five executions, which for the
 * scheduler's pass, planned for arrays of unknown length, is many times
 * slower).
 */
export function reusable<N extends string>(
  build: (value: (name: N) => SQL) => SQL,
  options: { readonly prepared?: boolean } = {},
): (values: Readonly<Record<N, unknown>>) => SQL {
  let cached:
    | { readonly sql: string; readonly pieces: readonly string[]; readonly slots: readonly ({ readonly name: N } | { readonly constant: unknown })[] }
    | undefined;
  return (values) => {
    if (cached === undefined) {
      const query = dialect.sqlToQuery(build((slot) => sql`${sql.placeholder(slot)}`));
      // drizzle numbers parameters in order of appearance, so the text between $1, $2, ... is in order too.
      const pieces = query.sql.split(/\$\d+/);
      if (pieces.length !== query.params.length + 1) throw new Error("cronledger: a reusable statement's text holds a $ that is not a parameter");
      const slots = query.params.map((param) => (is(param, Placeholder) ? { name: param.name as N } : { constant: param }));
      cached = { sql: query.sql, pieces, slots };
      if (options.prepared === true) prepareText(query.sql);
    }
    const { pieces, slots } = cached;
    const params = slots.map((slot) => paramValue("name" in slot ? values[slot.name] : slot.constant));
    return new ReusableSQL({ sql: cached.sql, params }, () => {
      const chunks: (StringChunk | Param)[] = [new StringChunk(pieces[0] ?? "")];
      params.forEach((param, index) => chunks.push(sql.param(param), new StringChunk(pieces[index + 1] ?? "")));
      return chunks;
    });
  };
}

/**
 * reusable() once per shape of a statement (which of its clauses are there):
 * `build` runs the first time each combination of the shape's flags is
 * asked for, and that statement serves every later call of the same shape.
 */
export function reusableShapes<S extends { readonly [K in keyof S]: boolean }, N extends string>(
  build: (shape: S, value: (name: N) => SQL) => SQL,
  options: { readonly prepared?: boolean } = {},
): (shape: S) => (values: Readonly<Record<N, unknown>>) => SQL {
  const byShape = new Map<string, (values: Readonly<Record<N, unknown>>) => SQL>();
  return (shape) => {
    const key = (Object.keys(shape) as (keyof S & string)[])
      .sort()
      .map((flag) => (shape[flag] ? flag : ""))
      .join(",");
    let statement = byShape.get(key);
    if (statement === undefined) {
      statement = reusable<N>((value) => build(shape, value), options);
      byShape.set(key, statement);
    }
    return statement;
  };
}

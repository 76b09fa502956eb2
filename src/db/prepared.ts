import type { Sql } from "postgres";

/**
 * Which statements cronledger's own postgres.js pool sends as named prepared
 * statements: the texts of the hot path's reusable statements (the claim and
 * the completion, src/db/sql/fragments.ts `reusable`), registered when they
 * are first rendered. Everything else goes unnamed, as drizzle sends it, so
 * no statement whose text varies with its data fills a connection's cache.
 *
 * Why: drizzle's `db.execute()` never names a statement, so the server parsed,
 * analysed and planned the claim and the completion on every call: 11 % of
 * the server's time in a drain (perf, `bench/drain-cost.ts`: parse and
 * analysis 5 %, planning 6 %). A named statement is parsed once per
 * connection and, after five executions, planned once if its generic plan
 * costs no more than the custom ones. Off where `prepare` is off (PgBouncer
 * 1.18 in transaction mode cannot keep them, src/db/settings.ts).
 */
const preparedTexts = new Set<string>();

/** Marks `text` (a statement's full text, with $1, $2, ...) as one to prepare. */
export function prepareText(text: string): void {
  preparedTexts.add(text);
}

/** `client` with its `unsafe()` (what drizzle calls) naming the registered statements. */
export function preparingClient(client: Sql): Sql {
  return new Proxy(client, {
    get(target, property, receiver) {
      if (property !== "unsafe") return Reflect.get(target, property, receiver) as unknown;
      return (text: string, params?: unknown[], options?: { prepare?: boolean }) =>
        preparedTexts.has(text) ? target.unsafe(text, params as never, { ...options, prepare: true }) : target.unsafe(text, params as never, options as never);
    },
  });
}

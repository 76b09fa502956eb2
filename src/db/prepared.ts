import type { Sql } from "postgres";

/**
 * Which statements cronledger's own postgres.js pool sends as named prepared
 * statements: the texts of the hot path's reusable statements marked
 * `prepared` (the enqueue and the claim, src/db/sql/jobs.ts; the completion, src/db/sql/completions.ts),
 * registered when they are first rendered. Everything else goes unnamed, as
 * drizzle sends it, so no statement whose text varies with its data fills a
 * connection's cache.
 *
 * Why: drizzle's `db.execute()` never names a statement, so the server parsed
 * and analysed the claim and the completion on every call, and planned them
 * every time: a `perf` profile of the server during a drain put parse and
 * analysis at 5 % and planning at 6 % of its time (`bench/drain-cost.ts`). A
 * named statement is parsed once per connection; after five executions
 * PostgreSQL plans it once more, generically, and keeps that plan when it
 * costs no more than the custom ones (the completion and the enqueue do; the
 * claim keeps custom plans). Off where `prepare` is off (PgBouncer 1.18 in
 * transaction mode cannot keep them, src/db/settings.ts).
 *
 * Not `plan_cache_mode = force_generic_plan` for the pool: it applies to
 * unnamed statements with parameters too, and the scheduler's pass planned
 * generically for arrays of unknown length ran 20-45 times slower.
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

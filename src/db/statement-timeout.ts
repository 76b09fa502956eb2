import type { Sql } from "postgres";

/**
 * A postgres.js client whose statements are cancelled once they have run for
 * `timeoutMs`: the scheduler's pass goes through it, so a pass stuck behind
 * a lock nobody releases ends as an error the ticker reports and retries,
 * instead of holding the ticker (and a connection) for as long as the lock
 * lasts.
 *
 * Why not PostgreSQL's statement_timeout: a pass is one statement with no
 * BEGIN (docs/decisions.md), so there is no transaction to `SET LOCAL` it
 * in, and as a startup parameter it would bound every statement of the pool
 * (migrations that build indexes on a large jobs table included), and
 * PgBouncer refuses unknown startup parameters. A cancel request is what
 * psql's Ctrl-C sends: it stops exactly the statement that ran too long, on
 * any server or pooler, and the server answers with SQLSTATE 57014.
 */
export function cancellingClient(client: Sql, timeoutMs: number): Sql {
  return new Proxy(client, {
    get(target, property, receiver) {
      if (property !== "unsafe") return Reflect.get(target, property, receiver) as unknown;
      return (...args: Parameters<Sql["unsafe"]>) => {
        const pending = target.unsafe(...args);
        // The timer holds the statement weakly. Held strongly, every statement stayed alive with its
        // parameters and rows until its timer fired, long after it ended: after a pass over 100,000
        // entries, about 60 MB for the pass timeout. While it runs, its connection (or the queue
        // of statements waiting for one) holds it, so a statement that runs too long is still there to cancel.
        const statement = new WeakRef(pending);
        const timer = setTimeout(() => {
          const running = statement.deref();
          if (running !== undefined) cancel(running);
        }, timeoutMs);
        timer.unref();
        return pending;
      };
    },
  });
}

/**
 * Asks the server to cancel `pending` if it is still running. postgres.js's
 * own `cancel()` drops the promise of its cancel request, so a request that
 * cannot reach the server (the reason the statement hangs, often) would
 * reject unhandled and end the process; this calls the same canceller
 * (postgres 3.4's `canceller`) and keeps its promise. After the statement
 * ended, the canceller only marks it, sending nothing.
 */
function cancel(pending: object): void {
  const query = pending as { canceller?: ((query: object) => Promise<void>) | null };
  const canceller = query.canceller;
  if (typeof canceller !== "function") return;
  query.canceller = null;
  canceller(pending).catch(() => undefined);
}

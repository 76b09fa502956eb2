import type { Sql, TransactionSql } from "postgres";

/**
 * Behind PgBouncer in transaction mode postgres.js must not pipeline: when a
 * query with parameters (sent as Parse/Describe/Flush, then Bind/Execute
 * once the server has described it) follows another query on the same
 * connection before that one has answered, PgBouncer 1.18 hands the server
 * connection back to its pool at the first query's end, and the second
 * query's answer never comes: the promise waits forever while the server's
 * backend sits idle in ClientRead. Reproduced with `ledger.status()` (five
 * statements at once on a pool of 3), about one run in three;
 * porsager/postgres#970 describes the same through Supavisor.
 *
 * `max_pipeline: 0` stops the pipelining, but postgres.js 3.4.9 then never
 * calls `begin()`'s hook that reserves the connection for the transaction
 * (the check `sent.length < max_pipeline` comes first), and the BEGIN fails
 * with UNSAFE_TRANSACTION. So, with pipelining off, this client runs every
 * transaction on a connection it reserves first (`sql.reserve()`), with
 * BEGIN, COMMIT or ROLLBACK, and savepoints for nested transactions, as
 * `begin()` would. Everything else passes through unchanged.
 */
export function withReservedTransactions(client: Sql): Sql {
  return new Proxy(client, {
    get(target, property, receiver) {
      if (property !== "begin") return Reflect.get(target, property, receiver) as unknown;
      return (first: string | ((sql: TransactionSql) => unknown), second?: (sql: TransactionSql) => unknown) => {
        const mode = typeof first === "string" ? first.replace(/[^a-z ]/gi, "") : "";
        const body = typeof first === "function" ? first : second;
        if (body === undefined) throw new TypeError("begin() needs a function to run in the transaction");
        return reservedTransaction(target, mode, body);
      };
    },
  });
}

async function reservedTransaction(client: Sql, mode: string, body: (sql: TransactionSql) => unknown): Promise<unknown> {
  const reserved = await client.reserve();
  try {
    await reserved.unsafe(`begin ${mode}`);
    let savepoints = 0;
    const scoped = Object.assign(reserved, {
      // Nested transactions (drizzle's tx.transaction) as savepoints on the same connection.
      savepoint: async (inner: (sql: TransactionSql) => unknown) => {
        const name = `s${(savepoints += 1)}`;
        await reserved.unsafe(`savepoint ${name}`);
        try {
          const result = await inner(scoped);
          await reserved.unsafe(`release savepoint ${name}`);
          return result;
        } catch (error) {
          await reserved.unsafe(`rollback to savepoint ${name}`);
          throw error;
        }
      },
      prepare: () => {
        throw new Error("two-phase commit (sql.prepare) is not supported through PgBouncer");
      },
    }) as unknown as TransactionSql;
    let result: unknown;
    try {
      result = await body(scoped);
    } catch (error) {
      await reserved.unsafe("rollback").catch(() => undefined);
      throw error;
    }
    await reserved.unsafe("commit");
    return result;
  } finally {
    reserved.release();
  }
}

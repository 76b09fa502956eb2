/** SQLSTATEs worth retrying: serialization failure, deadlock, admin shutdown, and the 08 connection class. */
const TRANSIENT_SQLSTATES = new Set(["40001", "40P01", "57P01", "57P02", "57P03"]);
const TRANSIENT_NODE_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "EPIPE",
  "ETIMEDOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
]);

/** True for errors that a retry on a fresh connection can fix (drizzle wraps driver errors in `cause`). */
export function isTransientDatabaseError(error: unknown): boolean {
  for (let current: unknown = error, depth = 0; current && depth < 5; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && (TRANSIENT_SQLSTATES.has(code) || code.startsWith("08") || TRANSIENT_NODE_CODES.has(code))) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

// PostgreSQL 13 and poolers such as PgBouncer refuse the startup parameter cronledger sends by default.
const CONNECTION_CHECK_REFUSED = /client_connection_check_interval/;
const CONNECTION_CHECK_HINT =
  " (cronledger sends client_connection_check_interval so the server aborts statements of killed processes: " +
  "PostgreSQL 13 and poolers like PgBouncer refuse it; set `database: { url, clientConnectionCheck: false }` or " +
  "CRONLEDGER_CLIENT_CONNECTION_CHECK=off, and behind PgBouncer `database: { url, pooler: \"pgbouncer\" }`)";

/** The innermost cause's message, with what to do when it is one cronledger's own settings caused. */
export function rootMessage(error: unknown): string {
  let current: unknown = error;
  for (let depth = 0; depth < 5; depth += 1) {
    const cause = (current as { cause?: unknown } | undefined)?.cause;
    if (!(cause instanceof Error)) break;
    current = cause;
  }
  const message = current instanceof Error ? current.message : String(current);
  return CONNECTION_CHECK_REFUSED.test(message) && !message.includes(CONNECTION_CHECK_HINT) ? message + CONNECTION_CHECK_HINT : message;
}

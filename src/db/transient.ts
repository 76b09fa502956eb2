import { diagnoseDatabaseError } from "./diagnose.js";

/**
 * SQLSTATEs worth retrying: serialization failure, deadlock, admin shutdown, the 08 connection class, and
 * read_only_sql_transaction (25006: cronledger never asks for a read-only transaction, so the server is a
 * standby or a demoted primary; its connection is replaced, src/db/guarded-socket.ts, and a retry finds the primary).
 */
const TRANSIENT_SQLSTATES = new Set(["40001", "40P01", "57P01", "57P02", "57P03", "25006"]);
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
  // A pooler's 08P01 for a refused setting is in the 08 class, but no retry changes a wrong setting or password.
  if (diagnoseDatabaseError(error)?.persistent) return false;
  for (let current: unknown = error, depth = 0; current && depth < 5; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && (TRANSIENT_SQLSTATES.has(code) || code.startsWith("08") || TRANSIENT_NODE_CODES.has(code))) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * The cause of a database error in one line, never the SQL text: the
 * diagnosis (cause and fix, see diagnose.ts) when it is a known connection
 * problem, else the innermost cause's message. Without a final period, as
 * it is quoted inside longer messages.
 */
export function rootMessage(error: unknown): string {
  const diagnosis = diagnoseDatabaseError(error);
  if (diagnosis) return diagnosis.message.replace(/\.$/, "");
  let current: unknown = error;
  for (let depth = 0; depth < 5; depth += 1) {
    const cause = (current as { cause?: unknown } | undefined)?.cause;
    if (!(cause instanceof Error)) break;
    current = cause;
  }
  return current instanceof Error ? current.message : String(current);
}

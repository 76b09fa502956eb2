/**
 * An error's cause chain, walked one way everywhere. drizzle wraps every
 * driver error in a DrizzleQueryError whose message is the SQL statement;
 * cronledger's own errors wrap that again; a connection attempt to several
 * addresses fails with an AggregateError holding one error per address. The
 * code that matters (a SQLSTATE, a socket error) is somewhere down there.
 *
 * A base module: it imports nothing of cronledger's, so errors.ts, log.ts
 * and every layer can ask it. What a database problem means (its diagnosis,
 * whether a retry can fix it) is db/'s business, built on this walk.
 */

/** The fields of an error (or anything thrown) that the walk and its readers look at. */
export interface ErrorLike {
  readonly name?: unknown;
  readonly message?: unknown;
  readonly code?: unknown;
  readonly address?: unknown;
  readonly port?: unknown;
  readonly hostname?: unknown;
  readonly cause?: unknown;
  readonly errors?: unknown;
}

/** How deep a chain is followed: drizzle adds one level, cronledger's own errors one or two, an AggregateError one. */
const MAX_DEPTH = 8;

/** Every error in the chain (causes, and the attempts of an AggregateError), outermost first, each once. */
export function errorChain(error: unknown): ErrorLike[] {
  const found: ErrorLike[] = [];
  const visit = (current: unknown, depth: number) => {
    if (typeof current !== "object" || current === null || depth > MAX_DEPTH || found.includes(current)) return;
    const item = current as ErrorLike;
    found.push(item);
    if (Array.isArray(item.errors)) for (const inner of item.errors) visit(inner, depth + 1);
    visit(item.cause, depth + 1);
  };
  visit(error, 0);
  return found;
}

/** The first error in the chain with a string `code` satisfying `test`. */
export function findCode(error: unknown, test: (code: string) => boolean): ErrorLike | undefined {
  return errorChain(error).find((item) => typeof item.code === "string" && test(item.code));
}

/** True when `error` or one of its causes carries SQLSTATE (or driver code) `state`. */
export function hasSqlState(error: unknown, state: string): boolean {
  return findCode(error, (code) => code === state) !== undefined;
}

/** 55P03: a lock wait ran past lock_timeout. */
export const isLockTimeout = (error: unknown): boolean => hasSqlState(error, "55P03");
/** 57014: the statement was cancelled (by a statement timeout, src/db/statement-timeout.ts, or an operator). */
export const isCancelled = (error: unknown): boolean => hasSqlState(error, "57014");

/** SQLSTATEs worth retrying: serialization failure, deadlock, admin shutdown, the 08 connection class, and
 * read_only_sql_transaction (25006: cronledger never asks for a read-only transaction, so the server is a
 * standby or a demoted primary; its connection is replaced, src/db/guarded-socket.ts, and a retry finds the primary). */
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
/** Serialization failures and deadlocks are transient but say nothing about the connection. */
const NOT_CONNECTIVITY = new Set(["40001", "40P01"]);

/**
 * True when the chain carries a code that a retry on a fresh connection can
 * fix. Whether it is worth retrying also depends on what the server said
 * (a pooler refusing a setting answers in the 08 class too): see
 * isTransientDatabaseError in src/db/transient.ts.
 */
export function hasTransientCode(error: unknown): boolean {
  return findCode(error, (code) => TRANSIENT_SQLSTATES.has(code) || code.startsWith("08") || TRANSIENT_NODE_CODES.has(code)) !== undefined;
}

/** True when the chain carries a serialization failure or a deadlock: transient, but the connection is fine. */
export function hasStatementConflict(error: unknown): boolean {
  return findCode(error, (code) => NOT_CONNECTIVITY.has(code)) !== undefined;
}

/** The innermost `Error` down the `cause` links (the driver's, not drizzle's statement wrapper), or `error` itself. */
export function innermostError(error: unknown): unknown {
  let current: unknown = error;
  for (let depth = 0; depth < MAX_DEPTH; depth += 1) {
    const cause = (current as { cause?: unknown } | undefined)?.cause;
    if (!(cause instanceof Error)) break;
    current = cause;
  }
  return current;
}

/** The innermost cause's message: what went wrong, without the statement drizzle wrapped around it. */
export function innermostMessage(error: unknown): string {
  const innermost = innermostError(error);
  return innermost instanceof Error ? innermost.message : String(innermost);
}

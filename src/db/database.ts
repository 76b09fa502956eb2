import type { Executor } from "./executor.js";

/**
 * An open database, PostgreSQL or PGlite: what src/db/connection.ts opens
 * and every layer above works on. Its own module so that the database
 * setting (src/db/settings.ts), which can be an already-open Database, can
 * tell one apart without importing the code that opens one.
 */
export interface Database {
  readonly kind: "postgres" | "pglite";
  /** Human-readable description without credentials, for the startup log line. */
  readonly label: string;
  readonly db: Executor;
  /** Statements sent through drizzle since open; lets tests and benches count round trips. */
  readonly statements: { count: number };
  /**
   * The same database, with every statement cancelled by the server once it
   * has run `timeoutMs` (src/db/statement-timeout.ts; SQLSTATE 57014). The
   * scheduler's pass runs on it. PGlite, one connection in this process, has
   * nothing to cancel from and returns `db`.
   */
  withStatementTimeout(timeoutMs: number): Executor;
  listen(channel: string, onMessage: (payload: string) => void): Promise<() => Promise<void>>;
  /** Runs `fn` while holding a session-level advisory lock on a connection of its own. */
  withAdvisoryLock<T>(key: readonly [number, number], fn: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
}


/** An already-open Database (openDatabase's result, or another copy of the package's): shared, and never closed by the ledger. */
export function isDatabase(value: unknown): value is Database {
  return typeof value === "object" && value !== null && "db" in value && "kind" in value;
}

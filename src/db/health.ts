import { hasStatementConflict } from "../error-chain.js";
import type { Logger } from "../log.js";
import { diagnoseDatabaseError } from "./diagnose.js";
import { isTransientDatabaseError, rootMessage } from "./transient.js";

/** True for errors that mean the database could not be reached (refused, dropped, shut down), not that a statement went wrong. */
export function isConnectionLoss(error: unknown): boolean {
  // Serialization failures and deadlocks are transient but say nothing about the connection.
  return isTransientDatabaseError(error) && !hasStatementConflict(error);
}

/**
 * The kinds of outage the health tracker logs once: the server out of reach,
 * the database itself gone (dropped under a running process), or cronledger's
 * tables gone from it (a database made again empty): `migration_required`.
 */
export type OutageKind = "connection" | "database_gone" | "tables_missing";

/** Which outage a failed statement's error means, if any: anything else is the statement's own failure, logged by its caller. */
export function outageOf(error: unknown): OutageKind | undefined {
  if (isConnectionLoss(error)) return "connection";
  const problem = diagnoseDatabaseError(error)?.problem;
  if (problem === "database_not_found") return "database_gone";
  if (problem === "migration_required") return "tables_missing";
  return undefined;
}

/** What one statement's answer tells the health tracker (DatabaseHealth.sent()). */
export interface StatementReport {
  /**
   * The statement succeeded: ends an outage that began before it was sent.
   * `readsTables: false` for one that may have read no table (the scheduler's
   * idle pass is a clock read): it cannot end an outage of missing tables.
   */
  succeeded(options?: { readonly readsTables?: boolean }): void;
  /** The statement failed. Returns true when the caller should log the failure itself (anything but a connection loss). */
  failed(error: unknown): boolean;
}

/**
 * Whether this process can reach its database, as its periodic statements
 * (the ticker's passes, the workers' claims, heartbeats and completions)
 * find out. An outage is logged once when it begins and once when it ends,
 * with how long it lasted, instead of once per failed statement of every part;
 * a change of its kind on the way (the server back, but the database dropped;
 * then made again without cronledger's tables) is one line more.
 *
 * An answer changes the state only if its statement was sent in the current
 * state. Answers cross on the wire: when the server shuts down, a statement
 * it answered just before can arrive after another connection's failure has
 * begun the outage, and one sent during the outage can fail after another's
 * success has ended it. Counting those logged one outage as two (seen in CI:
 * four "lost the database" lines for three outages).
 */
export class DatabaseHealth {
  private lostAt: number | undefined;
  private kind: OutageKind | undefined;
  private readonly backListeners = new Set<() => void>();
  /** Changes of state so far (each loss, change of kind and return): a statement's report remembers the one it was sent in. */
  private generation = 0;

  constructor(
    private readonly logger: Logger,
    private readonly label: string,
    private readonly clock: () => number = Date.now,
  ) {}

  /** True between an outage's first failure and the next statement, sent after it, that succeeds. */
  get down(): boolean {
    return this.lostAt !== undefined;
  }

  /**
   * Calls `listener` each time an outage ends, so that parts waiting out a
   * long retry delay (a persistent cause backs off to a minute) try again at
   * once. Returns the way to stop listening.
   */
  whenBack(listener: () => void): () => void {
    this.backListeners.add(listener);
    return () => this.backListeners.delete(listener);
  }

  /** Call just before sending a statement; tell the report how it went. */
  sent(): StatementReport {
    const generation = this.generation;
    return {
      succeeded: (options) => this.succeeded(generation, options?.readsTables ?? true),
      failed: (error) => this.failed(error, generation),
    };
  }

  private failed(error: unknown, generation: number): boolean {
    const kind = outageOf(error);
    if (kind === undefined) return true;
    // A statement sent before the last change of state says nothing new; one sent during the outage may say its kind changed.
    const fresh = generation === this.generation;
    if (this.lostAt === undefined ? fresh : fresh && kind !== this.kind) {
      this.lostAt ??= this.clock();
      this.kind = kind;
      this.generation += 1;
      this.logger.error(OUTAGE_LINES[kind](this.label), { error: rootMessage(error), ...(kind === "tables_missing" ? { code: "migration_required" } : {}) });
    }
    return false;
  }

  private succeeded(generation: number, readsTables: boolean): void {
    if (this.lostAt === undefined || generation !== this.generation) return;
    if (this.kind === "tables_missing" && !readsTables) return;
    const downMs = this.clock() - this.lostAt;
    this.lostAt = undefined;
    this.kind = undefined;
    this.generation += 1;
    this.logger.info(`database is back (${this.label}) after ${(downMs / 1000).toFixed(1)} s`, { downMs });
    for (const listener of this.backListeners) listener();
  }
}

/** The one line each kind of outage is logged with. */
const OUTAGE_LINES: Readonly<Record<OutageKind, (label: string) => string>> = {
  connection: (label) => `lost the database (${label}); retrying until it is back`,
  database_gone: (label) => `the database is gone (${label}): it no longer exists on the server; retrying until it is back`,
  tables_missing: (label) => `cronledger's tables are missing from the database (${label}) [migration_required]: run \`cronledger migrate\`; retrying until they are there`,
};

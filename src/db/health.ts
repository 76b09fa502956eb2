import { hasStatementConflict } from "../error-chain.js";
import type { Logger } from "../log.js";
import { isTransientDatabaseError, rootMessage } from "./transient.js";

/** True for errors that mean the database could not be reached (refused, dropped, shut down), not that a statement went wrong. */
export function isConnectionLoss(error: unknown): boolean {
  // Serialization failures and deadlocks are transient but say nothing about the connection.
  return isTransientDatabaseError(error) && !hasStatementConflict(error);
}

/** What one statement's answer tells the health tracker (DatabaseHealth.sent()). */
export interface StatementReport {
  /** The statement succeeded: ends an outage that began before it was sent. */
  succeeded(): void;
  /** The statement failed. Returns true when the caller should log the failure itself (anything but a connection loss). */
  failed(error: unknown): boolean;
}

/**
 * Whether this process can reach its database, as its periodic statements
 * (the ticker's passes, the workers' claims, heartbeats and completions)
 * find out. An outage is logged once when it begins and once when it ends,
 * with how long it lasted, instead of once per failed statement of every part.
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
  /** Changes of state so far (each loss and each return): a statement's report remembers the one it was sent in. */
  private generation = 0;

  constructor(
    private readonly logger: Logger,
    private readonly label: string,
    private readonly clock: () => number = Date.now,
  ) {}

  /** True between a connection loss and the next statement, sent after it, that succeeds. */
  get down(): boolean {
    return this.lostAt !== undefined;
  }

  /** Call just before sending a statement; tell the report how it went. */
  sent(): StatementReport {
    const generation = this.generation;
    return {
      succeeded: () => this.succeeded(generation),
      failed: (error) => this.failed(error, generation),
    };
  }

  private failed(error: unknown, generation: number): boolean {
    if (!isConnectionLoss(error)) return true;
    if (this.lostAt === undefined && generation === this.generation) {
      this.lostAt = this.clock();
      this.generation += 1;
      this.logger.error(`lost the database (${this.label}); retrying until it is back`, { error: rootMessage(error) });
    }
    return false;
  }

  private succeeded(generation: number): void {
    if (this.lostAt === undefined || generation !== this.generation) return;
    const downMs = this.clock() - this.lostAt;
    this.lostAt = undefined;
    this.generation += 1;
    this.logger.info(`database is back (${this.label}) after ${(downMs / 1000).toFixed(1)} s`, { downMs });
  }
}

import type { Logger } from "../log.js";
import { isTransientDatabaseError, rootMessage } from "./transient.js";

/** Serialization failures and deadlocks are transient but say nothing about the connection. */
const NOT_CONNECTIVITY = new Set(["40001", "40P01"]);

/** True for errors that mean the database could not be reached (refused, dropped, shut down), not that a statement went wrong. */
export function isConnectionLoss(error: unknown): boolean {
  if (!isTransientDatabaseError(error)) return false;
  for (let current: unknown = error, depth = 0; current && depth < 5; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && NOT_CONNECTIVITY.has(code)) return false;
    current = (current as { cause?: unknown }).cause;
  }
  return true;
}

/**
 * Whether this process can reach its database, as its periodic statements
 * (the ticker's passes, the workers' claims and heartbeats) find out. An
 * outage is logged once when it begins and once when it ends, with how long
 * it lasted, instead of once per failed statement of every part.
 */
export class DatabaseHealth {
  private lostAt: number | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly label: string,
    private readonly clock: () => number = Date.now,
  ) {}

  /** True between a connection loss and the next statement that succeeds. */
  get down(): boolean {
    return this.lostAt !== undefined;
  }

  /**
   * Records a failed statement. Returns true when the caller should log the
   * failure itself: anything but a connection loss, which is logged here,
   * once per outage.
   */
  failed(error: unknown): boolean {
    if (!isConnectionLoss(error)) return true;
    if (this.lostAt === undefined) {
      this.lostAt = this.clock();
      this.logger.error(`lost the database (${this.label}); retrying until it is back`, { error: rootMessage(error) });
    }
    return false;
  }

  /** Records a statement that succeeded; ends an outage. */
  succeeded(): void {
    if (this.lostAt === undefined) return;
    const downMs = this.clock() - this.lostAt;
    this.lostAt = undefined;
    this.logger.info(`database is back (${this.label}) after ${(downMs / 1000).toFixed(1)} s`, { downMs });
  }
}

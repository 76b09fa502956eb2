import type { Logger } from "../log.js";
import { redact, redactError } from "../redact.js";
import { describeDatabaseError, diagnoseDatabaseError } from "./diagnose.js";

/**
 * A runtime failure's log line (tick, claim, flush, heartbeat, LISTEN,
 * supervisor restarts): its cause in one line, never the SQL statement drizzle
 * wraps around a driver error; the whole error, statement included, goes to
 * `debug`. A persistent problem (wrong password, missing database) is logged
 * at error level whatever `level` says, saying that retries slow down.
 * With `health`, a lost connection is not logged here: the health tracker
 * logs the outage once when it begins and once when it ends.
 */
export function logFailure(
  logger: Logger,
  level: "warn" | "error",
  message: string,
  fields: Record<string, unknown>,
  error: unknown,
  /** The process's view of its database (src/db/health.ts): a lost connection is logged there, once per outage, and only at debug here. */
  health?: { failed(error: unknown): boolean },
): void {
  if (health !== undefined && !health.failed(error)) {
    logger.debug(message, { ...fields, error: redactError(error) });
    return;
  }
  const persistent = diagnoseDatabaseError(error)?.persistent === true;
  const line = persistent ? `${message} (not transient: retries slow down to once a minute until the cause is fixed)` : message;
  logger[persistent ? "error" : level](line, { ...fields, error: redact(describeDatabaseError(error)) });
  logger.debug(`${message}: the full error`, { ...fields, error: redactError(error) });
}

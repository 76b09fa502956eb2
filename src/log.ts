import { describeDatabaseError, diagnoseDatabaseError } from "./db/diagnose.js";
import { redact, redactError, redactFields } from "./redact.js";

/** Structured logger; cronledger writes one line per event through it. */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/**
 * A logger that adds `fields` to every line of `parent` (a worker's id, a
 * job's id and attempt). With `redactLines`, messages and fields are redacted
 * on the way through: handlers log through it (`ctx.log`), and a payload
 * logged by hand must not reach the application's log sink with its secrets.
 */
export function childLogger(parent: Logger, fields: Record<string, unknown>, redactLines = false): Logger {
  const line =
    (level: keyof Logger) =>
    (message: string, extra?: Record<string, unknown>): void => {
      const own = extra === undefined ? undefined : redactLines ? redactFields(extra) : extra;
      parent[level](redactLines ? redact(message) : message, own === undefined ? fields : { ...fields, ...own });
    };
  return { debug: line("debug"), info: line("info"), warn: line("warn"), error: line("error") };
}

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

/** One log line, redacted: `[cronledger] message {fields}`. Handlers log through ctx.log into it too: it redacts, whoever wrote the line. */
export function formatLogLine(message: string, fields?: Record<string, unknown>): string {
  if (!fields || Object.keys(fields).length === 0) return `[cronledger] ${redact(message)}`;
  return `[cronledger] ${redact(message)} ${JSON.stringify(redactFields(fields))}`;
}

export const consoleLogger: Logger = {
  debug: () => {},
  info: (message, fields) => console.log(formatLogLine(message, fields)),
  warn: (message, fields) => console.warn(formatLogLine(message, fields)),
  error: (message, fields) => console.error(formatLogLine(message, fields)),
};

export const silentLogger: Logger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

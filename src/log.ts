import { redact, redactFields } from "./redact.js";

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

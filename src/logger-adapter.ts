import type { Logger } from "./log.js";

type Level = "debug" | "info" | "warn" | "error";
type FieldsFirst = (fields: Record<string, unknown>, message: string) => void;

/** pino, and loggers built on it: `bindings()` and numeric `levels.values` are its own API. */
function isPino(logger: Logger): boolean {
  const candidate = logger as Logger & { bindings?: unknown; levels?: { values?: unknown } };
  return typeof candidate.bindings === "function" && typeof candidate.levels?.values === "object";
}

/**
 * The `logger` option as the application passes it. cronledger calls
 * `info(message, fields)`, the order of console, winston (`fields` become
 * the entry's metadata) and its own loggers. pino takes `(fields, message)`
 * and, called the other way, would keep the message and drop the fields; it
 * is recognised and called its own way, so a pino instance (or child) is
 * passed as it is, with no adapter.
 */
export function adaptLogger(logger: Logger): Logger {
  if (!isPino(logger)) return logger;
  const level =
    (name: Level) =>
    (message: string, fields?: Record<string, unknown>): void => {
      if (fields === undefined) logger[name](message);
      else (logger[name] as unknown as FieldsFirst).call(logger, fields, message);
    };
  return { debug: level("debug"), info: level("info"), warn: level("warn"), error: level("error") };
}

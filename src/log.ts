import { redact, redactFields } from "./admin/redact.js";

/** Structured logger; cronledger writes one line per event through it. */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

// Handlers log through ctx.log into this sink too: it redacts, whoever wrote the line.
function format(message: string, fields?: Record<string, unknown>): string {
  if (!fields || Object.keys(fields).length === 0) return `[cronledger] ${redact(message)}`;
  return `[cronledger] ${redact(message)} ${JSON.stringify(redactFields(fields))}`;
}

export const consoleLogger: Logger = {
  debug: () => {},
  info: (message, fields) => console.log(format(message, fields)),
  warn: (message, fields) => console.warn(format(message, fields)),
  error: (message, fields) => console.error(format(message, fields)),
};

export const silentLogger: Logger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

/**
 * The version of cronledger's JSON documents: the HTTP API's bodies and the
 * CLI's `--json` output share one shape (docs/wire-format.md). It changes
 * when a field is removed or renamed, or changes its type or meaning; a new
 * field does not change it, so readers ignore the fields they do not know.
 */
export const WIRE_VERSION = 1;

/** Every document starts with the version of the shape it is in. */
export interface Versioned {
  readonly version: typeof WIRE_VERSION;
}

/** An instant on the wire: ISO 8601 in UTC with milliseconds, or null. */
export function iso(date: Date): string;
export function iso(date: Date | null): string | null;
export function iso(date: Date | null): string | null {
  return date === null ? null : date.toISOString();
}

import { z } from "zod";
import { ConfigError, PayloadTooLargeError } from "../errors.js";

/** The default `maxPayloadBytes`: 1 MiB of stored JSON. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1_048_576;

/** PostgreSQL's own ceiling for one jsonb value (255 MiB): a larger limit could only end in a raw SQL error. */
export const JSONB_MAX_BYTES = 268_435_455;

const LIMIT = `a whole number of bytes from 1 to ${JSONB_MAX_BYTES} (PostgreSQL's jsonb limit); the default is ${DEFAULT_MAX_PAYLOAD_BYTES} (1 MiB)`;

/** The `maxPayloadBytes` option (createCronledger, the config file, validateSchedule): a whole number of bytes, at least 1, at most jsonb's ceiling. */
export const maxPayloadBytesSchema = z
  .number({ error: `must be ${LIMIT}` })
  .int(`must be ${LIMIT}`)
  .min(1, `must be ${LIMIT}`)
  .max(JSONB_MAX_BYTES, `must be ${LIMIT}`)
  .default(DEFAULT_MAX_PAYLOAD_BYTES);

/** `maxPayloadBytes` as given to validateSchedule, checked by the option's schema. */
export function resolveMaxPayloadBytes(value: unknown): number {
  const parsed = maxPayloadBytesSchema.safeParse(value);
  if (!parsed.success) throw new ConfigError(`Invalid maxPayloadBytes ${JSON.stringify(value)}: use ${LIMIT}.`);
  return parsed.data;
}

/**
 * How far a payload's stored JSON is over `maxBytes` (UTF-8), or undefined
 * when it fits. A UTF-16 code unit is 1 to 3 bytes, so the string's length
 * settles most cases without counting: up to max/3 characters fits (any
 * payload under 341 KiB at the default), over max characters does not (its
 * length is then the lower bound reported, since counting 20 MB takes about
 * 0.3 s here). Only lengths in between are counted, by Buffer.byteLength.
 */
export function bytesOverLimit(json: string, maxBytes: number): { bytes: number; atLeast: boolean } | undefined {
  if (json.length * 3 <= maxBytes) return undefined;
  if (json.length > maxBytes) return { bytes: json.length, atLeast: true };
  const bytes = Buffer.byteLength(json, "utf8");
  return bytes > maxBytes ? { bytes, atLeast: false } : undefined;
}

/** "20.0 MiB", "1 MiB", "512 KiB", "900 bytes": sizes as an operator reads them in an error. */
export function readableBytes(bytes: number): string {
  if (bytes >= 1_048_576) return `${Number.isInteger(bytes / 1_048_576) ? bytes / 1_048_576 : (bytes / 1_048_576).toFixed(1)} MiB`;
  if (bytes >= 1_024) return `${Number.isInteger(bytes / 1_024) ? bytes / 1_024 : (bytes / 1_024).toFixed(1)} KiB`;
  return `${bytes} bytes`;
}

/** What is wrong with a payload over the limit and what to do, for an enqueue error or a schedule problem. */
export function describeTooLarge(size: { bytes: number; atLeast: boolean }, maxBytes: number): string {
  return (
    `is ${size.atLeast ? "at least " : ""}${readableBytes(size.bytes)} as stored JSON, over the ${readableBytes(maxBytes)} limit (maxPayloadBytes): ` +
    "keep large data elsewhere (object storage, a table of your own) and pass a reference to it, or raise maxPayloadBytes in createCronledger / defineConfig"
  );
}

/** The error enqueue throws for a payload over the limit; `context` names the enqueueMany item. */
export function payloadTooLarge(jobName: string, size: { bytes: number; atLeast: boolean }, maxBytes: number, context?: string): PayloadTooLargeError {
  return new PayloadTooLargeError(
    jobName,
    size.bytes,
    maxBytes,
    `Payload for job "${jobName}"${context ? ` (${context})` : ""} ${describeTooLarge(size, maxBytes)}. Nothing was written.`,
  );
}

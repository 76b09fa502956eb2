import { createHash } from "node:crypto";

/** Every stored key stays within this bound so index entries stay small. */
export const MAX_KEY_LENGTH = 255;
const DIGEST_LENGTH = 64;

/**
 * Keys longer than 255 characters become a readable prefix plus the sha256
 * of the whole key, so distinct long keys stay distinct. Ledger keys,
 * idempotency keys and retry keys all go through here.
 */
export function boundKey(key: string): string {
  if (key.length <= MAX_KEY_LENGTH) return key;
  const digest = createHash("sha256").update(key).digest("hex");
  return `${key.slice(0, MAX_KEY_LENGTH - DIGEST_LENGTH - 1)}~${digest}`;
}

/**
 * The start of every backfilled job's idempotency key (src/schedule/identity.ts): it keeps two
 * backfills of one slot apart in `job_keys`, and tells a handler its run was backfilled (`ctx.schedule.backfilled`).
 */
export const BACKFILL_KEY_PREFIX = "backfill:";

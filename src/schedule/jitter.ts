import { createHash } from "node:crypto";

const HASH_RANGE = 2 ** 48;

/**
 * Delay in whole milliseconds, 0..maxJitterMs inclusive, for one slot of one
 * entry. Derived from a hash rather than a random number so that every
 * replica computes the same delay for the same slot.
 */
export function jitterMs(identity: string, slotMs: number, maxJitterMs: number): number {
  if (!Number.isFinite(maxJitterMs) || maxJitterMs < 0) {
    throw new RangeError(`maxJitterMs must be a non-negative number of milliseconds, got ${maxJitterMs}`);
  }
  if (!Number.isFinite(slotMs)) throw new RangeError(`slotMs must be epoch milliseconds, got ${slotMs}`);
  const max = Math.floor(maxJitterMs);
  if (max === 0) return 0;
  const digest = createHash("sha256").update(`${identity}\u0000${slotMs}`).digest();
  return Math.min(max, Math.floor((digest.readUIntBE(0, 6) / HASH_RANGE) * (max + 1)));
}

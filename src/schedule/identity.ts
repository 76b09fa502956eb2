import { createHash } from "node:crypto";

/** Every stored key stays within this bound so index entries stay small. */
export const MAX_KEY_LENGTH = 255;
const DIGEST_LENGTH = 64;

/**
 * Keys longer than 255 characters become a readable prefix plus the sha256
 * of the whole key, so distinct long keys stay distinct.
 */
export function boundKey(key: string): string {
  if (key.length <= MAX_KEY_LENGTH) return key;
  const digest = createHash("sha256").update(key).digest("hex");
  return `${key.slice(0, MAX_KEY_LENGTH - DIGEST_LENGTH - 1)}~${digest}`;
}

export interface IdentityParts {
  readonly jobName: string;
  readonly key: string | undefined;
  readonly canonicalCron: string;
  readonly timezone: string;
}

/** identity = job name + entry key + canonical cron + timezone (README, "Identity"); payload is not part of it. */
export function entryIdentity(parts: IdentityParts): string {
  return `${parts.jobName}|${parts.key ?? ""}|${parts.canonicalCron}|${parts.timezone}`;
}

/** The ledger row key: the identity within its namespace, bounded. */
export function ledgerKey(namespace: string, identity: string): string {
  return boundKey(`${namespace}|${identity}`);
}

/** The scheduled job's idempotency key, `identity @ slot`: a second guard behind the ledger. */
export function slotIdempotencyKey(namespace: string, identity: string, slotMs: number): string {
  return boundKey(`${namespace}|${identity}@${new Date(slotMs).toISOString()}`);
}

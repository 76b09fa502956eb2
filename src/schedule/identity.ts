import { boundKey } from "../keys.js";

export interface IdentityParts {
  readonly jobName: string;
  readonly key: string | undefined;
  readonly canonicalCron: string;
  readonly timezone: string;
}

/** identity = job name + entry key + canonical cron + timezone ; payload is not part of it. */
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

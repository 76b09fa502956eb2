import { isoOf } from "../db/sql/fragments.js";
import { BACKFILL_KEY_PREFIX, boundKey } from "../keys.js";

export interface IdentityParts {
  readonly jobName: string;
  readonly key: string | undefined;
  readonly canonicalCron: string;
  readonly timezone: string;
}

/** identity = job name + entry key + canonical cron + timezone ; payload is not part of it. */
export function entryIdentity(parts: IdentityParts): string {
  // join() makes one flat string; a template literal makes a rope of its pieces, which a process keeps per
  // entry (with ledgerKey's, about 20 MB at 100,000 entries: docs/benchmarks.md).
  return [parts.jobName, parts.key ?? "", parts.canonicalCron, parts.timezone].join("|");
}

/** The ledger row key: the identity within its namespace, bounded. */
export function ledgerKey(namespace: string, identity: string): string {
  return boundKey([namespace, identity].join("|"));
}

/** The scheduled job's idempotency key, `identity @ slot`: a second guard behind the ledger. */
export function slotIdempotencyKey(namespace: string, identity: string, slotMs: number): string {
  return boundKey(`${namespace}|${identity}@${isoOf(slotMs)}`);
}

/**
 * A backfilled job's idempotency key, `backfill:` + `identity @ slot`: one per (entry, slot), so the
 * database lets one backfill of a slot insert its job (src/db/sql/backfill.ts). Kept apart from the
 * ticker's key so a backfilled run can be told from a live one.
 */
export function backfillIdempotencyKey(namespace: string, identity: string, slotMs: number): string {
  return boundKey(`${BACKFILL_KEY_PREFIX}${namespace}|${identity}@${isoOf(slotMs)}`);
}

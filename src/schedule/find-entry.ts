import { EntryNotFoundError } from "../errors.js";
import { closest } from "../suggest.js";
import type { ResolvedEntry } from "./validate.js";

/**
 * The entry an operator names (to pause, resume or trigger it): by its
 * identity or ledger key (as the status lists them), by its `key` in
 * JOBS_SCHEDULE, or by its job name when one entry runs that job. Anything
 * else is an EntryNotFoundError with a did-you-mean over the running
 * schedule's names.
 */
export function findEntry(entries: readonly ResolvedEntry[], name: string): ResolvedEntry {
  const exact = entries.find((entry) => entry.identity === name || entry.ledgerKey === name);
  if (exact !== undefined) return exact;
  const byKey = entries.filter((entry) => entry.entryKey === name);
  if (byKey.length === 1 && byKey[0] !== undefined) return byKey[0];
  const byJob = entries.filter((entry) => entry.jobName === name);
  if (byJob.length === 1 && byJob[0] !== undefined) return byJob[0];
  const names = entries.flatMap((entry) => [entry.identity, entry.jobName, ...(entry.entryKey === undefined ? [] : [entry.entryKey])]);
  throw new EntryNotFoundError(name, closest(name, names));
}

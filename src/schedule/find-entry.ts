import { EntryNotFoundError, InvalidArgumentError } from "../errors.js";
import { closest } from "../suggest.js";
import type { ResolvedEntry } from "./validate.js";

/**
 * The entry an operator names (to pause, resume, trigger or backfill it): by its
 * identity or ledger key (as the status lists them), by its `key` in
 * JOBS_SCHEDULE, or by its job name when one entry runs that job. Anything
 * else is an EntryNotFoundError with a did-you-mean over the running
 * schedule's names; a job name several entries run asks for one of them.
 */
export function findEntry(entries: readonly ResolvedEntry[], name: string): ResolvedEntry {
  const byField = (field: (entry: ResolvedEntry) => string | undefined) => entries.filter((entry) => field(entry) === name);
  for (const field of [(e: ResolvedEntry) => e.ledgerKey, (e: ResolvedEntry) => e.identity, (e: ResolvedEntry) => e.entryKey]) {
    const [match, other] = byField(field);
    if (match !== undefined && other === undefined) return match;
  }
  const byJob = byField((entry) => entry.jobName);
  if (byJob.length === 1 && byJob[0] !== undefined) return byJob[0];
  if (byJob.length > 1) {
    throw new InvalidArgumentError(`${byJob.length} entries run job "${name}"; name one by its key or identity: ${byJob.map((entry) => entry.entryKey ?? entry.identity).join(", ")}.`);
  }
  const names = entries.map((entry) => entry.entryKey ?? entry.jobName);
  throw new EntryNotFoundError(name, closest(name, [...names, ...entries.map((entry) => entry.identity)]), names);
}

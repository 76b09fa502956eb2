// The job attempts cronledger_jobs_total counts (src/admin/metrics.ts), kept in plain arrays between scrapes.
import type { Counter, Registry } from "prom-client";

export const JOB_STATUS_LABELS = ["started", "done", "retry", "skip", "panicked", "noop", "cancelled"] as const;
export type JobStatusLabel = (typeof JOB_STATUS_LABELS)[number];

/**
 * Job attempts counted since cronledger_jobs_total was last read, one array
 * of counts per job type (indexed like JOB_STATUS_LABELS). The counter takes
 * them in when it is read (its `collect`, on every scrape), so a job costs
 * two array increments instead of two prom-client increments, each of which
 * builds its label key string: about 16 % of the bytes a no-op drain's
 * worker allocated (sampling heap profile, 100,000 jobs). What a scrape
 * reports is the same; the counts of every ledger on a registry add up.
 */
export class AttemptCounts {
  private readonly byType = new Map<string, number[]>();

  of(type: string): number[] {
    let counts = this.byType.get(type);
    if (counts === undefined) {
      counts = JOB_STATUS_LABELS.map(() => 0);
      this.byType.set(type, counts);
    }
    return counts;
  }

  /** Adds what was counted to `counter` and starts again from zero. */
  flushInto(counter: Counter<"job_type" | "status">): void {
    for (const [type, counts] of this.byType) {
      counts.forEach((count, index) => {
        if (count === 0) return;
        counter.inc({ job_type: type, status: JOB_STATUS_LABELS[index] as JobStatusLabel }, count);
        counts[index] = 0;
      });
    }
  }
}
const ATTEMPT_COUNTS = new WeakMap<Registry, Set<AttemptCounts>>();

/** The attempt counts of every ledger on `registry`: cronledger_jobs_total's `collect` takes them all in. */
export function attemptCountsOf(registry: Registry): Set<AttemptCounts> {
  const counts = ATTEMPT_COUNTS.get(registry) ?? new Set<AttemptCounts>();
  ATTEMPT_COUNTS.set(registry, counts);
  return counts;
}

/** A status's index in a job type's counts. */
export const STATUS_INDEX = new Map<JobStatusLabel, number>(JOB_STATUS_LABELS.map((status, index) => [status, index]));
export const STARTED = STATUS_INDEX.get("started") as number;

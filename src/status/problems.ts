import type { CronledgerHooks, TickReport } from "../events.js";

/** Something a recent tick of this process found wrong with one entry, until a later tick handles that entry's slot normally. */
export interface RecentEntryProblem {
  readonly code: "repaired";
  readonly severity: "warning";
  readonly identity: string;
  readonly key: string;
  readonly jobName: string;
  readonly message: string;
  /** The tick time at which it was seen. */
  readonly at: Date;
}

/**
 * Remembers entries whose ledger value recent ticks of this process found in
 * the future and repaired, so the admin status can warn about them. An entry
 * drops off as soon as a tick enqueues, skips or loses a race for one of its
 * slots. Quarantines are not kept here: they live in the ledger row, where
 * every replica and every admin sees them (src/status/model.ts).
 */
export class EntryProblemTracker {
  private readonly problems = new Map<string, RecentEntryProblem>();
  readonly hooks: CronledgerHooks = {
    tickCompleted: (report) => this.record(report),
  };

  private record(report: TickReport): void {
    for (const outcome of [...report.enqueued, ...report.lostRace, ...report.skippedStale]) this.problems.delete(outcome.key);
    const seen = (entry: { identity: string; key: string; jobName: string }) => ({ identity: entry.identity, key: entry.key, jobName: entry.jobName, at: report.now });
    for (const repair of report.repaired) {
      this.problems.set(repair.key, {
        ...seen(repair),
        code: "repaired",
        severity: "warning",
        message: `ledger value ${repair.from.toISOString()} was in the future; repaired to ${repair.to.toISOString()}`,
      });
    }
  }

  recent(): RecentEntryProblem[] {
    return [...this.problems.values()];
  }
}

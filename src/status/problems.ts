import type { CronledgerHooks } from "../events.js";
import type { TickPhase } from "../errors.js";
import type { TickReport } from "../schedule/tick.js";
import { redact } from "../redact.js";

/** Something a recent tick found wrong with one entry, until a later tick handles that entry's slot normally. */
export interface RecentEntryProblem {
  readonly code: "quarantined" | "repaired";
  readonly severity: "error" | "warning";
  readonly identity: string;
  readonly key: string;
  readonly jobName: string;
  readonly message: string;
  readonly phase?: TickPhase;
  readonly slot?: Date;
  /** The tick time at which it was seen. */
  readonly at: Date;
}

/**
 * Remembers entries that recent ticks quarantined or repaired, so the admin
 * status can list them as broken. An entry drops off as soon as a tick
 * enqueues, skips or loses a race for one of its slots: it works again.
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
    for (const quarantine of report.quarantined) {
      this.problems.set(quarantine.key, {
        ...seen(quarantine),
        code: "quarantined",
        severity: "error",
        message: `slot ${quarantine.slot.toISOString()} could not be enqueued (phase ${quarantine.phase}): ${redact(quarantine.error)}`,
        phase: quarantine.phase,
        slot: quarantine.slot,
      });
    }
  }

  recent(): RecentEntryProblem[] {
    return [...this.problems.values()];
  }
}

import type { Logger } from "../log.js";
import { redactError } from "../redact.js";

/** Reports go at least this often, however long the grace: once every ten minutes costs nothing. */
const MAX_REPORT_INTERVAL_MS = 10 * 60_000;
const MIN_REPORT_INTERVAL_MS = 1_000;

/** How often a running process reports its schedule: a quarter of the grace, within [1 s, 10 min]. */
export function reportInterval(graceMs: number): number {
  return Math.min(MAX_REPORT_INTERVAL_MS, Math.max(MIN_REPORT_INTERVAL_MS, Math.floor(graceMs / 4)));
}

/**
 * While `start()` runs, reports this process's schedule (its ledger keys) as
 * running, at start and then every reportInterval(grace): the prune chore,
 * whichever replica and version runs it, keeps the rows of every schedule
 * reported within the grace (src/db/sql/ledger.ts, pruneLedgerRows). A
 * failed report is retried at the next interval; four in a row would have to
 * fail before the grace could run out.
 */
export class SchedulePresence {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly report: () => Promise<void>,
    private readonly intervalMs: number,
    private readonly logger: Logger,
  ) {}

  start(): void {
    if (this.timer !== undefined) return;
    void this.send();
    this.timer = setInterval(() => void this.send(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private async send(): Promise<void> {
    try {
      await this.report();
    } catch (error) {
      this.logger.debug("could not report the schedule as running; retrying at the next interval", { error: redactError(error) });
    }
  }
}

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
 * Reports this process's schedule (its ledger keys) as running: the prune
 * chore, whichever replica and version runs it, keeps the rows of every
 * schedule reported within the grace (src/db/sql/ledger-rows.ts,
 * pruneLedgerRows). While `start()` runs, at start and then every
 * reportInterval(grace) on a timer; a process that only ticks (its own loop,
 * `cronledger tick --once`) reports from its ticks, at most as often
 * (`reportIfDue`). A failed report is retried at the next interval or tick;
 * four in a row would have to fail before the grace could run out.
 */
export class SchedulePresence {
  private timer: NodeJS.Timeout | undefined;
  private lastReportMs: number | undefined;

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

  /** After a tick outside start(): reports when no report went out within the interval; the timer does it while started. */
  async reportIfDue(): Promise<void> {
    if (this.timer !== undefined) return;
    if (this.lastReportMs !== undefined && Date.now() - this.lastReportMs < this.intervalMs) return;
    await this.send();
  }

  private async send(): Promise<void> {
    try {
      await this.report();
      this.lastReportMs = Date.now();
    } catch (error) {
      this.logger.debug("could not report the schedule as running; retrying at the next interval", { error: redactError(error) });
    }
  }
}

import type { StatementReport } from "../db/health.js";
import type { HeartbeatAnswer, HeldAttempt } from "../db/sql/jobs.js";
import type { StopRequest } from "../errors.js";
import { logFailure } from "../db/log-failure.js";
import type { Logger } from "../log.js";

export interface HeartbeatHost {
  /** The attempts the worker holds: running, claimed but not started, or finished with the result not yet written. */
  held(): HeldAttempt[];
  /** Refreshes their heartbeats; resolves with the ids this worker still holds and the stop requests on them. */
  beat(held: readonly HeldAttempt[]): Promise<HeartbeatAnswer>;
  /**
   * Attempts another attempt supersedes now, or that ended meanwhile (the reaper took them back and someone claimed
   * them). By job and attempt, not by job alone: while the beat was out, this worker may have claimed the job's next
   * attempt itself (a retry), which the beat's answer for the earlier attempt says nothing about.
   */
  lost(attempts: readonly HeldAttempt[]): void;
  /** Held jobs an operator asked to stop (the fallback for a missed NOTIFY; the worker ignores repeats). */
  stopRequested(requests: readonly StopRequest[]): void;
  /** The database's health tracker: a lost connection is logged there, once per outage. */
  readonly health: { sent(): StatementReport };
  readonly logger: Logger;
}

/**
 * Heartbeats every lease/3 for the jobs a worker holds, so a live worker's
 * jobs are never reaped while a dead worker's are within a lease. The beat
 * also keeps the worker's row in the registry fresh, so it is sent when the
 * worker holds nothing too. A beat that fails is only logged: the reaper
 * decides, and if the outage outlasts the lease the worker learns on its
 * next beat which jobs it lost. Each beat also brings the stop requests on
 * the jobs it holds: a worker that missed their NOTIFY stops them within lease/3.
 */
export class Heartbeats {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly host: HeartbeatHost,
    private readonly leaseMs: number,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.beat(), Math.max(10, Math.floor(this.leaseMs / 3)));
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Beats now, outside the timer (at start, before this process reaps, and before claiming after an outage); resolves true if it was written. */
  beatNow(): Promise<boolean> {
    return this.beat();
  }

  private async beat(): Promise<boolean> {
    const held = this.host.held();
    let answer: HeartbeatAnswer;
    const sent = this.host.health.sent();
    try {
      answer = await this.host.beat(held);
      sent.succeeded();
    } catch (error) {
      logFailure(this.host.logger, "warn", "heartbeat failed; other processes' reapers take jobs back if this lasts longer than the lease", { leaseMs: this.leaseMs }, error, sent);
      return false;
    }
    if (answer.retaken.length > 0) {
      this.host.logger.info("took back jobs the reaper had returned to the queue while the database was out of reach; they run on here", { jobIds: answer.retaken });
    }
    // A job the reaper ended for this attempt's lapsed lease runs on: its result replaces that verdict.
    const lost = held.filter(({ id }) => !answer.alive.has(id) && !answer.reapedHere.has(id));
    if (lost.length > 0) this.host.lost(lost);
    if (answer.stops.length > 0) this.host.stopRequested(answer.stops);
    return true;
  }
}

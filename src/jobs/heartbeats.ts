import type { StatementReport } from "../db/health.js";
import type { HeartbeatAnswer } from "../db/sql/jobs.js";
import type { StopRequest } from "../errors.js";
import { logFailure } from "../db/log-failure.js";
import type { Logger } from "../log.js";

export interface HeartbeatHost {
  /** Ids of the jobs the worker holds (running or claimed but not started). */
  held(): number[];
  /** Refreshes their heartbeats; resolves with the ids this worker still holds and the stop requests on them. */
  beat(ids: readonly number[]): Promise<HeartbeatAnswer>;
  /** Jobs the reaper took back (their heartbeat went stale before this one). */
  lost(ids: readonly number[]): void;
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

  /** Beats now, outside the timer (at start, and before this process reaps). */
  beatNow(): Promise<void> {
    return this.beat();
  }

  private async beat(): Promise<void> {
    const ids = this.host.held();
    let answer: HeartbeatAnswer;
    const sent = this.host.health.sent();
    try {
      answer = await this.host.beat(ids);
      sent.succeeded();
    } catch (error) {
      logFailure(this.host.logger, "warn", "heartbeat failed; the reaper takes jobs back if this lasts longer than the lease", { leaseMs: this.leaseMs }, error, sent);
      return;
    }
    const lost = ids.filter((id) => !answer.alive.has(id));
    if (lost.length > 0) this.host.lost(lost);
    if (answer.stops.length > 0) this.host.stopRequested(answer.stops);
  }
}

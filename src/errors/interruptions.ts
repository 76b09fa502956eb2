import { CronledgerError } from "./codes.js";

/**
 * Why a running attempt ended before its handler returned: its timeout, its
 * worker's shutdown, an operator's stop (and the kill after its grace), a
 * lease lost to the reaper or expired with its worker.
 */

/** The handler ran past its job's timeout; its signal was aborted and the attempt counts as failed. */
export class JobTimeoutError extends CronledgerError {
  readonly jobName: string;
  readonly timeoutMs: number;

  constructor(jobName: string, timeoutMs: number) {
    super(
      "job_timeout",
      `Job "${jobName}" ran longer than its timeout of ${timeoutMs} ms; its ctx.signal was aborted. Raise \`timeout\` in defineJob or make the handler faster.`,
    );
    this.jobName = jobName;
    this.timeoutMs = timeoutMs;
  }
}

/** Aborts a handler when its worker shuts down past the grace period; the job goes back to the queue. */
export class WorkerShutdownError extends CronledgerError {
  constructor(workerId: string) {
    super("worker_shutdown", `Worker ${workerId} is shutting down: the job was interrupted and returned to the queue.`);
  }
}

/** Who asked a running job to stop, when, and why: what `cancelJob` wrote in its row (cancel_requested_*). */
export interface StopRequest {
  readonly jobId: number;
  readonly requestedAt: Date;
  /** The operator's surface and identity (`cli:alice@host`, `admin`, an overlap policy). */
  readonly requestedBy: string;
  readonly reason: string | null;
}

/**
 * The reason of a handler's aborted `ctx.signal` when an operator (or an
 * entry's overlap policy) asked its running job to stop: `requestedBy` and
 * `reason` say who and why. The job ends `cancelled` when its handler
 * returns, never retried; one still running `graceMs` later is failed as
 * killed (JobKilledError).
 */
export class JobCancelledError extends CronledgerError {
  readonly jobId: number;
  readonly requestedAt: Date;
  readonly requestedBy: string;
  readonly reason: string | null;
  readonly graceMs: number;

  constructor(request: StopRequest, graceMs: number) {
    super(
      "job_cancelled",
      `Job ${request.jobId} was asked to stop by ${request.requestedBy}${request.reason ? ` (${request.reason})` : ""}; ` +
        `return from the handler: the job ends cancelled, or is failed as killed if it still runs ${graceMs} ms after the request reached its worker.`,
    );
    this.jobId = request.jobId;
    this.requestedAt = request.requestedAt;
    this.requestedBy = request.requestedBy;
    this.reason = request.reason;
    this.graceMs = graceMs;
  }
}

/** A handler that went on running for the stop grace after its job was asked to stop: the job is failed (not retried) and its worker slot freed. */
export class JobKilledError extends CronledgerError {
  readonly jobId: number;

  constructor(stop: JobCancelledError) {
    super(
      "job_killed",
      `Job ${stop.jobId} was asked to stop by ${stop.requestedBy}${stop.reason ? ` (${stop.reason})` : ""} and its handler had not returned ${stop.graceMs} ms later: ` +
        "failed as killed, not retried. Make the handler honour ctx.signal, or raise `stopGrace` in createCronledger.",
    );
    this.jobId = stop.jobId;
  }
}

/** Aborts a handler whose job the reaper took back (its heartbeat went stale); another worker may run it. */
export class LeaseLostError extends CronledgerError {
  constructor(jobId: number) {
    super("lease_lost", `Job ${jobId} was reaped while this worker ran it (stale heartbeat); it will run again elsewhere.`);
  }
}

export interface LeaseExpiry {
  readonly workerId: string;
  readonly attempt: number;
  /** As the database prints it. */
  readonly lastHeartbeat: string;
  readonly leaseMs: number;
  /** True when the job went back to the queue, false when that attempt was its last. */
  readonly requeued: boolean;
}

/**
 * What the reaper stores as `last_error` of a job whose worker stopped
 * heartbeating. The reaper writes it inside its one statement, from
 * `format(LeaseExpiredError.FORMAT, ...)`; the class is the one place the
 * text is spelt, so a stored ticket reads like `String(new LeaseExpiredError(...))`.
 */
export class LeaseExpiredError extends CronledgerError {
  /** PostgreSQL `format()` template: worker, attempt, last heartbeat, lease in ms, then what happened. */
  static readonly FORMAT = "LeaseExpiredError [lease_expired]: worker %s stopped heartbeating during attempt %s (last heartbeat %s, lease %s ms); %s";
  static readonly REQUEUED = "returned to the queue.";
  static readonly FAILED = "no attempts left, failed.";

  constructor(expiry: LeaseExpiry) {
    super(
      "lease_expired",
      `worker ${expiry.workerId} stopped heartbeating during attempt ${expiry.attempt} (last heartbeat ${expiry.lastHeartbeat}, lease ${expiry.leaseMs} ms); ` +
        (expiry.requeued ? LeaseExpiredError.REQUEUED : LeaseExpiredError.FAILED),
    );
  }
}

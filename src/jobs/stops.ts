import type { ClaimedJob } from "../db/sql/jobs.js";
import { JobCancelledError, JobKilledError, type StopRequest } from "../errors.js";
import type { Logger } from "../log.js";
import { redactError } from "../redact.js";
import type { Attempt } from "./attempt.js";
import type { Completion } from "./completion.js";

/** A handler asked to stop gets this long to return before its job is failed as killed (docs/decisions.md, "Stopping a running job"). */
export const DEFAULT_STOP_GRACE_MS = 30_000;

/**
 * A worker's side of stopping running jobs (cancelJob on a running job,
 * src/db/sql/operators.ts): the requests arrive through the heartbeat
 * (src/jobs/heartbeats.ts), which a NOTIFY on `cronledger_cancel` makes the
 * worker send at once. Each job asked to stop has its signal aborted with a
 * JobCancelledError (who, why) and a timer: a handler that has not returned
 * when the stop grace runs out is given up on, failed as killed. Repeats of
 * a request already acted on change nothing.
 */
export class StopRequests {
  private readonly killTimers = new Map<number, NodeJS.Timeout>();

  constructor(
    private readonly graceMs: number,
    private readonly log: Logger,
  ) {}

  /** Acts on the requests for jobs in `running`; the others (finished, or not this worker's) are ignored. */
  apply(requests: readonly StopRequest[], running: ReadonlyMap<number, { readonly job: ClaimedJob; readonly attempt: Attempt }>): void {
    for (const request of requests) {
      const entry = running.get(request.jobId);
      if (entry === undefined || entry.attempt.stopReason !== undefined || entry.attempt.isAborted) continue;
      const reason = new JobCancelledError(request, this.graceMs);
      this.log.info("stopping a running job as asked; aborting its signal", {
        job: entry.job.jobName,
        jobId: request.jobId,
        requestedBy: request.requestedBy,
        reason: request.reason,
        killAt: new Date(Date.now() + this.graceMs).toISOString(),
      });
      entry.attempt.stop(reason);
      const timer = setTimeout(() => {
        this.killTimers.delete(request.jobId);
        this.log.warn("a job asked to stop ignored its signal for the stop grace; failing it as killed", { job: entry.job.jobName, jobId: request.jobId, graceMs: this.graceMs });
        entry.attempt.abort(new JobKilledError(reason));
      }, this.graceMs);
      this.killTimers.set(request.jobId, timer);
    }
  }

  /** The job ended (whichever way): its kill timer goes. */
  ended(jobId: number): void {
    clearTimeout(this.killTimers.get(jobId));
    this.killTimers.delete(jobId);
  }

  clear(): void {
    for (const timer of this.killTimers.values()) clearTimeout(timer);
    this.killTimers.clear();
  }
}

/**
 * How an attempt asked to stop ends, once its run settled: `cancelled` when
 * the handler returned or threw in its own time, failed as killed (never
 * retried) when the worker gave up on it (the stop grace, or its timeout,
 * ran out); null for an attempt nobody asked to stop.
 */
export function stoppedCompletion(job: ClaimedJob, attempt: Attempt): Completion | null {
  if (attempt.stopReason === undefined) return null;
  if (!attempt.isAborted) return { kind: "cancelled", id: job.id, attempt: job.attempts, error: redactError(attempt.stopReason) };
  const killed = attempt.abortReason instanceof JobKilledError ? attempt.abortReason : new JobKilledError(attempt.stopReason as JobCancelledError);
  return { kind: "failed", id: job.id, attempt: job.attempts, error: redactError(killed) };
}

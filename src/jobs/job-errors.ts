import { CronledgerError } from "../errors.js";

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

/** A stored payload that no longer matches the job's schema: terminal, because no retry can fix it. */
export class InvalidStoredJobError extends CronledgerError {
  readonly jobName: string;
  readonly issues: readonly string[];

  constructor(jobName: string, jobId: number, issues: readonly string[]) {
    super(
      "invalid_stored_input",
      `Payload of job "${jobName}" (id ${jobId}) does not match its schema: ${issues.join("; ")}. ` +
        "The job failed without retrying; fix the schema or re-enqueue it with a valid payload.",
    );
    this.jobName = jobName;
    this.issues = issues;
  }
}

/** Aborts a handler when its worker shuts down past the grace period; the job goes back to the queue. */
export class WorkerShutdownError extends CronledgerError {
  constructor(workerId: string) {
    super("worker_shutdown", `Worker ${workerId} is shutting down: the job was interrupted and returned to the queue.`);
  }
}

/** Aborts a handler whose job the reaper took back (its heartbeat went stale); another worker may run it. */
export class LeaseLostError extends CronledgerError {
  constructor(jobId: number) {
    super("lease_lost", `Job ${jobId} was reaped while this worker ran it (stale heartbeat); it will run again elsewhere.`);
  }
}

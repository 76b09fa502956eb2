import type { LateCompletion } from "../db/sql/completions.js";
import type { ClaimedJob } from "../db/sql/jobs.js";
import type { Logger } from "../log.js";
import type { AttemptStatus } from "../events.js";
import type { Completion } from "./completion.js";
import type { JobDefinition } from "./define-job.js";
import type { WorkerDependencies } from "./worker-deps.js";

/**
 * What the worker tells about a job's end: the `jobFinished` event and the
 * log line of each finished attempt (a retry with its next run, a terminal
 * failure, a stop), and the results the claim's fence turned away (written
 * late, or kept as superseded attempts). The worker's loop decides; this is
 * where its words are.
 */

/** Where a worker's reports go. */
export interface AttemptReporter {
  readonly events: WorkerDependencies["events"];
  readonly log: Logger;
}

/** A finished attempt's fields in the worker's log lines (made only for the lines that need them). */
export function attemptFields(job: ClaimedJob): { job: string; jobId: number; attempt: number; maxAttempts: number } {
  return { job: job.jobName, jobId: job.id, attempt: job.attempts, maxAttempts: job.maxAttempts };
}

/** The event and log line of an attempt that ended with `status`; `now` reads the worker's clock, for a retry's next run. */
export function reportAttemptEnd(
  reporter: AttemptReporter,
  job: ClaimedJob,
  definition: JobDefinition | undefined,
  completion: Completion,
  status: AttemptStatus,
  durationSeconds: number,
  now: () => Date,
): void {
  const base = { jobId: job.id, jobName: job.jobName, attempt: job.attempts, status, durationSeconds };
  if (completion.kind === "retry") {
    const nextRunAt = new Date(now().getTime() + completion.delayMs);
    reporter.events.jobFinished({ ...base, error: completion.error, nextRunAt });
    reporter.log.warn("job attempt failed; retrying", { ...attemptFields(job), nextRunAt: nextRunAt.toISOString(), error: completion.error });
  } else if (completion.kind === "failed") {
    reporter.events.jobFinished({ ...base, error: completion.error });
    reporter.log.error("job failed terminally", { ...attemptFields(job), registered: definition !== undefined, error: completion.error });
  } else if (completion.kind === "cancelled") {
    reporter.events.jobFinished(base);
    reporter.log.info("job stopped as asked: cancelled", attemptFields(job));
  } else {
    reporter.events.jobFinished(base);
  }
}

/** Results the claim's fence turned away: logged, and an event for the metrics (src/db/sql/completions.ts, settleLateCompletions). */
export function reportLateResults(reporter: AttemptReporter, results: readonly LateCompletion[]): void {
  for (const result of results) {
    if (result.fate === "written") continue;
    const fields = { jobId: result.id, job: result.jobName, attempt: result.attempt, jobAttempts: result.jobAttempts, jobStatus: result.jobStatus };
    if (result.fate === "amended") {
      reporter.log.info("a job ended while the database was out of reach for longer than the lease; its result now replaces the reaper's verdict", fields);
    } else {
      reporter.log.warn(
        "a job's result arrived after its lease had lapsed and another attempt had claimed it (or it had ended otherwise): the job ran twice; this attempt's result is kept in cronledger.superseded_attempts",
        fields,
      );
    }
    reporter.events.lateCompletion({
      jobId: result.id,
      jobName: result.jobName ?? "?",
      attempt: result.attempt,
      fate: result.fate,
      jobAttempts: result.jobAttempts,
      jobStatus: result.jobStatus,
    });
  }
}

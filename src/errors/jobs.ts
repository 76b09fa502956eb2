import { CronledgerError } from "./codes.js";

/** Errors of jobs and their payloads: unregistered names, payloads that fail their schema, a chore's failure, a handler's terminal failure. */

/**
 * A chore (reap, prune) failed: its database error in one line, never the
 * statement drizzle wraps around it (a chore's statements are cronledger's
 * own, and their text and parameters belong in no log line or failure
 * ticket). The next slot of the chore tries again.
 */
export class ChoreFailedError extends CronledgerError {
  constructor(chore: string, cause: string) {
    super("chore_failed", `ChoreFailedError: the ${chore} chore failed: ${cause}. Its next slot tries again; see docs/operations.md ("Scheduler stuck") if it keeps failing.`);
    this.name = "ChoreFailedError";
  }
}

/**
 * A stored job that can never run: no worker has its name. Workers claim
 * only the names they have registered, so a job a rolling deploy's new code
 * enqueued waits for a worker that knows it; the prune chore fails it with
 * this error only once it has been ready, unclaimable, for longer than
 * `chores.failUnregisteredAfter` (src/db/sql/workers.ts).
 */
export class JobNotRegisteredError extends CronledgerError {
  /** PostgreSQL `format()` template of what the prune chore stores: job name, queue, how long it waited. */
  static readonly UNCLAIMED_FORMAT =
    'JobNotRegisteredError [job_not_registered]: no running worker that serves queue "%2$s" has registered job "%1$s" for %3$s; ' +
    "failed as a job that can never run. Deploy a worker that has it (createCronledger({ jobs })) and retry this ticket.";

  readonly jobName: string;

  /** `didYouMean`: the registered name closest to a misspelt one. */
  constructor(jobName: string, didYouMean?: string) {
    super(
      "job_not_registered",
      `JobNotRegisteredError: job "${jobName}" is not registered in this worker${didYouMean === undefined ? "" : ` (did you mean "${didYouMean}"?)`}; pass its defineJob() result in createCronledger({ jobs }) or deploy a worker that has it.`,
    );
    this.jobName = jobName;
  }
}

/** A payload that fails its job's schema (zod, valibot, any Standard Schema); nothing was written. */
export class PayloadValidationError extends CronledgerError {
  readonly jobName: string;
  readonly issues: readonly string[];

  constructor(jobName: string, issues: readonly string[], context?: string) {
    super(
      "invalid_payload",
      `Payload for job "${jobName}"${context ? ` (${context})` : ""} does not match its schema: ${issues.join("; ")}. Fix the payload or the job's schema; nothing was written.`,
    );
    this.jobName = jobName;
    this.issues = issues;
  }
}

/** A payload whose stored JSON is over `maxPayloadBytes`; nothing was written. */
export class PayloadTooLargeError extends CronledgerError {
  readonly jobName: string;
  readonly bytes: number;
  readonly maxBytes: number;

  constructor(jobName: string, bytes: number, maxBytes: number, message: string) {
    super("payload_too_large", message);
    this.jobName = jobName;
    this.bytes = bytes;
    this.maxBytes = maxBytes;
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

/** Thrown by a handler to fail the job terminally, without retries. */
export class NonRetryableError extends CronledgerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("non_retryable", message, options);
  }
}

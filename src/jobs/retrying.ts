import type { Executor } from "../db/executor.js";
import { retryingJobs } from "../db/sql/operators.js";
import { redact } from "../redact.js";
import { describeRetryOverride, readStoredRetryPolicy } from "./retry-override.js";

/** A job waiting for its next attempt after a failed one: what an operator may cancel. Never its payload. */
export interface RetryingJob {
  readonly id: number;
  readonly jobType: string;
  readonly queue: string;
  /** Attempts used so far, out of its budget. */
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly nextAttemptAt: Date;
  readonly scheduledFor: Date | null;
  /** The error of its last attempt, redacted. */
  readonly lastError: string | null;
  /** The retry policy given at enqueue instead of the job's; null: the job's own. */
  readonly retryOverride: string | null;
}

/** Jobs waiting for a retry, soonest first. */
export async function listRetrying(executor: Executor, limit: number): Promise<RetryingJob[]> {
  return (await retryingJobs(executor, limit)).map((row) => ({
    id: row.id,
    jobType: row.job_name,
    queue: row.queue,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    nextAttemptAt: new Date(row.run_at_ms),
    scheduledFor: row.scheduled_for_ms === null ? null : new Date(row.scheduled_for_ms),
    lastError: row.last_error === null ? null : redact(row.last_error),
    retryOverride: describeRetryOverride(readStoredRetryPolicy(row.retry_policy)),
  }));
}

import type { Executor } from "../db/executor.js";
import { cancelQueuedJob } from "../db/sql/operators.js";
import { JobNotCancellableError, JobNotFoundError } from "../errors.js";

export interface CancelledJob {
  readonly id: number;
  readonly jobName: string;
  /** What the job was doing: waiting for its first run, waiting for a retry, or already cancelled. */
  readonly was: "queued" | "retrying" | "cancelled";
  /** The attempts it had used, out of its budget. */
  readonly attempts: number;
  readonly maxAttempts: number;
  /** False when it was already cancelled (a second click): nothing changed. */
  readonly cancelled: boolean;
}

/**
 * Cancels a job that waits to run, for its first attempt or a retry: it ends
 * `cancelled` and is never claimed. Cancelling a cancelled job changes
 * nothing and says so; a running or finished job cannot be cancelled.
 */
export async function cancelJob(executor: Executor, id: number): Promise<CancelledJob> {
  const row = await cancelQueuedJob(executor, id);
  if (row === undefined) throw new JobNotFoundError(id);
  const base = { id, jobName: row.job_name, attempts: row.attempts, maxAttempts: row.max_attempts };
  if (row.cancelled) return { ...base, was: row.attempts > 0 ? "retrying" : "queued", cancelled: true };
  if (row.status === "cancelled") return { ...base, was: "cancelled", cancelled: false };
  throw new JobNotCancellableError(id, row.status);
}

import type { Executor } from "../db/executor.js";
import { jobsByIdempotencyKey } from "../db/sql/jobs.js";
import { copyFailedJob, jobSummary } from "../db/sql/operators.js";
import { JobNotFailedError, JobNotFoundError } from "../errors.js";
import { boundKey } from "../keys.js";
import type { JobDefinition } from "../jobs/define-job.js";

export interface RetriedJob {
  /** The new job. */
  readonly id: number;
  readonly jobName: string;
  /** The failed job it retries. */
  readonly retryOf: number;
  readonly idempotencyKey: string;
  /** False when this failure was already retried: `id` is that earlier retry, whatever its status. */
  readonly created: boolean;
}

const RETRY_SUFFIX = /#retry-(\d{1,9})$/;

/**
 * The retry's idempotency key: `<key>#retry-<n>`, n counting generations
 * (retrying `k#retry-1` gives `k#retry-2`). Being deterministic, a second
 * retry of the same ticket (a double click, two operators) returns the
 * first retry instead of running the job twice.
 */
export function retryIdempotencyKey(jobId: number, oldKey: string | null): string {
  const key = oldKey ?? `job-${jobId}`;
  const generation = RETRY_SUFFIX.exec(key);
  const base = generation ? key.slice(0, generation.index) : key;
  return boundKey(`${base}#retry-${Number(generation?.[1] ?? 0) + 1}`);
}

/**
 * Re-enqueues a failed job as a new queued job with the same job name,
 * queue, payload, priority and slot. The payload is copied inside the
 * database and never passes through this process. The new job gets a full
 * attempt budget: the registered job's current policy when this process
 * has it, else the failed row's.
 */
export async function retryFailedJob(executor: Executor, jobs: ReadonlyMap<string, JobDefinition>, jobId: number): Promise<RetriedJob> {
  const source = await jobSummary(executor, jobId);
  if (!source) throw new JobNotFoundError(jobId);
  if (source.status !== "failed") throw new JobNotFailedError(jobId, source.status);
  const idempotencyKey = retryIdempotencyKey(jobId, source.idempotency_key);
  const maxAttempts = jobs.get(source.job_name)?.retry.maxAttempts ?? null;
  const id = await copyFailedJob(executor, jobId, idempotencyKey, maxAttempts);
  if (id !== undefined) return { id, jobName: source.job_name, retryOf: jobId, idempotencyKey, created: true };
  const [existing] = await jobsByIdempotencyKey(executor, [source.job_name], [idempotencyKey]);
  if (!existing) {
    // The row stopped being failed between the two statements (deleted by retention, or changed by hand).
    throw new JobNotFoundError(jobId);
  }
  return { id: existing.id, jobName: source.job_name, retryOf: jobId, idempotencyKey, created: false };
}

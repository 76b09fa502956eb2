import { sql } from "drizzle-orm";
import { query, type Database } from "../db/connection.js";
import { CronledgerError } from "../errors.js";
import type { JobDefinition } from "../jobs/define-job.js";
import { notifyQueues } from "../jobs/insert-jobs.js";
import { boundKey } from "../schedule/identity.js";

export class JobNotFoundError extends CronledgerError {
  readonly jobId: number;

  constructor(jobId: number) {
    super("job_not_found", `Job ${jobId} does not exist (retention may have deleted it).`);
    this.jobId = jobId;
  }
}

/** Only terminal failures can be retried: anything else is still running, done, or cancelled on purpose. */
export class JobNotFailedError extends CronledgerError {
  readonly jobId: number;
  readonly status: string;

  constructor(jobId: number, status: string) {
    super("job_not_failed", `Job ${jobId} is ${status}, not failed; only failed jobs can be retried.`);
    this.jobId = jobId;
    this.status = status;
  }
}

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
export async function retryFailedJob(database: Database, jobs: ReadonlyMap<string, JobDefinition>, jobId: number): Promise<RetriedJob> {
  const [source] = await query<{ job_name: string; status: string; idempotency_key: string | null }>(
    database.db,
    sql`select job_name, status, idempotency_key from cronledger.jobs where id = ${jobId}`,
  );
  if (!source) throw new JobNotFoundError(jobId);
  if (source.status !== "failed") throw new JobNotFailedError(jobId, source.status);
  const idempotencyKey = retryIdempotencyKey(jobId, source.idempotency_key);
  const maxAttempts = jobs.get(source.job_name)?.retry.maxAttempts ?? null;
  const [inserted] = await query<{ id: number }>(
    database.db,
    sql`with inserted as (
          insert into cronledger.jobs
            (job_name, queue, payload, priority, run_at, max_attempts, idempotency_key, schedule_key, scheduled_for)
          select job_name, queue, payload, priority, now(), coalesce(${maxAttempts}::int, max_attempts), ${idempotencyKey},
                 schedule_key, scheduled_for
          from cronledger.jobs where id = ${jobId} and status = 'failed'
          on conflict (job_name, idempotency_key) where idempotency_key is not null do nothing
          returning id, queue
        ), notified as (${notifyQueues(sql`inserted`)})
        select inserted.id::float8 as id from inserted cross join notified`,
  );
  if (inserted) return { id: inserted.id, jobName: source.job_name, retryOf: jobId, idempotencyKey, created: true };
  const [existing] = await query<{ id: number }>(
    database.db,
    sql`select id::float8 as id from cronledger.jobs where job_name = ${source.job_name} and idempotency_key = ${idempotencyKey}`,
  );
  if (!existing) {
    // The row stopped being failed between the two statements (deleted by retention, or changed by hand).
    throw new JobNotFoundError(jobId);
  }
  return { id: existing.id, jobName: source.job_name, retryOf: jobId, idempotencyKey, created: false };
}

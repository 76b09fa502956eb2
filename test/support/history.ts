import { sql } from "drizzle-orm";
import { query, type Executor } from "../../src/db/executor.js";
import { archiveCtes } from "../../src/db/sql/history.js";

/** A finished job as a test writes it by hand: what the history, its counts and the entry's last run hold. */
export interface FinishedJob {
  readonly jobName: string;
  readonly status: "succeeded" | "failed" | "cancelled" | "skipped";
  /** Default: the database clock. */
  readonly finishedAt?: Date;
  readonly createdAt?: Date;
  readonly startedAt?: Date | null;
  readonly queue?: string;
  readonly outcome?: string | null;
  readonly attempts?: number;
  readonly maxAttempts?: number;
  readonly lastError?: string | null;
  readonly idempotencyKey?: string | null;
  readonly scheduleKey?: string | null;
  readonly scheduledFor?: Date | null;
  readonly payload?: unknown;
}

const iso = (instant: Date | null | undefined) => (instant === undefined || instant === null ? null : instant.toISOString());

/**
 * Writes finished jobs the way cronledger's own statements do (archiveCtes:
 * the history, job_counts, schedule_last_runs, and the key in job_keys), for
 * tests that need a job that finished long ago or was written by an older
 * version or by hand. Returns their ids, in order.
 */
export async function insertFinishedJobs(executor: Executor, jobs: readonly FinishedJob[]): Promise<number[]> {
  const rows = sql.join(
    jobs.map(
      (job, index) => sql`(${index}::int, ${job.jobName}::text, ${job.queue ?? "default"}::text, ${JSON.stringify(job.payload ?? {})}::jsonb, 0::int,
        ${job.maxAttempts ?? 1}::int, ${job.idempotencyKey ?? null}::text, ${job.scheduleKey ?? null}::text, ${iso(job.scheduledFor)}::timestamptz,
        null::jsonb, coalesce(${iso(job.createdAt)}::timestamptz, now()), ${job.status}::text, ${job.outcome ?? null}::text,
        coalesce(${iso(job.createdAt)}::timestamptz, now()), ${job.attempts ?? 1}::int, null::text, ${job.lastError ?? null}::text,
        ${job.startedAt === null ? null : (iso(job.startedAt) ?? iso(job.finishedAt))}::timestamptz, coalesce(${iso(job.finishedAt)}::timestamptz, now()))`,
    ),
    sql`, `,
  );
  const inserted = await query<{ id: number }>(
    executor,
    sql`with given (n, job_name, queue, payload, priority, max_attempts, idempotency_key, schedule_key, scheduled_for, retry_policy, created_at,
                    status, outcome, run_at, attempts, locked_by, last_error, started_at, finished_at) as (values ${rows}),
        moved as materialized (
          select nextval('cronledger.job_queue_id_seq') as id, job_name, queue, payload, priority, max_attempts, idempotency_key, schedule_key,
            scheduled_for, retry_policy, created_at, status, outcome, run_at, attempts, locked_by, last_error, started_at, finished_at,
            null::jsonb as trace_context
          from (select * from given order by n) as g (n, job_name, queue, payload, priority, max_attempts, idempotency_key, schedule_key, scheduled_for,
            retry_policy, created_at, status, outcome, run_at, attempts, locked_by, last_error, started_at, finished_at)
        ), ${archiveCtes()}, keyed as (
          insert into cronledger.job_keys (job_name, idempotency_key, job_id) select job_name, idempotency_key, id from moved where idempotency_key is not null
        )
        select id::float8 as id from moved order by id`,
  );
  return inserted.map((row) => row.id);
}

/** Deletes finished jobs by hand, with their counts and keys, as if they had never been: the cleanup of insertFinishedJobs. */
export async function deleteFinishedJobs(executor: Executor, ids: readonly number[]): Promise<void> {
  await query(
    executor,
    sql`with gone as (
          delete from cronledger.job_history where id = any(${`{${ids.join(",")}}`}::bigint[]) returning job_name, idempotency_key, queue, status, finished_at
        ), uncounted as (
          update cronledger.job_counts c set n = c.n - g.n
          from (select (finished_at at time zone 'UTC')::date as day, queue, status, count(*) as n from gone group by 1, 2, 3) g
          where c.day = g.day and c.queue = g.queue and c.status = g.status and c.shard = (
            select min(shard) from cronledger.job_counts d where d.day = g.day and d.queue = g.queue and d.status = g.status and d.n >= g.n)
        )
        delete from cronledger.job_keys k using gone where k.job_name = gone.job_name and k.idempotency_key = gone.idempotency_key`,
  );
}

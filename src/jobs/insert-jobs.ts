import { sql, type SQL } from "drizzle-orm";

/** Workers LISTEN on this channel; the payload is the queue that gained ready jobs. */
export const JOBS_CHANNEL = "cronledger_jobs";

/**
 * A select that notifies each distinct queue among `rows` (a CTE, optionally
 * filtered, with a `queue` column) once; the notifications go out on commit.
 * Wherever jobs become ready, their queues are woken through this.
 */
export function notifyQueues(rows: SQL): SQL {
  return sql`select count(pg_notify(${JOBS_CHANNEL}, queue)) as n from (select distinct queue from ${rows}) as queues`;
}

export interface NewJobRow {
  readonly jobName: string;
  readonly queue: string;
  readonly payloadJson: string;
  readonly priority: number;
  /** ISO instant; null means the database clock plus `delayMs`. */
  readonly runAt: string | null;
  /** With no `runAt`: how long after the database's now the job becomes ready. */
  readonly delayMs: number;
  readonly maxAttempts: number;
  readonly idempotencyKey: string | null;
  readonly scheduleKey: string | null;
  readonly scheduledFor: string | null;
}

export interface InsertedJob {
  id: number;
  job_name: string;
  idempotency_key: string | null;
  schedule_key: string | null;
}

/**
 * The `inserted` and `notified` CTEs that insert the rows `select` yields
 * (job_name, queue, payload, priority, run_at, max_attempts,
 * idempotency_key, schedule_key, scheduled_for, in that order): rows whose
 * (job_name, idempotency_key) exists are skipped, and each queue that
 * gained rows is notified once, on commit.
 */
export function jobInsertCtes(select: SQL): SQL {
  return sql`
    inserted as (
      insert into cronledger.jobs
        (job_name, queue, payload, priority, run_at, max_attempts, idempotency_key, schedule_key, scheduled_for)
      ${select}
      on conflict (job_name, idempotency_key) where idempotency_key is not null do nothing
      returning id, job_name, idempotency_key, schedule_key, queue
    ), notified as (${notifyQueues(sql`inserted`)})`;
}

/** jobInsertCtes for rows built here: columns travel as parallel arrays through unnest, a constant 10 parameters whatever the batch size. */
export function insertedJobsCtes(rows: readonly NewJobRow[]): SQL {
  const column = <K extends keyof NewJobRow>(key: K) => sql.param(rows.map((row) => row[key]));
  return jobInsertCtes(sql`
    select n, q, p::jsonb, pr, coalesce(ra::timestamptz, now() + dm * interval '1 millisecond'), ma, ik, sk, sf::timestamptz
    from unnest(
      ${column("jobName")}::text[], ${column("queue")}::text[], ${column("payloadJson")}::text[],
      ${column("priority")}::int[], ${column("runAt")}::text[], ${column("delayMs")}::float8[], ${column("maxAttempts")}::int[],
      ${column("idempotencyKey")}::text[], ${column("scheduleKey")}::text[], ${column("scheduledFor")}::text[]
    ) as t(n, q, p, pr, ra, dm, ma, ik, sk, sf)`);
}

/** One INSERT for any number of jobs (see insertedJobsCtes). */
export function insertJobsStatement(rows: readonly NewJobRow[]): SQL {
  return sql`
    with ${insertedJobsCtes(rows)}
    select inserted.id::float8 as id, inserted.job_name, inserted.idempotency_key, inserted.schedule_key
    from inserted cross join notified`;
}

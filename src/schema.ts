import { sql } from "drizzle-orm";
import { bigint, check, index, integer, jsonb, pgSchema, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";

/**
 * cronledger's tables. Applications that run drizzle-kit themselves import
 * them from `cronledger/schema`; everything lives in the `cronledger` schema
 * so it never collides with application tables.
 */
export const cronledgerSchema = pgSchema("cronledger");

export const JOB_STATUSES = ["queued", "running", "succeeded", "failed", "cancelled"] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

const timestamptz = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

/** The ledger: one row per schedule entry identity, recording the last slot handled. */
export const scheduleState = cronledgerSchema.table(
  "schedule_state",
  {
    key: text("key").primaryKey(),
    namespace: text("namespace").notNull().default("default"),
    jobName: text("job_name").notNull(),
    lastEnqueuedSlot: timestamptz("last_enqueued_slot").notNull(),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
    updatedAt: timestamptz("updated_at").notNull().defaultNow(),
  },
  (t) => [index("schedule_state_namespace_idx").on(t.namespace)],
);

/** Every job, scheduled or enqueued directly. Terminal `failed` rows are the failure tickets. */
export const jobs = cronledgerSchema.table(
  "jobs",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    jobName: text("job_name").notNull(),
    queue: text("queue").notNull().default("default"),
    payload: jsonb("payload").notNull().default(sql`'{}'::jsonb`),
    status: text("status", { enum: JOB_STATUSES }).notNull().default("queued"),
    outcome: text("outcome"),
    priority: integer("priority").notNull().default(0),
    runAt: timestamptz("run_at").notNull().defaultNow(),
    attempts: integer("attempts").notNull().default(0),
    maxAttempts: integer("max_attempts").notNull().default(1),
    idempotencyKey: text("idempotency_key"),
    scheduleKey: text("schedule_key"),
    scheduledFor: timestamptz("scheduled_for"),
    lockedBy: text("locked_by"),
    heartbeatAt: timestamptz("heartbeat_at"),
    lastError: text("last_error"),
    /**
     * The retry policy given to this job at enqueue (`enqueue(job, payload, { retry })`), when it
     * overrides the job's own: a class name or a backoff policy, as JSON. Null: the job's policy.
     */
    retryPolicy: jsonb("retry_policy"),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
    startedAt: timestamptz("started_at"),
    finishedAt: timestamptz("finished_at"),
  },
  (t) => [
    check("jobs_status_check", sql`${t.status} in ('queued', 'running', 'succeeded', 'failed', 'cancelled')`),
    uniqueIndex("jobs_job_name_idempotency_key_idx")
      .on(t.jobName, t.idempotencyKey)
      .where(sql`${t.idempotencyKey} is not null`),
    // Serves the worker claim: ready rows of a queue in priority then run_at order.
    index("jobs_ready_idx").on(t.queue, t.priority, t.runAt, t.id).where(sql`${t.status} = 'queued'`),
    // Serves the reaper's scan for stale heartbeats.
    index("jobs_running_heartbeat_idx").on(t.heartbeatAt).where(sql`${t.status} = 'running'`),
    // Serves retention and the failures page.
    index("jobs_finished_idx").on(t.status, t.finishedAt).where(sql`${t.finishedAt} is not null`),
    index("jobs_failed_job_name_idx").on(t.jobName, t.finishedAt).where(sql`${t.status} = 'failed'`),
    // Serves the list of jobs waiting for a retry (the Schedule page's Cancel buttons): few rows, so a cheap index.
    index("jobs_retrying_idx").on(t.runAt, t.id).where(sql`${t.status} = 'queued' and ${t.attempts} > 0`),
    // Serves an entry's recent runs (the status and the Schedule page): newest slot first, per schedule key.
    index("jobs_schedule_runs_idx").on(t.scheduleKey, t.scheduledFor, t.id).where(sql`${t.scheduleKey} is not null`),
  ],
);

export type JobRow = typeof jobs.$inferSelect;
export type ScheduleStateRow = typeof scheduleState.$inferSelect;

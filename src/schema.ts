import { sql } from "drizzle-orm";
import { bigint, check, index, integer, jsonb, pgSchema, primaryKey, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";

/**
 * cronledger's tables. Applications that run drizzle-kit themselves import
 * them from `cronledger/schema`; everything lives in the `cronledger` schema
 * so it never collides with application tables.
 */
export const cronledgerSchema = pgSchema("cronledger");

export const JOB_STATUSES = ["queued", "running", "succeeded", "failed", "cancelled"] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

const timestamptz = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

/**
 * The ledger: one row per schedule entry identity, recording the last slot
 * handled. `updated_at` is when a pass last wrote the row (created, claimed,
 * repaired or quarantined it): the prune chore's grace counts from it (see
 * docs/decisions.md). An entry whose statement fails is quarantined here, so
 * every replica defers it to the same instant and every admin shows it.
 */
export const scheduleState = cronledgerSchema.table(
  "schedule_state",
  {
    key: text("key").primaryKey(),
    namespace: text("namespace").notNull().default("default"),
    jobName: text("job_name").notNull(),
    lastEnqueuedSlot: timestamptz("last_enqueued_slot").notNull(),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
    updatedAt: timestamptz("updated_at").notNull().defaultNow(),
    /** No pass claims the entry before this instant; null when it is not quarantined. */
    quarantinedUntil: timestamptz("quarantined_until"),
    /** The last failure, redacted and bounded (src/redact.ts). */
    quarantineReason: text("quarantine_reason"),
    /** Failed attempts since the entry last fired; 0 when it is not quarantined. */
    quarantineCount: integer("quarantine_count").notNull().default(0),
    /** When the current run of failures began. */
    quarantinedSince: timestamptz("quarantined_since"),
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

/**
 * The workers that are running, one row per worker: what they can run (job
 * names, queues) and when they last heartbeated. A worker claims only its
 * job names, so a job no live worker knows waits, and the status shows it
 * as waiting for a worker that knows it. Written at start and with every
 * heartbeat; deleted at a graceful stop, and by the prune chore an hour
 * after its last heartbeat.
 */
export const workers = cronledgerSchema.table("workers", {
  id: text("id").primaryKey(),
  namespace: text("namespace").notNull().default("default"),
  jobNames: text("job_names").array().notNull(),
  queues: text("queues").array().notNull(),
  /** The worker's lease: it is live while its heartbeat is younger than this. */
  leaseMs: integer("lease_ms").notNull(),
  startedAt: timestamptz("started_at").notNull().defaultNow(),
  heartbeatAt: timestamptz("heartbeat_at").notNull().defaultNow(),
});

/**
 * The schedules that running processes report, one row per distinct set of
 * ledger keys (a version of the app's schedule), refreshed while a process
 * that has it runs. The prune chore keeps every ledger row a version
 * reported within the grace, so a rolling deploy's two schedules never prune
 * each other's rows.
 */
export const scheduleVersions = cronledgerSchema.table(
  "schedule_versions",
  {
    namespace: text("namespace").notNull(),
    /** sha256 of the sorted ledger keys. */
    digest: text("digest").notNull(),
    ledgerKeys: text("ledger_keys").array().notNull(),
    firstReportedAt: timestamptz("first_reported_at").notNull().defaultNow(),
    reportedAt: timestamptz("reported_at").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.namespace, t.digest] })],
);

export type JobRow = typeof jobs.$inferSelect;
export type ScheduleStateRow = typeof scheduleState.$inferSelect;

import { sql } from "drizzle-orm";
import { bigint, check, customType, date, doublePrecision, index, integer, jsonb, pgSchema, primaryKey, text, timestamp } from "drizzle-orm/pg-core";

/**
 * cronledger's tables. Applications that run drizzle-kit themselves import
 * them from `cronledger/schema`; everything lives in the `cronledger` schema
 * so it never collides with application tables. Longer than most: every
 * table, its indexes and why each exists, in one place.
 */
export const cronledgerSchema = pgSchema("cronledger");

/**
 * A job's statuses. `held` is a job an entry's overlap policy (`buffer_one`,
 * `cancel_other`) made while an earlier job of the entry runs: no worker
 * claims it; it becomes `queued` when the entry has no job running or waiting
 * left (src/db/sql/history.ts, releaseHeldCtes).
 */
export const JOB_STATUSES = ["queued", "held", "running", "succeeded", "failed", "cancelled"] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/**
 * What a schedule entry's slot does while a job of the entry is still
 * queued or running (Temporal's overlap policies by name): `allow_all`
 * enqueues it anyway, `skip` records it as skipped, `buffer_one` keeps one
 * waiting, `cancel_other` replaces the waiting one and stops the running
 * one. Decided by the pass's statement (src/db/sql/slot-policy.ts).
 */
export const OVERLAP_POLICIES = ["allow_all", "skip", "buffer_one", "cancel_other"] as const;
export type OverlapPolicy = (typeof OVERLAP_POLICIES)[number];

/** What an upsert of a dynamic schedule entry did to it (src/db/sql/dynamic.ts). */
export const UPSERT_OUTCOMES = ["created", "updated", "retimed", "unchanged"] as const;
export type UpsertOutcome = (typeof UPSERT_OUTCOMES)[number];

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
    /** When an operator paused the entry; null when it runs. A paused entry's slots are recorded as skipped. */
    pausedAt: timestamptz("paused_at"),
    /** Who paused it, as the operator's surface reported it (admin identity, CLI user). */
    pausedBy: text("paused_by"),
    /** The operator's note, bounded and redacted like every reason. */
    pausedNote: text("paused_note"),
  },
  (t) => [
    index("schedule_state_namespace_idx").on(t.namespace),
    // The counts of paused and quarantined entries by namespace, read by the status without reading every row of a namespace of dynamic entries.
    index("schedule_state_paused_idx").on(t.namespace).where(sql`${t.pausedAt} is not null`),
    index("schedule_state_quarantined_idx").on(t.namespace).where(sql`${t.quarantinedUntil} is not null`),
  ],
);

/** The statuses of a job waiting to run, held back by its entry's overlap policy, or running: the rows of `job_queue`. */
export const LIVE_JOB_STATUSES = ["queued", "held", "running"] as const;
/**
 * The statuses of a finished job: the rows of `job_history`. `skipped` is
 * reserved for a slot an entry's policy skips (recorded as a finished run of
 * its entry, never run).
 */
export const FINISHED_JOB_STATUSES = ["succeeded", "failed", "cancelled", "skipped"] as const;

/** A job's columns that stay the same from its enqueue to its end. */
const jobColumns = () => ({
  jobName: text("job_name").notNull(),
  queue: text("queue").notNull().default("default"),
  payload: jsonb("payload").notNull().default(sql`'{}'::jsonb`),
  priority: integer("priority").notNull().default(0),
  maxAttempts: integer("max_attempts").notNull().default(1),
  idempotencyKey: text("idempotency_key"),
  scheduleKey: text("schedule_key"),
  scheduledFor: timestamptz("scheduled_for"),
  /**
   * The retry policy given to this job at enqueue (`enqueue(job, payload, { retry })`), when it
   * overrides the job's own: a class name or a backoff policy, as JSON. Null: the job's policy.
   */
  retryPolicy: jsonb("retry_policy"),
  /**
   * The trace context of the span that enqueued the job, as the OpenTelemetry propagator wrote it
   * (W3C `traceparent`, `tracestate`), when the enqueuing process traces (`tracing` option; src/open-telemetry.ts).
   * Each attempt's span links to it (or is its child). Null when nothing traced the enqueue.
   */
  traceContext: jsonb("trace_context"),
  createdAt: timestamptz("created_at").notNull().defaultNow(),
});

/**
 * The queue: jobs waiting to run (`queued`, for their first attempt or a
 * retry), jobs held back by their entry's overlap policy until its running
 * job ends (`held`), and running ones, and nothing else. Enqueue, claim, heartbeat and
 * completion touch only this table and its indexes, which are the ones the
 * claim, the reaper, the retries list and an entry's live runs read. A job
 * leaves it when it finishes: its row moves to `job_history` in the statement
 * that finishes it.
 */
export const jobQueue = cronledgerSchema.table(
  "job_queue",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    ...jobColumns(),
    status: text("status", { enum: LIVE_JOB_STATUSES }).notNull().default("queued"),
    runAt: timestamptz("run_at").notNull().defaultNow(),
    attempts: integer("attempts").notNull().default(0),
    lockedBy: text("locked_by"),
    heartbeatAt: timestamptz("heartbeat_at"),
    /** The error of the last failed attempt, for a job waiting for its retry. */
    lastError: text("last_error"),
    startedAt: timestamptz("started_at"),
    /** When an operator (or an entry's overlap policy) asked this running job to stop; null otherwise. */
    cancelRequestedAt: timestamptz("cancel_requested_at"),
    /** Who asked, and why: the handler reads both from its aborted `ctx.signal`. */
    cancelRequestedBy: text("cancel_requested_by"),
    cancelReason: text("cancel_reason"),
  },
  (t) => [
    check("job_queue_status_check", sql`${t.status} in ('queued', 'held', 'running')`),
    // Serves the worker claim: ready rows of a queue in priority then run_at order.
    index("job_queue_ready_idx").on(t.queue, t.priority, t.runAt, t.id).where(sql`${t.status} = 'queued'`),
    // Serves the reaper's scan for stale heartbeats.
    index("job_queue_running_heartbeat_idx").on(t.heartbeatAt).where(sql`${t.status} = 'running'`),
    // Serves the list of jobs waiting for a retry (the Schedule page's Cancel buttons): few rows, so a cheap index.
    index("job_queue_retrying_idx").on(t.runAt, t.id).where(sql`${t.status} = 'queued' and ${t.attempts} > 0`),
    // Serves an entry's live runs (its status, the Schedule page) and "does this entry have a job waiting or running?".
    // Serves the release of held jobs: by their entry when a job of it ends, all of them in the reaper's sweep (few rows).
    index("job_queue_held_idx").on(t.scheduleKey).where(sql`${t.status} = 'held'`),
    index("job_queue_schedule_idx").on(t.scheduleKey, t.scheduledFor, t.id).where(sql`${t.scheduleKey} is not null`),
  ],
);

/**
 * Finished jobs (succeeded, failed, cancelled, skipped), written once, when
 * the job finishes, and never updated. Terminal `failed` rows are the failure
 * tickets. `cronledger migrate` makes it a table partitioned by day of
 * `finished_at` (and within a day, failed apart from the rest), so retention
 * drops whole days instead of deleting rows (src/db/sql/history.ts);
 * drizzle-kit cannot say PARTITION BY, so it is declared here as a plain
 * table with the columns and indexes every partition has. `locked_by` is the
 * worker of the last attempt. No primary key: a partitioned table's unique
 * indexes must hold the partition key; ids come from `job_queue`'s sequence.
 */
export const jobHistory = cronledgerSchema.table(
  "job_history",
  {
    id: bigint("id", { mode: "number" }).notNull(),
    ...jobColumns(),
    status: text("status", { enum: FINISHED_JOB_STATUSES }).notNull(),
    outcome: text("outcome"),
    runAt: timestamptz("run_at").notNull(),
    attempts: integer("attempts").notNull(),
    lockedBy: text("locked_by"),
    lastError: text("last_error"),
    startedAt: timestamptz("started_at"),
    finishedAt: timestamptz("finished_at").notNull(),
  },
  (t) => [
    check("job_history_status_check", sql`${t.status} in ('succeeded', 'failed', 'cancelled', 'skipped')`),
    // A job by id (the jobs view, cancel, retry, an application's join).
    index("job_history_id_idx").on(t.id),
    // An entry's recent runs (the Schedule page's strips): newest slot first, per schedule key.
    index("job_history_runs_idx").on(t.scheduleKey, t.scheduledFor, t.id).where(sql`${t.scheduleKey} is not null`),
    // The failure tickets, newest first, and by job name.
    index("job_history_failed_idx").on(t.finishedAt, t.id).where(sql`${t.status} = 'failed'`),
    index("job_history_failed_job_name_idx").on(t.jobName, t.finishedAt).where(sql`${t.status} = 'failed'`),
    // The keyed jobs of a day, whose idempotency keys retention deletes with it.
    index("job_history_keyed_idx").on(t.id).where(sql`${t.idempotencyKey} is not null`),
  ],
);

/**
 * Idempotency keys: one row per (job name, key) for every job enqueued with
 * a key (a scheduled job's key is `namespace|identity@slot`), written by the
 * insert that creates the job and deleted with the job's history. Its primary
 * key is the guard: a job moves from the queue to the history when it
 * finishes, and no unique index spans two tables, so the key lives where the
 * job's row does not move.
 */
export const jobKeys = cronledgerSchema.table(
  "job_keys",
  {
    jobName: text("job_name").notNull(),
    idempotencyKey: text("idempotency_key").notNull(),
    jobId: bigint("job_id", { mode: "number" }).notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.jobName, t.idempotencyKey] }),
    // Retention deletes a day's keys by their jobs' ids (src/db/sql/partitions.ts): rows made together sit together here, where
    // the primary key scatters them (two random reads per key, 0.39 s per 1,000 keys with a cold cache).
    index("job_keys_job_id_idx").on(t.jobId),
  ],
);

/**
 * How many finished jobs the history holds, per day of `finished_at` (UTC),
 * queue and status: written in the statement that moves jobs into the
 * history and deleted with the day, so the status counts the history without
 * reading it. `shard` is the writing backend (`pg_backend_pid()`), so
 * concurrent workers never wait on each other's counter row; the prune
 * chore folds past days into shard 0.
 */
export const jobCounts = cronledgerSchema.table(
  "job_counts",
  {
    day: date("day", { mode: "string" }).notNull(),
    shard: integer("shard").notNull(),
    queue: text("queue").notNull(),
    status: text("status").notNull(),
    n: bigint("n", { mode: "number" }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.day, t.shard, t.queue, t.status] })],
);

/**
 * The last finished run of each schedule entry (by slot, then id), written
 * in the statement that moves the job into the history: an entry's status
 * reads one row here instead of every day of the history. Kept beyond
 * retention (an entry that last ran weeks ago still shows that run), deleted
 * with the entry's ledger row.
 */
export const scheduleLastRuns = cronledgerSchema.table("schedule_last_runs", {
  scheduleKey: text("schedule_key").primaryKey(),
  id: bigint("id", { mode: "number" }).notNull(),
  status: text("status").notNull(),
  outcome: text("outcome"),
  attempts: integer("attempts").notNull(),
  maxAttempts: integer("max_attempts").notNull(),
  scheduledFor: timestamptz("scheduled_for").notNull(),
  runAt: timestamptz("run_at").notNull(),
  startedAt: timestamptz("started_at"),
  finishedAt: timestamptz("finished_at").notNull(),
  lastError: text("last_error"),
});

/**
 * Attempts whose result did not become their job's result: the attempt's
 * worker lost the database for longer than the lease, the reaper took the
 * job back, and another attempt claimed it before this one's result could be
 * written (a real split: the job ran twice), or the job was ended otherwise
 * meanwhile (cancelled, deleted). Written by the worker when the late result
 * arrives (src/db/sql/completions.ts, settleLateCompletions), never silently
 * dropped; the job's own row keeps the result of the attempt that holds it.
 * Deleted by the prune chore with the history's retention.
 */
export const supersededAttempts = cronledgerSchema.table(
  "superseded_attempts",
  {
    jobId: bigint("job_id", { mode: "number" }).notNull(),
    /** The attempt's number (the job's `attempts` when it was claimed). */
    attempt: integer("attempt").notNull(),
    /** The worker that ran it. */
    worker: text("worker").notNull(),
    jobName: text("job_name").notNull(),
    /** How the attempt ended: `succeeded`, `failed`, `cancelled`, `retry` (it failed and asked for another attempt) or `returned` (handed back by a shutdown). */
    status: text("status").notNull(),
    outcome: text("outcome"),
    /** The attempt's error, redacted and bounded like every stored error. */
    error: text("error"),
    /** Where the job was when the result arrived: its attempt then (null: the job no longer exists) and its status. */
    jobAttempts: integer("job_attempts"),
    jobStatus: text("job_status"),
    /** When the result was written (the attempt ended at or before it). */
    recordedAt: timestamptz("recorded_at").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.jobId, t.attempt, t.worker] }), index("superseded_attempts_recorded_at_idx").on(t.recordedAt)],
);

/** The columns of the `jobs` view, in order: the job table's columns as they always were. */
const JOB_VIEW_COLUMNS = [
  "id", "job_name", "queue", "payload", "status", "outcome", "priority", "run_at", "attempts", "max_attempts", "idempotency_key",
  "schedule_key", "scheduled_for", "locked_by", "heartbeat_at", "last_error", "retry_policy", "created_at", "started_at", "finished_at",
] as const;
const viewColumns = (missing: Readonly<Record<string, string>>) =>
  sql.raw(JOB_VIEW_COLUMNS.map((column) => (column in missing ? `${missing[column]} as ${column}` : column)).join(", "));

/**
 * Every job, whatever its state: the queue and the history as one relation
 * with the columns the jobs table always had. What applications and
 * operators read (`select ... from cronledger.jobs where ...`, or this
 * object from `cronledger/schema` in a drizzle query or join); cronledger
 * itself writes the two tables. A finished job has no `heartbeat_at`, a live
 * one no `outcome` or `finished_at`.
 */
export const jobs = cronledgerSchema
  .view("jobs", {
    id: bigint("id", { mode: "number" }).notNull(),
    jobName: text("job_name").notNull(),
    queue: text("queue").notNull(),
    payload: jsonb("payload").notNull(),
    status: text("status", { enum: JOB_STATUSES }).notNull(),
    outcome: text("outcome"),
    priority: integer("priority").notNull(),
    runAt: timestamptz("run_at").notNull(),
    attempts: integer("attempts").notNull(),
    maxAttempts: integer("max_attempts").notNull(),
    idempotencyKey: text("idempotency_key"),
    scheduleKey: text("schedule_key"),
    scheduledFor: timestamptz("scheduled_for"),
    lockedBy: text("locked_by"),
    heartbeatAt: timestamptz("heartbeat_at"),
    lastError: text("last_error"),
    retryPolicy: jsonb("retry_policy"),
    createdAt: timestamptz("created_at").notNull(),
    startedAt: timestamptz("started_at"),
    finishedAt: timestamptz("finished_at"),
  })
  .as(
    sql`select ${viewColumns({ outcome: "null::text", finished_at: "null::timestamptz" })} from ${jobQueue} union all select ${viewColumns({ heartbeat_at: "null::timestamptz" })} from ${jobHistory}`,
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

/**
 * Text compared byte by byte (`collate "C"`), whatever the database's
 * collation: a dynamic entry's key, so that the keys with a prefix are one
 * range of the primary key's index (a prefix search and keyset paging read
 * only the page they return, never every entry).
 */
const byteText = customType<{ data: string; driverData: string }>({ dataType: () => 'text collate "C"' });

/**
 * Schedules as data: the entries an application creates, changes and removes
 * at runtime (`ledger.schedules.upsert`), one row each, in the app's own
 * transaction when it gives one. The definition (job, canonical cron, zone,
 * payload, policy) and the fire time of its next slot, `next_fire_at`,
 * indexed, so a pass reads the due entries only (an index probe when none
 * is), never every stored one. The statement that takes due entries fires
 * those whose next slot is the one due and that no pause, quarantine or
 * overlap policy concerns, moving their `next_fire_at` to the following
 * slot's; it moves the others' a lease ahead (other replicas skip them) for
 * the pass to fire, then to their next fire. The release writes each taken
 * entry's slots; `version` guards that write against an upsert in between.
 * Fillfactor 80: the release's write of the following slot (no indexed
 * column) finds room on the row's page, a HOT update. Each entry's ledger row is an ordinary `schedule_state` row in
 * the namespace `<namespace>#dynamic`, keyed `<namespace>#dynamic|<key>`
 * (src/schedule/dynamic-entry.ts), which no static entry's key can be.
 */
export const dynamicSchedules = cronledgerSchema.table(
  "dynamic_schedules",
  {
    namespace: text("namespace").notNull(),
    key: byteText("key").notNull(),
    jobName: text("job_name").notNull(),
    /** The canonical cron (src/schedule/cron.ts). */
    cron: text("cron").notNull(),
    timezone: text("timezone").notNull(),
    payload: jsonb("payload").notNull().default(sql`'{}'::jsonb`),
    jitterMs: doublePrecision("jitter_ms").notNull().default(0),
    // Resolved when the entry is upserted (the job's queue, priority and attempts, the process's defaults), so any
    // replica fires it as stored, whether or not it knows the job (its job waits for a worker that does).
    catchUpWindowMs: doublePrecision("catch_up_window_ms").notNull(),
    queue: text("queue").notNull(),
    priority: integer("priority").notNull(),
    maxAttempts: integer("max_attempts").notNull(),
    overlap: text("overlap").notNull(),
    /** The fire time of the entry's next slot (a lease ahead while a pass holds it); null when it never fires again. */
    nextFireAt: timestamptz("next_fire_at"),
    /**
     * The slot `next_fire_at` fires, and the slot after it with its fire time ('infinity': none), as the process's
     * calendar computed them: what lets the statement that takes a due entry fire it too (src/db/sql/dynamic.ts,
     * fireDue). Null while unknown (a quarantine's wait, a row before migration 0011, a row fired whose following slot
     * the release has not written yet): such an entry is fired by the pass's statement instead.
     */
    nextSlotAt: timestamptz("next_slot_at"),
    followingSlotAt: timestamptz("following_slot_at"),
    followingFireAt: timestamptz("following_fire_at"),
    /** Bumped by every change of the definition: a pass writes `next_fire_at` only if it is still the version it took. */
    version: integer("version").notNull().default(1),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
    updatedAt: timestamptz("updated_at").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.namespace, t.key] }), index("dynamic_schedules_due_idx").on(t.namespace, t.nextFireAt)],
);

/**
 * How many dynamic entries each namespace stores, kept by the statements that
 * create and remove them (src/db/sql/dynamic.ts) and summed on read: the
 * status, the Schedule page and the metrics count a million entries in a few
 * rows instead of a scan of the primary key (docs/decisions.md, "Counting
 * dynamic entries"). shard = the writing backend (`pg_backend_pid()`), so
 * concurrent writers never share a counter row; the prune chore folds the
 * shards into shard 0.
 */
export const dynamicScheduleCounts = cronledgerSchema.table(
  "dynamic_schedule_counts",
  {
    namespace: text("namespace").notNull(),
    shard: integer("shard").notNull(),
    n: bigint("n", { mode: "number" }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.namespace, t.shard] })],
);

export type JobRow = typeof jobs.$inferSelect;
export type ScheduleStateRow = typeof scheduleState.$inferSelect;

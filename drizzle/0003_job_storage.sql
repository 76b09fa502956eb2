-- Hand-written in place of drizzle-kit's generated migration, which would drop the jobs table and
-- every job in it (docs/decisions.md, "Job storage"). It ends with the objects drizzle-kit generates
-- from src/schema.ts (meta/0003_snapshot.json) and keeps every job: the live ones move to
-- job_queue, and the old table, left with the finished ones, becomes job_history. `cronledger
-- migrate` then makes job_history partitioned, which drizzle-kit cannot say (src/db/sql/history.ts).
CREATE TABLE "cronledger"."job_queue" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "cronledger"."job_queue_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"job_name" text NOT NULL,
	"queue" text DEFAULT 'default' NOT NULL,
	"payload" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"priority" integer DEFAULT 0 NOT NULL,
	"max_attempts" integer DEFAULT 1 NOT NULL,
	"idempotency_key" text,
	"schedule_key" text,
	"scheduled_for" timestamp with time zone,
	"retry_policy" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"status" text DEFAULT 'queued' NOT NULL,
	"run_at" timestamp with time zone DEFAULT now() NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"locked_by" text,
	"heartbeat_at" timestamp with time zone,
	"last_error" text,
	"started_at" timestamp with time zone,
	CONSTRAINT "job_queue_status_check" CHECK ("cronledger"."job_queue"."status" in ('queued', 'running'))
);
--> statement-breakpoint
CREATE TABLE "cronledger"."job_keys" (
	"job_name" text NOT NULL,
	"idempotency_key" text NOT NULL,
	"job_id" bigint NOT NULL,
	CONSTRAINT "job_keys_job_name_idempotency_key_pk" PRIMARY KEY("job_name","idempotency_key")
);
--> statement-breakpoint
CREATE TABLE "cronledger"."job_counts" (
	"day" date NOT NULL,
	"shard" integer NOT NULL,
	"queue" text NOT NULL,
	"status" text NOT NULL,
	"n" bigint NOT NULL,
	CONSTRAINT "job_counts_day_shard_queue_status_pk" PRIMARY KEY("day","shard","queue","status")
);
--> statement-breakpoint
CREATE TABLE "cronledger"."schedule_last_runs" (
	"schedule_key" text PRIMARY KEY NOT NULL,
	"id" bigint NOT NULL,
	"status" text NOT NULL,
	"outcome" text,
	"attempts" integer NOT NULL,
	"max_attempts" integer NOT NULL,
	"scheduled_for" timestamp with time zone NOT NULL,
	"run_at" timestamp with time zone NOT NULL,
	"started_at" timestamp with time zone,
	"finished_at" timestamp with time zone NOT NULL,
	"last_error" text
);
--> statement-breakpoint
CREATE INDEX "job_queue_ready_idx" ON "cronledger"."job_queue" USING btree ("queue","priority","run_at","id") WHERE "cronledger"."job_queue"."status" = 'queued';
--> statement-breakpoint
CREATE INDEX "job_queue_running_heartbeat_idx" ON "cronledger"."job_queue" USING btree ("heartbeat_at") WHERE "cronledger"."job_queue"."status" = 'running';
--> statement-breakpoint
CREATE INDEX "job_queue_retrying_idx" ON "cronledger"."job_queue" USING btree ("run_at","id") WHERE "cronledger"."job_queue"."status" = 'queued' and "cronledger"."job_queue"."attempts" > 0;
--> statement-breakpoint
CREATE INDEX "job_queue_schedule_idx" ON "cronledger"."job_queue" USING btree ("schedule_key","scheduled_for","id") WHERE "cronledger"."job_queue"."schedule_key" is not null;
--> statement-breakpoint
INSERT INTO "cronledger"."job_queue" (id, job_name, queue, payload, priority, max_attempts, idempotency_key, schedule_key, scheduled_for, retry_policy, created_at, status, run_at, attempts, locked_by, heartbeat_at, last_error, started_at) OVERRIDING SYSTEM VALUE
SELECT id, job_name, queue, payload, priority, max_attempts, idempotency_key, schedule_key, scheduled_for, retry_policy, created_at, status, run_at, attempts, locked_by, heartbeat_at, last_error, started_at FROM "cronledger"."jobs" WHERE status IN ('queued', 'running');
--> statement-breakpoint
SELECT setval('"cronledger"."job_queue_id_seq"', last_value, is_called) FROM "cronledger"."jobs_id_seq";
--> statement-breakpoint
INSERT INTO "cronledger"."job_keys" (job_name, idempotency_key, job_id)
SELECT job_name, idempotency_key, id FROM "cronledger"."jobs" WHERE idempotency_key IS NOT NULL;
--> statement-breakpoint
DELETE FROM "cronledger"."jobs" WHERE status IN ('queued', 'running');
--> statement-breakpoint
UPDATE "cronledger"."jobs" SET finished_at = created_at WHERE finished_at IS NULL;
--> statement-breakpoint
INSERT INTO "cronledger"."job_counts" (day, shard, queue, status, n)
SELECT (finished_at AT TIME ZONE 'UTC')::date, 0, queue, status, count(*) FROM "cronledger"."jobs" GROUP BY 1, 3, 4;
--> statement-breakpoint
INSERT INTO "cronledger"."schedule_last_runs" (schedule_key, id, status, outcome, attempts, max_attempts, scheduled_for, run_at, started_at, finished_at, last_error)
SELECT DISTINCT ON (schedule_key) schedule_key, id, status, outcome, attempts, max_attempts, scheduled_for, run_at, started_at, finished_at, last_error
FROM "cronledger"."jobs" WHERE schedule_key IS NOT NULL AND scheduled_for IS NOT NULL ORDER BY schedule_key, scheduled_for DESC, id DESC;
--> statement-breakpoint
DROP INDEX "cronledger"."jobs_job_name_idempotency_key_idx", "cronledger"."jobs_ready_idx", "cronledger"."jobs_running_heartbeat_idx", "cronledger"."jobs_finished_idx", "cronledger"."jobs_retrying_idx";
--> statement-breakpoint
ALTER TABLE "cronledger"."jobs" DROP CONSTRAINT "jobs_pkey";
--> statement-breakpoint
ALTER TABLE "cronledger"."jobs" ALTER COLUMN "id" DROP IDENTITY;
--> statement-breakpoint
ALTER TABLE "cronledger"."jobs"
  DROP CONSTRAINT "jobs_status_check",
  DROP COLUMN "heartbeat_at",
  ALTER COLUMN "status" DROP DEFAULT,
  ALTER COLUMN "run_at" DROP DEFAULT,
  ALTER COLUMN "attempts" DROP DEFAULT,
  ALTER COLUMN "finished_at" SET NOT NULL,
  ADD CONSTRAINT "job_history_status_check" CHECK ("status" in ('succeeded', 'failed', 'cancelled', 'skipped'));
--> statement-breakpoint
ALTER TABLE "cronledger"."jobs" RENAME TO "job_history";
--> statement-breakpoint
ALTER INDEX "cronledger"."jobs_schedule_runs_idx" RENAME TO "job_history_runs_idx";
--> statement-breakpoint
ALTER INDEX "cronledger"."jobs_failed_job_name_idx" RENAME TO "job_history_failed_job_name_idx";
--> statement-breakpoint
CREATE INDEX "job_history_id_idx" ON "cronledger"."job_history" USING btree ("id");
--> statement-breakpoint
CREATE INDEX "job_history_failed_idx" ON "cronledger"."job_history" USING btree ("finished_at","id") WHERE "cronledger"."job_history"."status" = 'failed';
--> statement-breakpoint
CREATE INDEX "job_history_keyed_idx" ON "cronledger"."job_history" USING btree ("id") WHERE "cronledger"."job_history"."idempotency_key" is not null;
--> statement-breakpoint
CREATE VIEW "cronledger"."jobs" AS (select id, job_name, queue, payload, status, null::text as outcome, priority, run_at, attempts, max_attempts, idempotency_key, schedule_key, scheduled_for, locked_by, heartbeat_at, last_error, retry_policy, created_at, started_at, null::timestamptz as finished_at from "cronledger"."job_queue" union all select id, job_name, queue, payload, status, outcome, priority, run_at, attempts, max_attempts, idempotency_key, schedule_key, scheduled_for, locked_by, null::timestamptz as heartbeat_at, last_error, retry_policy, created_at, started_at, finished_at from "cronledger"."job_history");

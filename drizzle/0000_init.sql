CREATE SCHEMA "cronledger";
--> statement-breakpoint
CREATE TABLE "cronledger"."jobs" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "cronledger"."jobs_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"job_name" text NOT NULL,
	"queue" text DEFAULT 'default' NOT NULL,
	"payload" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"status" text DEFAULT 'queued' NOT NULL,
	"outcome" text,
	"priority" integer DEFAULT 0 NOT NULL,
	"run_at" timestamp with time zone DEFAULT now() NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"max_attempts" integer DEFAULT 1 NOT NULL,
	"idempotency_key" text,
	"schedule_key" text,
	"scheduled_for" timestamp with time zone,
	"locked_by" text,
	"heartbeat_at" timestamp with time zone,
	"last_error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	CONSTRAINT "jobs_status_check" CHECK ("cronledger"."jobs"."status" in ('queued', 'running', 'succeeded', 'failed', 'cancelled'))
);
--> statement-breakpoint
CREATE TABLE "cronledger"."schedule_state" (
	"key" text PRIMARY KEY NOT NULL,
	"namespace" text DEFAULT 'default' NOT NULL,
	"job_name" text NOT NULL,
	"last_enqueued_slot" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX "jobs_job_name_idempotency_key_idx" ON "cronledger"."jobs" USING btree ("job_name","idempotency_key") WHERE "cronledger"."jobs"."idempotency_key" is not null;--> statement-breakpoint
CREATE INDEX "jobs_ready_idx" ON "cronledger"."jobs" USING btree ("queue","priority","run_at","id") WHERE "cronledger"."jobs"."status" = 'queued';--> statement-breakpoint
CREATE INDEX "jobs_running_heartbeat_idx" ON "cronledger"."jobs" USING btree ("heartbeat_at") WHERE "cronledger"."jobs"."status" = 'running';--> statement-breakpoint
CREATE INDEX "jobs_finished_idx" ON "cronledger"."jobs" USING btree ("status","finished_at") WHERE "cronledger"."jobs"."finished_at" is not null;--> statement-breakpoint
CREATE INDEX "jobs_failed_job_name_idx" ON "cronledger"."jobs" USING btree ("job_name","finished_at") WHERE "cronledger"."jobs"."status" = 'failed';--> statement-breakpoint
CREATE INDEX "schedule_state_namespace_idx" ON "cronledger"."schedule_state" USING btree ("namespace");
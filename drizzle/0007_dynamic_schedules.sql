-- Schedules as data: the dynamic entries an application stores at runtime, each with its next fire indexed (src/db/sql/dynamic.ts); partial indexes on paused and quarantined ledger rows.
CREATE TABLE "cronledger"."dynamic_schedules" (
	"namespace" text NOT NULL,
	"key" text collate "C" NOT NULL,
	"job_name" text NOT NULL,
	"cron" text NOT NULL,
	"timezone" text NOT NULL,
	"payload" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"jitter_ms" double precision DEFAULT 0 NOT NULL,
	"catch_up_window_ms" double precision NOT NULL,
	"queue" text NOT NULL,
	"priority" integer NOT NULL,
	"max_attempts" integer NOT NULL,
	"overlap" text NOT NULL,
	"next_fire_at" timestamp with time zone,
	"version" integer DEFAULT 1 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "dynamic_schedules_namespace_key_pk" PRIMARY KEY("namespace","key")
);
--> statement-breakpoint
CREATE INDEX "dynamic_schedules_due_idx" ON "cronledger"."dynamic_schedules" USING btree ("namespace","next_fire_at");--> statement-breakpoint
CREATE INDEX "schedule_state_paused_idx" ON "cronledger"."schedule_state" USING btree ("namespace") WHERE "cronledger"."schedule_state"."paused_at" is not null;--> statement-breakpoint
CREATE INDEX "schedule_state_quarantined_idx" ON "cronledger"."schedule_state" USING btree ("namespace") WHERE "cronledger"."schedule_state"."quarantined_until" is not null;
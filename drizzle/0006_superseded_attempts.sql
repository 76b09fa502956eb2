-- Attempts whose result did not become their job's result (a reclaim after the lease, or a job ended otherwise meanwhile): src/db/sql/jobs.ts, settleLateCompletions.
CREATE TABLE "cronledger"."superseded_attempts" (
	"job_id" bigint NOT NULL,
	"attempt" integer NOT NULL,
	"worker" text NOT NULL,
	"job_name" text NOT NULL,
	"status" text NOT NULL,
	"outcome" text,
	"error" text,
	"job_attempts" integer,
	"job_status" text,
	"recorded_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "superseded_attempts_job_id_attempt_worker_pk" PRIMARY KEY("job_id","attempt","worker")
);
--> statement-breakpoint
CREATE INDEX "superseded_attempts_recorded_at_idx" ON "cronledger"."superseded_attempts" USING btree ("recorded_at");
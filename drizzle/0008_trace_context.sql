-- A job's trace context (OpenTelemetry), stored with the job by a process that traces its enqueue: each attempt's span links to it.
ALTER TABLE "cronledger"."job_history" ADD COLUMN "trace_context" jsonb;--> statement-breakpoint
ALTER TABLE "cronledger"."job_queue" ADD COLUMN "trace_context" jsonb;
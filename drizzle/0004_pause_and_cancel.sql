-- The columns the operator controls need: an entry paused in its ledger row (who, when, why), and a running job asked to stop (when, by whom, why).
ALTER TABLE "cronledger"."job_queue" ADD COLUMN "cancel_requested_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "cronledger"."job_queue" ADD COLUMN "cancel_requested_by" text;--> statement-breakpoint
ALTER TABLE "cronledger"."job_queue" ADD COLUMN "cancel_reason" text;--> statement-breakpoint
ALTER TABLE "cronledger"."schedule_state" ADD COLUMN "paused_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "cronledger"."schedule_state" ADD COLUMN "paused_by" text;--> statement-breakpoint
ALTER TABLE "cronledger"."schedule_state" ADD COLUMN "paused_note" text;
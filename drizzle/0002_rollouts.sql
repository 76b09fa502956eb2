CREATE TABLE "cronledger"."schedule_versions" (
	"namespace" text NOT NULL,
	"digest" text NOT NULL,
	"ledger_keys" text[] NOT NULL,
	"first_reported_at" timestamp with time zone DEFAULT now() NOT NULL,
	"reported_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "schedule_versions_namespace_digest_pk" PRIMARY KEY("namespace","digest")
);
--> statement-breakpoint
CREATE TABLE "cronledger"."workers" (
	"id" text PRIMARY KEY NOT NULL,
	"namespace" text DEFAULT 'default' NOT NULL,
	"job_names" text[] NOT NULL,
	"queues" text[] NOT NULL,
	"lease_ms" integer NOT NULL,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"heartbeat_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "cronledger"."schedule_state" ADD COLUMN "quarantined_until" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "cronledger"."schedule_state" ADD COLUMN "quarantine_reason" text;--> statement-breakpoint
ALTER TABLE "cronledger"."schedule_state" ADD COLUMN "quarantine_count" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "cronledger"."schedule_state" ADD COLUMN "quarantined_since" timestamp with time zone;
-- How many dynamic entries each namespace stores, kept by the statements that write them (one row per writing backend, summed on read): a million entries are counted in a few rows, not a scan; filled from the entries already stored.
CREATE TABLE "cronledger"."dynamic_schedule_counts" (
	"namespace" text NOT NULL,
	"shard" integer NOT NULL,
	"n" bigint NOT NULL,
	CONSTRAINT "dynamic_schedule_counts_namespace_shard_pk" PRIMARY KEY("namespace","shard")
);
--> statement-breakpoint
INSERT INTO "cronledger"."dynamic_schedule_counts" ("namespace", "shard", "n") SELECT "namespace", 0, count(*) FROM "cronledger"."dynamic_schedules" GROUP BY "namespace";

ALTER TABLE "cronledger"."dynamic_schedules" ADD COLUMN "next_slot_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "cronledger"."dynamic_schedules" ADD COLUMN "following_slot_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "cronledger"."dynamic_schedules" ADD COLUMN "following_fire_at" timestamp with time zone;--> statement-breakpoint
-- Room on each page for the release's write of the following slot (no indexed column): a HOT update. Applies to pages written from now on.
ALTER TABLE "cronledger"."dynamic_schedules" SET (fillfactor = 80);

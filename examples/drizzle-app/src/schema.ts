import { bigint, integer, pgTable, text, timestamp } from "drizzle-orm/pg-core";

/**
 * The application's own tables: the only file drizzle-kit reads. cronledger's
 * tables are imported where they are queried (src/db.ts), never re-exported
 * here, so the app's migrations never try to create or alter them.
 */
export const invoices = pgTable("invoices", {
  id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
  customerEmail: text("customer_email").notNull(),
  amountCents: integer("amount_cents").notNull(),
  dueAt: timestamp("due_at", { withTimezone: true, mode: "date" }).notNull(),
  paidAt: timestamp("paid_at", { withTimezone: true, mode: "date" }),
  // cronledger.jobs.id of the last reminder; no foreign key, so the app's and
  // cronledger's migrations can run in either order.
  reminderJobId: bigint("reminder_job_id", { mode: "number" }),
});

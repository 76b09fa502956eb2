import type { Cronledger } from "cronledger";
import { desc, eq } from "drizzle-orm";
import { cronledgerJobs, type AppDatabase } from "./db.js";
import { sendReminder } from "./jobs.js";
import { invoices } from "./schema.js";

/** Enqueues at most one reminder per invoice and day, and remembers the job on the invoice. */
export async function remindCustomer(db: AppDatabase, ledger: Cronledger, invoiceId: number, today: string): Promise<number> {
  const job = await ledger.enqueue(sendReminder, { invoiceId }, { idempotencyKey: `invoice-${invoiceId}-${today}` });
  await db.update(invoices).set({ reminderJobId: job.id }).where(eq(invoices.id, invoiceId));
  return job.id;
}

/** The app's own typed query across both schemas: each invoice with its last reminder's state. */
export function invoicesWithReminderState(db: AppDatabase) {
  return db
    .select({
      invoiceId: invoices.id,
      customerEmail: invoices.customerEmail,
      reminderStatus: cronledgerJobs.status,
      reminderAttempts: cronledgerJobs.attempts,
      reminderError: cronledgerJobs.lastError,
    })
    .from(invoices)
    .leftJoin(cronledgerJobs, eq(cronledgerJobs.id, invoices.reminderJobId))
    .orderBy(desc(invoices.id));
}

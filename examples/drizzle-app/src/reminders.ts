import type { Cronledger } from "cronledger";
import { and, desc, eq, isNull } from "drizzle-orm";
import { cronledgerJobs, type AppDatabase } from "./db.js";
import { sendReminder } from "./jobs.js";
import { invoices } from "./schema.js";

/** Reminding is for unpaid invoices only; thrown inside the transaction, it takes the reminder job back with it. */
export class InvoiceNotDueError extends Error {
  constructor(readonly invoiceId: number) {
    super(`invoice ${invoiceId} does not exist or is already paid: no reminder`);
  }
}

/**
 * Enqueues at most one reminder per invoice and day and remembers the job on
 * the invoice, in ONE transaction: the job and the invoice's reminder_job_id
 * commit together or not at all. A crash, or any failure after the enqueue
 * (here: the invoice turned out to be paid), leaves neither behind, and no
 * worker is woken for a job that was rolled back.
 */
export async function remindCustomer(db: AppDatabase, ledger: Cronledger, invoiceId: number, today: string): Promise<number> {
  return db.transaction(async (tx) => {
    const job = await ledger.enqueue(sendReminder, { invoiceId }, { db: tx, idempotencyKey: `invoice-${invoiceId}-${today}` });
    const updated = await tx
      .update(invoices)
      .set({ reminderJobId: job.id })
      .where(and(eq(invoices.id, invoiceId), isNull(invoices.paidAt)))
      .returning({ id: invoices.id });
    if (updated.length === 0) throw new InvoiceNotDueError(invoiceId);
    return job.id;
  });
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

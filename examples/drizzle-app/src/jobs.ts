import { defineJob, defineSchedule } from "cronledger";
import { z } from "zod";

export const sendReminder = defineJob({
  name: "billing.send-reminder",
  payload: z.object({ invoiceId: z.number().int().positive() }),
  retry: "entity",
  timeout: "30s",
  async run({ invoiceId }, ctx) {
    ctx.log.info("reminder sent", { invoiceId });
  },
});

export const overdueScan = defineJob({
  name: "billing.overdue-scan",
  retry: "maintenance",
  async run(_payload, ctx) {
    ctx.log.info("scanning for overdue invoices", { slot: ctx.scheduledFor?.toISOString() });
  },
});

export const BILLING_JOBS = [sendReminder, overdueScan];

export const BILLING_SCHEDULE = defineSchedule([
  // 09:00 on weekdays in New York, whatever zone the servers run in.
  { job: overdueScan, cron: "0 9 * * 1-5", timezone: "America/New_York" },
]);

// In your application these come from "cronledger"; the demo imports the source so `npm start` needs no build.
import { z } from "zod";
import { defineJob, defineSchedule } from "../../src/index.js";

/** A 6-field cron: second resolution, so the demo shows slots firing within seconds. */
export const heartbeat = defineJob({
  name: "demo.heartbeat",
  retry: "maintenance",
  run: (_payload, ctx) => {
    ctx.log.debug("tick-tock", { slot: ctx.scheduledFor?.toISOString() });
  },
});

/**
 * Fails its first two attempts, then succeeds. The "probe" retry class (3
 * attempts, 1 s base, 5 s cap) retries it within seconds, so the whole
 * story is visible right after start.
 */
export const flakySync = defineJob({
  name: "demo.flaky-sync",
  payload: z.object({ account: z.string() }),
  retry: "probe",
  timeout: "10s",
  run: ({ account }, ctx) => {
    if (ctx.attempt < 3) throw new Error(`upstream for ${account} answered 503 (attempt ${ctx.attempt} of ${ctx.maxAttempts})`);
  },
});

/** A daily job read in a non-UTC timezone: 07:30 in Tokyo, whatever the server's zone. */
export const dailyReport = defineJob({
  name: "demo.daily-report",
  payload: z.object({ recipients: z.array(z.string()) }),
  run: ({ recipients }, ctx) => {
    ctx.log.info("daily report sent", { recipients: recipients.length });
  },
});

export const DEMO_JOBS = [heartbeat, flakySync, dailyReport];

export const DEMO_SCHEDULE = defineSchedule([
  { job: heartbeat, cron: "*/2 * * * * *" },
  { job: flakySync, cron: "*/30 * * * * *", payload: { account: "acme" } },
  { job: dailyReport, cron: "30 7 * * *", timezone: "Asia/Tokyo", payload: { recipients: ["ops@example.com"] } },
]);

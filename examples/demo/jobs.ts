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

/** Always fails, without retries: the entry shows "failing" and its failures group on the page. */
export const invoiceExport = defineJob({
  name: "demo.invoice-export",
  retry: "maintenance",
  run: () => {
    throw new Error("sftp.example.com refused the login for user exporter");
  },
});

/** Fails and waits 20 s, then 40 s, before trying again: the entry shows "retrying". */
export const crmSync = defineJob({
  name: "demo.crm-sync",
  retry: { maxAttempts: 4, baseMs: 20_000, capMs: 60_000 },
  run: () => {
    throw new Error("crm.example.com answered 503 Service Unavailable");
  },
});

/** Takes 6 s of its 10 s slot: the entry is often "running". */
export const searchReindex = defineJob({
  name: "demo.search-reindex",
  retry: "maintenance",
  run: async (_payload, ctx) => {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 6_000);
      ctx.signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
    });
  },
});

/** On a queue the demo's worker does not serve (`worker.queues`): the entry shows "waiting for worker". */
export const thumbnailRender = defineJob({ name: "demo.thumbnail-render", queue: "gpu", retry: "maintenance", run: () => undefined });

export const DEMO_JOBS = [heartbeat, flakySync, dailyReport, invoiceExport, crmSync, searchReindex, thumbnailRender];

/** One entry per state the Schedule page can show in a healthy process: ok, retrying, failing, running, waiting for worker, never fired. */
export const DEMO_SCHEDULE = defineSchedule([
  { job: heartbeat, cron: "*/2 * * * * *" },
  { job: flakySync, cron: "*/30 * * * * *", payload: { account: "acme" } },
  { job: dailyReport, cron: "30 7 * * *", timezone: "Asia/Tokyo", payload: { recipients: ["ops@example.com"] } },
  { job: invoiceExport, cron: "*/10 * * * * *" },
  { job: crmSync, cron: "*/20 * * * * *" },
  { job: searchReindex, cron: "*/10 * * * * *" },
  { job: thumbnailRender, cron: "*/10 * * * * *" },
]);

import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startAdminServer, type AdminServer } from "../src/admin/server.js";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { silentLogger } from "../src/log.js";
import { history, HEALTH_JOBS, HEALTH_SCHEDULE, invoices, LATEST_HOUR, mirror, nightly, ping, sync, exportJob } from "./fixtures/cli/health-schedule.js";
import { runCli } from "./support/child.js";
import { launchBrowser, type TestBrowser } from "./support/browser.js";
import { createTestDatabase } from "./support/database.js";

const HOUR = 3_600_000;
const MINUTE = 60_000;
const HALF_HOUR = 30 * MINUTE;
const CONFIG = fileURLToPath(new URL("./fixtures/cli/health.config.ts", import.meta.url));
const ARTIFACTS = "test-results";

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let ledger: Cronledger;
let server: AdminServer;
let browser: TestBrowser;
const token = "health-page-token-0123456789";
const run = (statement: ReturnType<typeof sql>) => query(ledger.database.db, statement);

/**
 * A schedule in every state, made by the real tick and worker at chosen slot
 * times: 20 hours of an hourly report (failed, skipped, retried runs among
 * them), a ticker that stopped, a daily entry that never fired, a failing
 * and a retrying entry, a job no worker serves, a quarantined entry and an
 * invalid one. The database stamps start and finish with its own clock, so
 * the history's are moved to its slots' times afterwards.
 */
beforeAll(async () => {
  database = await createTestDatabase(import.meta.url);
  ledger = createCronledger({ database: { url: database.url, poolSize: 4 }, jobs: HEALTH_JOBS, schedule: HEALTH_SCHEDULE, logger: silentLogger });
  await ledger.migrate();
  await run(
    sql.raw(`create function public.reject_mirror() returns trigger language plpgsql as $$ begin raise exception 'mirror backend is read-only'; end $$;
      create trigger reject_mirror before insert on cronledger.job_queue for each row when (new.job_name = '${mirror.name}') execute function public.reject_mirror()`),
  );
  const historyOnly = createCronledger({ database: ledger.database, jobs: [history], schedule: [{ job: history, cron: "0 * * * *" }], metrics: false, logger: silentLogger });
  await historyOnly.tick({ now: new Date(LATEST_HOUR - 20 * HOUR + 1_000) });
  for (let k = 19; k >= 0; k--) {
    const slot = LATEST_HOUR - k * HOUR;
    await historyOnly.tick({ now: new Date(slot + 1_000) });
    await historyOnly.work({ once: true, queues: ["default"], clock: () => new Date(slot + 2_000), random: () => 0.5 });
  }
  await historyOnly.close();
  await run(sql`update cronledger.job_history set started_at = scheduled_for + interval '2 seconds', finished_at = scheduled_for + interval '3 seconds'
                where job_name = ${history.name}`);
  // Two runs that started ten minutes after their slot: late.
  await run(sql`update cronledger.job_history set started_at = scheduled_for + interval '10 minutes', finished_at = scheduled_for + interval '11 minutes'
                where job_name = ${history.name} and scheduled_for in (${new Date(LATEST_HOUR - 7 * HOUR).toISOString()}::timestamptz, ${new Date(LATEST_HOUR - 8 * HOUR).toISOString()}::timestamptz)`);
  // The entry's last run (what its status reads) as the history now says.
  await run(sql`update cronledger.schedule_last_runs r set started_at = h.started_at, finished_at = h.finished_at from cronledger.job_history h where h.id = r.id`);

  // The other entries fire their latest half-hour slot; the default queue is worked, "reports" is not.
  const latestHalfHour = Math.floor(Date.now() / HALF_HOUR) * HALF_HOUR;
  const others = createCronledger({ database: ledger.database, jobs: [invoices, sync, exportJob], schedule: HEALTH_SCHEDULE.filter((entry) => [invoices, sync, exportJob].some((job) => job === entry.job)), metrics: false, logger: silentLogger });
  await others.tick({ now: new Date(latestHalfHour - 10 * MINUTE) });
  await others.tick({ now: new Date(latestHalfHour + 1_000) });
  await others.work({ once: true, queues: ["default"] });
  await others.close();
  // The export has been ready for ten minutes and no worker serves its queue.
  await run(sql`update cronledger.job_queue set run_at = now() - interval '10 minutes' where job_name = ${exportJob.name}`);

  // This process ticks now: the daily backup, the heartbeat and the mirror get their rows; two seconds on, the
  // every-second mirror is due and its insert is refused (quarantined).
  const first = await ledger.tick();
  await ledger.tick({ now: new Date(first.now.getTime() + 2_000) });
  // The heartbeat's ticker stopped three minutes ago.
  await run(sql`update cronledger.schedule_state set last_enqueued_slot = date_trunc('minute', now()) - interval '3 minutes', updated_at = now() + interval '1 millisecond'
                where job_name = ${ping.name}`);

  server = await startAdminServer(ledger, { port: 0, token });
  browser = await launchBrowser({ extraHTTPHeaders: { authorization: `Bearer ${token}` }, viewport: { width: 1400, height: 1000 } });
  await mkdir(ARTIFACTS, { recursive: true });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await ledger?.close();
  await database?.drop();
});

async function openPage(options: { width?: number; dark?: boolean } = {}): Promise<Page> {
  const page = await browser.context.newPage();
  await page.setViewportSize({ width: options.width ?? 1400, height: 1000 });
  if (options.dark) await page.emulateMedia({ colorScheme: "dark" });
  const errors: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  const response = await page.goto(`${server.url}/admin/scheduler`);
  expect(response?.status()).toBe(200);
  expect(errors, "console errors (a CSP refusal would show here)").toEqual([]);
  return page;
}

const rowOf = (page: Page, job: string) => page.locator("#entries tr").filter({ has: page.locator("strong", { hasText: new RegExp(`^${job.replace(/\./g, "\\.")}$`) }) });
const stateOf = (page: Page, job: string) => rowOf(page, job).getAttribute("data-state");

describe("the Schedule page shows every entry's health", () => {
  it("gives each entry its state and reason, and the history's strip of its last 20 runs with times on hover", async () => {
    const page = await openPage();
    expect(await stateOf(page, history.name)).toBe("ok");
    expect(await stateOf(page, ping.name)).toBe("late");
    expect(await stateOf(page, nightly.name)).toBe("never_fired");
    expect(await stateOf(page, invoices.name)).toBe("failing");
    expect(await stateOf(page, sync.name)).toBe("retrying");
    expect(await stateOf(page, exportJob.name)).toBe("waiting_for_worker");
    expect(await stateOf(page, mirror.name)).toBe("quarantined");
    const late = page.locator(`#entries tr[data-state="late"] .reason`);
    expect(await late.innerText()).toMatch(/past its fire time and not handled .*no scheduler is ticking/);
    expect(await rowOf(page, nightly.name).innerText()).toContain("never fired");

    const cells = page.locator(`#entries tr[data-state="ok"] .strip .run`);
    expect(await cells.count()).toBe(20);
    const titles = await cells.evaluateAll((nodes) => nodes.map((node) => node.getAttribute("title") ?? ""));
    // Oldest on the left: the last cell is the latest slot's run.
    expect(titles.at(-1)).toContain(`slot ${new Date(LATEST_HOUR).toISOString()}`);
    expect(titles.at(-1)).toMatch(/started \d{4}-\d\d-\d\dT/);
    const kinds = await cells.evaluateAll((nodes) => nodes.map((node) => node.className));
    expect(kinds.filter((name) => name.includes("run-failed"))).toHaveLength(3);
    expect(kinds.filter((name) => name.includes("run-skipped"))).toHaveLength(3);
    expect(kinds.filter((name) => name.includes("retried"))).toHaveLength(2);
    expect(kinds.filter((name) => name.includes("late"))).toHaveLength(2);
    expect(titles.find((title) => title.includes("failed"))).toContain("the report's source was archived");

    const invalid = page.locator(".broken-entry.invalid");
    expect(await invalid.count()).toBe(1);
    expect(await invalid.innerText()).toContain("schedule[7]");
    expect(await invalid.innerText()).toContain("unregistered_job");
    await page.screenshot({ path: join(ARTIFACTS, "schedule-health-1400.png"), fullPage: true });
    expect(existsSync(join(ARTIFACTS, "schedule-health-1400.png"))).toBe(true);
    await page.close();
  });

  it("fits a 390 px phone without sideways scrolling, strips included", async () => {
    const page = await openPage({ width: 390 });
    // (Expressions run in the page; this project's TypeScript has no DOM types.)
    const widths = (await page.evaluate("({ page: document.documentElement.scrollWidth, viewport: window.innerWidth })")) as { page: number; viewport: number };
    expect(widths.page).toBeLessThanOrEqual(widths.viewport);
    const strip = page.locator(`#entries tr[data-state="ok"] .strip`);
    expect(await strip.isVisible()).toBe(true);
    const box = await strip.boundingBox();
    expect((box?.x ?? 0) + (box?.width ?? 0)).toBeLessThanOrEqual(390);
    await page.screenshot({ path: join(ARTIFACTS, "schedule-health-390.png"), fullPage: true });
    await page.close();
  });

  it("follows the system's dark mode", async () => {
    const light = await openPage();
    const dark = await openPage({ dark: true });
    const luminance = async (page: Page) => {
      const color = (await page.evaluate("getComputedStyle(document.body).backgroundColor")) as string;
      const [r, g, b] = (color.match(/\d+/g) ?? []).map(Number);
      return (0.2126 * (r ?? 0) + 0.7152 * (g ?? 0) + 0.0722 * (b ?? 0)) / 255;
    };
    expect(await luminance(light)).toBeGreaterThan(0.8);
    expect(await luminance(dark)).toBeLessThan(0.2);
    await dark.screenshot({ path: join(ARTIFACTS, "schedule-health-dark-1400.png"), fullPage: true });
    await light.close();
    await dark.close();
  });

  it("refreshes itself in place, keeping the scroll position", async () => {
    const page = await browser.context.newPage();
    await page.clock.install();
    await page.goto(`${server.url}/admin/scheduler`);
    await page.evaluate("window.scrollTo(0, 400)");
    const before = await page.evaluate("window.scrollY");
    expect(before).toBe(400);
    // Something changes on the server: a new failure ticket appears.
    const job = await ledger.enqueue(invoices, {});
    await ledger.work({ once: true, queues: ["default"] });
    expect(await page.locator(`#failure-${job.id}`).count()).toBe(0);
    await page.clock.fastForward(16_000);
    await expect.poll(() => page.locator("#refresh-status").innerText(), { timeout: 10_000 }).toMatch(/^updated /);
    expect(await page.locator(`#failure-${job.id}`).count()).toBe(1);
    expect(await page.evaluate("window.scrollY")).toBe(before);
    await page.close();
  });
});

describe("operator actions on the page", () => {
  it("retries a failure, says what it did, and the retried ticket no longer offers Retry", async () => {
    const page = await openPage();
    const ticket = page.locator(".failure:not(.was-retried)").filter({ hasText: invoices.name }).first();
    const id = Number((await ticket.getAttribute("id"))?.replace("failure-", ""));
    await Promise.all([page.waitForURL(/\/admin\/scheduler#failure-\d+$/), ticket.locator("button").click()]);
    const notice = await page.locator(".notice").innerText();
    expect(notice).toMatch(new RegExp(`^Job #${id} retried: it runs again as new job #(\\d+), queued now`));
    const newId = Number(/new job #(\d+)/.exec(notice)?.[1]);
    const retried = page.locator(`#failure-${id}`);
    expect(await retried.locator("button").count()).toBe(0);
    expect(await retried.innerText()).toContain(`Retried as job #${newId} (queued)`);
    // The address lost its one-off notice: a reload does not say it again.
    expect(new URL(page.url()).search).toBe("");
    await page.close();
  });

  it("cancels a job waiting for a retry and says so", async () => {
    const page = await openPage();
    const card = page.locator(".retrying").filter({ hasText: sync.name });
    expect(await card.count()).toBe(1);
    const id = Number((await card.getAttribute("id"))?.replace("retrying-", ""));
    await Promise.all([page.waitForURL(/\/admin\/scheduler#retrying$/), card.locator("button").click()]);
    expect(await page.locator(".notice").innerText()).toBe(`Job #${id} cancelled while it waited for a retry: it will not run.`);
    expect(await page.locator(`#retrying-${id}`).count()).toBe(0);
    const [row] = await run(sql`select status from cronledger.jobs where id = ${id}`);
    expect(row).toEqual({ status: "cancelled" });
    await page.close();
  });
});

describe("cronledger status and cancel", () => {
  const env = () => ({ ...process.env, DATABASE_URL: database.url });

  it("prints each entry's state, why the unwell ones are unwell, and where the invalid entry is written", async () => {
    const result = await runCli(["status", "--config", CONFIG], { env: env() });
    expect(result.code).toBe(0);
    const line = (job: string) => result.stdout.split("\n").find((text) => text.startsWith(job)) ?? "";
    expect(line(history.name)).toMatch(/\bok\b/);
    expect(line(ping.name)).toMatch(/\blate\b/);
    expect(line(nightly.name)).toMatch(/\bnever_fired\b.*never \(created /);
    expect(line(invoices.name)).toMatch(/\bfailing\b/);
    expect(line(exportJob.name)).toMatch(/\bwaiting_for_worker\b/);
    expect(result.stdout).toContain(`  ${ping.name} [late] slot `);
    expect(result.stdout).toMatch(new RegExp(`  ${invoices.name} \\[failing\\] its latest run, job #\\d+ .* failed for good after 1/1 attempts: .*account 4711 is closed`));
    expect(result.stdout).toMatch(/error \[unregistered_job\] schedule\[7\] \(report\.hourly-sned\): .* \(test\/fixtures\/cli\/health-schedule\.ts:\d+:3\)/);
  });

  it("cancels a queued job by id, once, and refuses what it cannot cancel", async () => {
    const job = await ledger.enqueue(nightly, {}, { runAt: new Date("2099-01-01T00:00:00Z") });
    const first = await runCli(["cancel", String(job.id)], { env: env() });
    expect(first.code).toBe(0);
    expect(first.stdout.trim()).toBe(`Cancelled job ${job.id} (${nightly.name}), which was queued, never run: it will not run.`);
    const again = await runCli(["cancel", String(job.id)], { env: env() });
    expect(again.stdout.trim()).toBe(`Job ${job.id} (${nightly.name}) was already cancelled; nothing changed.`);
    const [failed] = (await ledger.failures({ jobType: invoices.name })).failures;
    const refused = await runCli(["cancel", String(failed?.id)], { env: env() });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`error [job_not_cancellable]: Job ${failed?.id} is failed`);
    const typo = await runCli(["cancle", "5"], { env: env() });
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain("Did you mean `cronledger cancel`?");
    const bad = await runCli(["cancel", "five"], { env: env() });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("needs the job's id");
  });
});

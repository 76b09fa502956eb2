// The Schedule page's running jobs and their Stop button, confirmed on a page of its own, in a real
// headless Chromium against a real PostgreSQL, with a worker running the jobs.
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { startAdminServer, type AdminServer } from "../src/admin/server.js";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { JobCancelledError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { launchBrowser, type TestBrowser } from "./support/browser.js";
import { createTestDatabase } from "./support/database.js";
import { until } from "./support/worker-processes.js";

const ARTIFACTS = "test-results";
const token = "page-running-token-0123456789";
const stops = new Map<number, { requestedBy: string; reason: string | null }>();

const long = defineJob({
  name: "page.long",
  timeout: 600_000,
  payload: z.object({ honour: z.boolean() }),
  async run(payload, ctx) {
    const signal = ctx.signal;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, 300_000);
      signal.addEventListener("abort", () => {
        if (signal.reason instanceof JobCancelledError) stops.set(ctx.jobId, { requestedBy: signal.reason.requestedBy, reason: signal.reason.reason });
        if (!payload.honour) return;
        clearTimeout(timer);
        reject(signal.reason as Error);
      });
    });
  },
});

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let ledger: Cronledger;
let server: AdminServer;
let browser: TestBrowser;
let working: Promise<unknown>;
const ids: { honours: number; ignores: number; untouched: number } = { honours: 0, ignores: 0, untouched: 0 };

beforeAll(async () => {
  database = await createTestDatabase(import.meta.url);
  ledger = createCronledger({ database: { url: database.url, poolSize: 6 }, jobs: [long], logger: silentLogger, chores: false, stopGrace: 120_000 });
  await ledger.migrate();
  working = ledger.work({ concurrency: 3, pollInterval: 100, gracePeriod: 100 });
  ids.untouched = (await ledger.enqueue(long, { honour: true })).id;
  ids.honours = (await ledger.enqueue(long, { honour: true })).id;
  ids.ignores = (await ledger.enqueue(long, { honour: false })).id;
  await until("three jobs run", async () => (await ledger.running()).length === 3);
  server = await startAdminServer(ledger, { port: 0, token });
  browser = await launchBrowser({ extraHTTPHeaders: { authorization: `Bearer ${token}` }, viewport: { width: 1400, height: 1000 } });
  await mkdir(ARTIFACTS, { recursive: true });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await ledger?.close();
  await working;
  await database?.drop();
});

async function open(path: string, width = 1400): Promise<Page> {
  const page = await browser.context.newPage();
  await page.setViewportSize({ width, height: 1000 });
  const errors: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  const response = await page.goto(`${server.url}${path}`);
  expect(response?.status()).toBe(200);
  expect(errors, "console errors (a CSP refusal would show here)").toEqual([]);
  return page;
}

async function statusOf(id: number): Promise<string | undefined> {
  const [row] = await query<{ status: string }>(ledger.database.db, sql`select status from cronledger.jobs where id = ${id}`);
  return row?.status;
}

/** From the Schedule page: the job's Stop link, its confirmation page, the reason, the confirming click; back on the page. */
async function stopFromPage(page: Page, id: number, reason: string): Promise<void> {
  const card = page.locator(`#running-${id}`);
  await Promise.all([page.waitForURL(new RegExp(`/admin/scheduler/jobs/${id}/stop$`)), card.locator("a.button.danger").click()]);
  expect(await page.locator("h1").innerText()).toBe(`Stop job #${id}?`);
  expect(await page.locator(".confirm").innerText()).toMatch(/ends cancelled when the handler returns, and is not retried/);
  await page.locator("#reason").fill(reason);
  await Promise.all([page.waitForURL(/\/admin\/scheduler#running$/), page.locator(`button.danger`, { hasText: `Stop job #${id}` }).click()]);
  expect(await page.locator(".notice").innerText()).toBe(`Job #${id} asked to stop: its worker aborts its signal, and it ends cancelled when its handler returns.`);
}

describe("stopping a running job from the Schedule page", () => {
  it("lists the running jobs with a Stop button, longest-running first; leaving the confirmation stops nothing", async () => {
    const page = await open("/admin/scheduler");
    const cards = page.locator("#running ~ .card.running");
    expect(await page.locator(".card.running").evaluateAll((nodes) => nodes.map((node) => node.id))).toEqual(
      [ids.untouched, ids.honours, ids.ignores].map((id) => `running-${id}`),
    );
    expect(await cards.first().innerText()).toMatch(new RegExp(`page\\.long #${ids.untouched} · attempt 1/\\d+ · started \\d+s ago`));
    await Promise.all([page.waitForURL(/\/stop$/), page.locator(`#running-${ids.untouched} a.button.danger`).click()]);
    await Promise.all([page.waitForURL(/\/admin\/scheduler#running$/), page.locator("a.button", { hasText: "Keep it running" }).click()]);
    expect(await statusOf(ids.untouched)).toBe("running");
    await page.close();
  });

  it("stops a job after confirmation: its handler reads who and why, it ends cancelled", async () => {
    const page = await open("/admin/scheduler");
    await stopFromPage(page, ids.honours, "page test: runaway");
    await until("the stopped job is cancelled", async () => (await statusOf(ids.honours)) === "cancelled");
    expect(stops.get(ids.honours)).toEqual({ requestedBy: "admin", reason: "page test: runaway" });
    await page.close();
  });

  it("shows a job still stopping, without a Stop button, at 1,400 and 390 px (screenshots)", async () => {
    const page = await open("/admin/scheduler");
    await stopFromPage(page, ids.ignores, "ignores its signal");
    await until("the stubborn handler saw the request", () => stops.has(ids.ignores));
    await page.reload();
    const stopping = page.locator(`#running-${ids.ignores}`);
    expect(await stopping.getAttribute("class")).toContain("stopping");
    expect(await stopping.innerText()).toMatch(/Asked to stop by admin \d+s ago: ignores its signal\./);
    expect(await stopping.locator("a.button").count()).toBe(0);
    expect(await page.locator(`#running-${ids.untouched} a.button.danger`).count()).toBe(1);
    expect(await page.locator(`#running-${ids.honours}`).count()).toBe(0);
    await page.screenshot({ path: join(ARTIFACTS, "schedule-running-1400.png"), fullPage: true });
    expect(existsSync(join(ARTIFACTS, "schedule-running-1400.png"))).toBe(true);
    await page.close();

    const phone = await open("/admin/scheduler", 390);
    const widths = (await phone.evaluate("({ page: document.documentElement.scrollWidth, viewport: window.innerWidth })")) as { page: number; viewport: number };
    expect(widths.page).toBeLessThanOrEqual(widths.viewport);
    const button = phone.locator(`#running-${ids.untouched} a.button.danger`);
    expect(await button.isVisible()).toBe(true);
    const box = await button.boundingBox();
    expect((box?.x ?? 0) + (box?.width ?? 0)).toBeLessThanOrEqual(390);
    await phone.screenshot({ path: join(ARTIFACTS, "schedule-running-390.png"), fullPage: true });
    await phone.goto(`${server.url}/admin/scheduler/jobs/${ids.untouched}/stop`);
    const confirmWidths = (await phone.evaluate("({ page: document.documentElement.scrollWidth, viewport: window.innerWidth })")) as { page: number; viewport: number };
    expect(confirmWidths.page).toBeLessThanOrEqual(confirmWidths.viewport);
    await phone.screenshot({ path: join(ARTIFACTS, "schedule-stop-confirm-390.png"), fullPage: true });
    await phone.close();
  });

  it("asks a fresh browser for the token (Basic) on a shared stop link, where the API still answers Bearer and JSON", async () => {
    const link = `${server.url}/admin/scheduler/jobs/${ids.untouched}/stop`;
    // What a browser without credentials gets: a Basic challenge (so it prompts) and an HTML note, not JSON.
    const bare = await fetch(link, { headers: { accept: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" } });
    expect(bare.status).toBe(401);
    expect(bare.headers.get("www-authenticate")).toMatch(/^Basic realm="cronledger admin"/);
    expect(bare.headers.get("content-type")).toMatch(/^text\/html/);
    expect(await bare.text()).toContain("give the token as the password");
    // A Chromium that has only what a prompt would give it (it answers a Basic challenge, never a Bearer one) opens the page.
    const fresh = await launchBrowser({ httpCredentials: { username: "ops", password: token }, viewport: { width: 1400, height: 1000 } });
    try {
      const page = await fresh.context.newPage();
      const response = await page.goto(link);
      expect(response?.status()).toBe(200);
      expect(await page.locator("h1").innerText()).toBe(`Stop job #${ids.untouched}?`);
    } finally {
      await fresh.close();
    }
    // The API is unchanged: a client that asks for JSON, or posts, is told to send the bearer token.
    for (const init of [{ headers: { accept: "application/json" } }, { method: "POST", headers: { accept: "application/json" } }]) {
      const url = init.method === "POST" ? link.replace(/\/stop$/, "/cancel") : link.replace(/\/jobs\/\d+\/stop$/, "/status");
      const answer = await fetch(url, init);
      expect(answer.status, url).toBe(401);
      expect(answer.headers.get("www-authenticate"), url).toMatch(/^Bearer /);
      expect(await answer.json()).toMatchObject({ error: "unauthorized" });
    }
  });

  it("says so when the job is no longer running", async () => {
    const page = await open(`/admin/scheduler/jobs/${ids.honours}/stop`);
    expect(await page.locator("body").innerText()).toContain(`Job #${ids.honours} is not running (it finished, or never started); there is nothing to stop.`);
    await page.close();
  });

  it("takes the reason as JSON on the HTTP API, and refuses a body larger than 16 KiB", async () => {
    const post = (body: string) =>
      fetch(`${server.url}/admin/scheduler/jobs/${ids.untouched}/cancel`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body,
      });
    const tooLarge = await post(JSON.stringify({ reason: "x".repeat(20_000) }));
    expect(tooLarge.status).toBe(413);
    expect(await statusOf(ids.untouched)).toBe("running");
    const answer = (await (await post(JSON.stringify({ reason: "from the API" }))).json()) as Record<string, unknown>;
    expect(answer).toMatchObject({ version: 1, id: ids.untouched, was: "running", cancelled: true, stop: { requested_by: "admin", reason: "from the API", grace_ms: 120_000 } });
    await until("the job is cancelled", async () => (await statusOf(ids.untouched)) === "cancelled");
    expect(stops.get(ids.untouched)).toEqual({ requestedBy: "admin", reason: "from the API" });
  });
});

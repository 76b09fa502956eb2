import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startAdminServer, type AdminServer } from "../src/admin/server.js";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { defineSchedule } from "../src/schedule/define-schedule.js";
import { launchBrowser, type TestBrowser } from "./support/browser.js";
import { createTestDatabase } from "./support/database.js";

/**
 * The Schedule page read by a person, in headless Chromium: the login with a
 * trailing slash, reasons in relative times with the instant on hover, a job
 * that keeps failing as one group, the Queues table and long identities on a
 * 390 px phone. Screenshots at 1,400 and 390 px, light and dark, land in
 * test-results/.
 */
const ARTIFACTS = "test-results";
const TOKEN = "page-readability-token-0123456789";

const reconcile = defineJob({ name: "billing.reconcile-invoices-with-ledger", retry: "maintenance", run: () => undefined });
const sync = defineJob({
  name: "crm.sync",
  retry: "maintenance",
  queue: "integrations",
  run: () => {
    throw new Error("crm answered 503 Service Unavailable");
  },
});
const export_ = defineJob({
  name: "reports.export",
  retry: "maintenance",
  run: () => {
    throw new Error("disk full");
  },
});
const SCHEDULE = defineSchedule([{ job: reconcile, cron: "0 3 * * *", timezone: "America/Argentina/Buenos_Aires", key: "nightly-reconciliation-of-all-regions" }]);

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let ledger: Cronledger;
let server: AdminServer;
let browser: TestBrowser;

beforeAll(async () => {
  database = await createTestDatabase(import.meta.url);
  ledger = createCronledger({ database: { url: database.url, poolSize: 4 }, jobs: [reconcile, sync, export_], schedule: SCHEDULE, logger: silentLogger });
  await ledger.migrate();
  await ledger.tick();
  // crm.sync fails five times (one ticket each), reports.export once.
  for (let n = 0; n < 5; n++) await ledger.enqueue(sync, { n });
  await ledger.enqueue(export_, {});
  await ledger.enqueue(reconcile, {}, { queue: "reconciliation-backfill", runAt: new Date(Date.now() + 3_600_000) });
  await ledger.work({ once: true, queues: ["default", "integrations"] });
  server = await startAdminServer(ledger, { port: 0, token: TOKEN });
  // The browser has the password, but sends it only when a Basic challenge asks for it, as a person's browser would prompt.
  browser = await launchBrowser({ httpCredentials: { username: "admin", password: TOKEN } });
  await mkdir(ARTIFACTS, { recursive: true });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await ledger?.close();
  await database?.drop();
});

async function openPage(options: { width: number; dark?: boolean; path?: string }): Promise<Page> {
  const page = await browser.context.newPage();
  await page.setViewportSize({ width: options.width, height: 900 });
  await page.emulateMedia({ colorScheme: options.dark ? "dark" : "light" });
  const response = await page.goto(`${server.url}${options.path ?? "/admin/scheduler"}`);
  expect(response?.status()).toBe(200);
  return page;
}

describe("the Schedule page, read by a person", () => {
  it("logs in with a trailing slash as without: the browser answers the Basic challenge and lands on the page", async () => {
    const page = await openPage({ width: 1400, path: "/admin/scheduler/" });
    expect(new URL(page.url()).pathname).toBe("/admin/scheduler");
    expect(await page.locator("h1").innerText()).toBe("Schedule");
    await page.close();
  });

  it("shows reasons in relative times, the exact instant on hover", async () => {
    const page = await openPage({ width: 1400 });
    const reason = page.locator("#entries tr .reason").first();
    expect(await reason.innerText()).toMatch(/^created \d+s ago and no slot has come due since; its next slot is in \d+[smh]$/);
    const times = await reason.locator("time").evaluateAll((nodes) => nodes.map((node) => [node.getAttribute("title"), node.getAttribute("datetime")]));
    expect(times).toHaveLength(2);
    for (const [title, datetime] of times) {
      expect(title).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(datetime).toBe(title);
    }
    await page.close();
  });

  it("groups a job's repeated failures: count, first and last, its newest ticket open and the rest folded", async () => {
    const page = await openPage({ width: 1400 });
    const group = page.locator(`.failure-group[data-job="${sync.name}"]`);
    expect(await group.count()).toBe(1);
    expect(await group.locator(".group-head").innerText()).toMatch(new RegExp(`^${sync.name.replace(".", "\\.")} failed 5 times · first \\d+s ago · last \\d+s ago$`));
    const cards = group.locator(".card.failure");
    expect(await cards.count()).toBe(5);
    const visible = await cards.evaluateAll((nodes) => nodes.filter((node) => (node as unknown as { checkVisibility(): boolean }).checkVisibility()).length);
    expect(visible).toBe(1);
    expect(await group.locator("details.older > summary").innerText()).toBe(`4 earlier failures of ${sync.name}`);
    // A job that failed once is its card alone.
    expect(await page.locator(`.failure-group[data-job="${export_.name}"]`).count()).toBe(0);
    expect(await page.locator(".card.failure").filter({ hasText: export_.name }).isVisible()).toBe(true);
    await page.screenshot({ path: join(ARTIFACTS, "page-readability-1400-light.png"), fullPage: true });
    await page.close();
    const dark = await openPage({ width: 1400, dark: true });
    await dark.screenshot({ path: join(ARTIFACTS, "page-readability-1400-dark.png"), fullPage: true });
    await dark.close();
    expect(existsSync(join(ARTIFACTS, "page-readability-1400-dark.png"))).toBe(true);
  });

  it("fits a 390 px phone: the Queues table without sideways scrolling, identities wrapped at their separators only", async () => {
    for (const dark of [false, true]) {
      const page = await openPage({ width: 390, dark });
      const widths = (await page.evaluate(
        "(() => { const q = document.querySelector('#queues'); return { page: document.documentElement.scrollWidth, viewport: window.innerWidth, queues: q.scrollWidth, box: q.parentElement.clientWidth, right: q.getBoundingClientRect().right }; })()",
      )) as { page: number; viewport: number; queues: number; box: number; right: number };
      expect(widths.page).toBeLessThanOrEqual(widths.viewport);
      expect(widths.queues).toBeLessThanOrEqual(widths.box);
      expect(widths.right).toBeLessThanOrEqual(390);
      // Every count keeps its status beside it.
      const cells = (await page.evaluate(
        `[...document.querySelectorAll("#queues tr")].find((row) => row.textContent.includes("integrations")).querySelectorAll("td.num").values().map((cell) => getComputedStyle(cell, "::before").content + " " + cell.textContent).toArray()`,
      )) as string[];
      expect(cells).toContain('"failed" 5');

      // The characters each line of the identity ends with, the last excepted: separators only, never a hyphen inside a name.
      const lineEnds = (await page.evaluate(`(() => {
        const node = document.querySelector("#entries .identity");
        const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
        const chars = [];
        for (let text = walker.nextNode(); text; text = walker.nextNode()) {
          for (let i = 0; i < text.data.length; i++) {
            const range = document.createRange();
            range.setStart(text, i);
            range.setEnd(text, i + 1);
            chars.push({ char: text.data[i], top: range.getBoundingClientRect().top });
          }
        }
        return chars.filter((c, i) => i + 1 < chars.length && chars[i + 1].top > c.top + 2).map((c) => c.char);
      })()`)) as string[];
      expect(lineEnds.length).toBeGreaterThan(0);
      for (const char of lineEnds) expect("|/:,;@ ").toContain(char);
      await page.screenshot({ path: join(ARTIFACTS, `page-readability-390-${dark ? "dark" : "light"}.png`), fullPage: true });
      await page.close();
    }
  });
});

import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import type { BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdminHandler } from "../src/admin/handler.js";
import { startAdminServer } from "../src/admin/server.js";
import type { StatusDocument } from "../src/wire/status.js";
import { PRUNE_JOB, REAP_JOB } from "../src/runtime/chores.js";
import { chargeJob, createAdminFixture, LEAKED_PASSWORD, LEAKED_SECRETS, serveStripped, type AdminFixture } from "./support/admin-fixture.js";
import { launchBrowser, type TestBrowser } from "./support/browser.js";

const SCREENSHOT = join("test-results", "schedule-page.png");

let fixture: AdminFixture;
let launched: TestBrowser;
let browser: BrowserContext;

beforeAll(async () => {
  fixture = await createAdminFixture(import.meta.url);
  const start = new Date("2026-03-02T10:07:00Z");
  await fixture.ledger.tick({ now: start });
  await fixture.ledger.tick({ now: new Date(start.getTime() + 2 * 3_600_000) });
  await fixture.ledger.enqueue(chargeJob, { user: "ann", password: LEAKED_PASSWORD });
  await fixture.ledger.work({ once: true });

  // Debian's Chromium when installed, else the one the @sparticuz/chromium package ships (test/support/browser.ts).
  launched = await launchBrowser({
    extraHTTPHeaders: { authorization: `Bearer ${fixture.token}` },
    viewport: { width: 1280, height: 900 },
  });
  browser = launched.context;
});

afterAll(async () => {
  await launched?.close();
  await fixture?.dispose();
});

describe("the Schedule page in headless Chromium", () => {
  it("loads and shows every entry, the broken ones and the redacted failures", async () => {
    const page = await browser.newPage();
    const response = await page.goto(`${fixture.server.url}/admin/scheduler`);
    expect(response?.status()).toBe(200);
    expect(await page.title()).toBe("Schedule · cronledger · default");

    const rows = page.locator("#entries tbody tr");
    expect(await rows.count()).toBe(fixture.ledger.entries.length + 2);
    for (const entry of fixture.ledger.entries) {
      const row = page.locator(`#entries tr[data-identity="${entry.identity}"]`);
      expect(await row.count(), entry.identity).toBe(1);
      expect(await row.innerText()).toContain(entry.jobName);
      expect(await row.innerText()).toContain(entry.cron.source);
    }
    const broken = page.locator(".broken-entry");
    expect(await broken.count()).toBe(2);
    const brokenText = await broken.allInnerTexts();
    expect(brokenText.join("\n")).toContain("inventory.sync");
    expect(brokenText.join("\n")).toContain("never_matches");
    // The quarantined entry is broken; the never-firing one only warned, and the header counts them so.
    expect(await page.locator("#entries tr.broken").count()).toBe(1);
    expect(await page.locator("#entries tr.warned").count()).toBe(1);
    expect(await page.locator("main > p.muted").first().innerText()).toContain("1 broken · 1 with warnings");

    const failure = page.locator(".failure");
    expect(await failure.count()).toBe(1);
    expect(await failure.innerText()).toContain("billing.charge");
    const visible = await page.locator("body").innerText();
    for (const secret of LEAKED_SECRETS) expect(visible).not.toContain(secret);

    await mkdir("test-results", { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(existsSync(SCREENSHOT)).toBe(true);
  });

  it("marks the reap and prune chores, and only them", async () => {
    const page = await browser.newPage();
    await page.goto(`${fixture.server.url}/admin/scheduler`);
    const chores = page.locator("#entries tr.chore");
    expect(await chores.count()).toBe(2);
    const texts = await chores.allInnerTexts();
    expect(texts[0]).toContain(REAP_JOB);
    expect(texts[1]).toContain(PRUNE_JOB);
    for (const text of texts) expect(text).toMatch(/\bchore\b/);
    expect(await page.locator("#entries tr.chore .badge.chore").count()).toBe(2);
    expect(await page.locator("#entries tr:not(.chore) .badge.chore").count()).toBe(0);
    expect(await page.locator("#entries tr.chore .badge.chore").first().isVisible()).toBe(true);
    expect(await page.locator("body").innerText()).toContain(`${fixture.ledger.entries.length} entries + 2 chores`);
  });

  it("marks the quarantined entry from its ledger row and lists the jobs waiting for a worker that knows them", async () => {
    await fixture.rows(sql`insert into cronledger.job_queue (job_name, payload) values ('ghost.waiting', '{}'::jsonb)`);
    const page = await browser.newPage();
    await page.goto(`${fixture.server.url}/admin/scheduler`);
    const sync = page.locator("#entries tr", { hasText: "inventory.sync" });
    expect(await sync.locator(".badge.state-quarantined").innerText()).toBe("quarantined");
    // The instant reads relative to the database clock, the exact one on hover.
    expect(await sync.locator(".reason").innerText()).toMatch(/^left out of scheduler passes (?:for another \d+[smhd]|until \d+[smhd] ago): /);
    expect(await sync.locator(".reason time").first().getAttribute("title")).toMatch(/^\d{4}-\d\d-\d\dT\S+Z$/);
    const waiting = page.locator("#waiting-for-worker tbody tr", { hasText: "ghost.waiting" });
    expect(await waiting.count()).toBe(1);
    expect(await waiting.locator("td.num").innerText()).toBe("1");
    expect(await waiting.locator("time").getAttribute("datetime")).toMatch(/^\d{4}-\d\d-\d\dT/);
    await page.close();
  });

  it("retries a failure from its button and comes back to the page", async () => {
    const page = await browser.newPage();
    await page.goto(`${fixture.server.url}/admin/scheduler`);
    const queuedBefore = Number(await page.locator("#queues tbody tr:last-child td").nth(1).innerText());
    // Back on the page at the ticket, which now says what became of it (the one-off notice leaves the address).
    await Promise.all([page.waitForURL(/\/admin\/scheduler#failure-\d+$/), page.locator(".failure button").first().click()]);
    const queuedAfter = Number(await page.locator("#queues tbody tr:last-child td").nth(1).innerText());
    expect(queuedAfter).toBe(queuedBefore + 1);
  });
});

/** Opens the page at `baseUrl` (what precedes /admin/scheduler in the browser), and follows its links and its retry form. */
async function pageWorksUnder(baseUrl: string): Promise<void> {
  // A fresh failure, so a ticket offers Retry (a retried one no longer does).
  await fixture.ledger.enqueue(chargeJob, { user: "ann", password: LEAKED_PASSWORD });
  await fixture.ledger.work({ once: true });
  const page = await browser.newPage();
  const response = await page.goto(`${baseUrl}/admin/scheduler`);
  expect(response?.status()).toBe(200);
  // The page has no <base>, so the browser resolves against the page's own URL.
  const targets = [...(await page.locator("a").all()).map((link) => link.getAttribute("href")), ...(await page.locator("form").all()).map((form) => form.getAttribute("action"))];
  const urls = (await Promise.all(targets)).map((target) => new URL(target ?? "(missing)", page.url()).href);
  expect(urls.length).toBeGreaterThanOrEqual(3);
  // Under the page: its JSON and actions (scheduler/...), and the page itself filtered by state (scheduler?state=...).
  for (const url of urls) expect(url.startsWith(`${baseUrl}/admin/scheduler/`) || url.startsWith(`${baseUrl}/admin/scheduler?`), url).toBe(true);

  await Promise.all([page.waitForURL(`${baseUrl}/admin/scheduler/status`), page.getByRole("link", { name: "status" }).click()]);
  const status = JSON.parse(await page.locator("body").innerText()) as StatusDocument;
  expect(status.entries.filter((entry) => entry.chore).map((entry) => entry.job)).toEqual([REAP_JOB, PRUNE_JOB]);
  await page.goBack();
  await Promise.all([page.waitForURL(`${baseUrl}/admin/scheduler/failures`), page.getByRole("link", { name: "failures" }).click()]);
  expect(await page.locator("body").innerText()).toContain(chargeJob.name);
  await page.goBack();
  await Promise.all([page.waitForURL(new RegExp(`^${baseUrl}/admin/scheduler#failure-\\d+$`)), page.locator(".failure button").first().click()]);
  expect(await page.locator("h1").innerText()).toBe("Schedule");
  await page.close();
}

describe("the Schedule page under a path prefix", () => {
  it("keeps every link and form under the handler's basePath", async () => {
    const server = await startAdminServer(fixture.ledger, { port: 0, token: fixture.token, basePath: "/ops" });
    try {
      expect(server.url.endsWith("/ops")).toBe(true);
      await pageWorksUnder(server.url);
    } finally {
      await server.close();
    }
  });

  it("keeps the prefix without basePath when the framework strips it before the handler (Express app.use, Hono mount)", async () => {
    const server = await serveStripped(createAdminHandler(fixture.ledger, { token: fixture.token }), "/ops");
    try {
      await pageWorksUnder(server.url);
    } finally {
      await server.close();
    }
  });
});

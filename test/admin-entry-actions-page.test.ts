import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdminFixture, okJob, type AdminFixture } from "./support/admin-fixture.js";
import { launchBrowser, type TestBrowser } from "./support/browser.js";

/** The Schedule page's pause, resume and run-now buttons in headless Chromium, at a desktop and a phone width. */
let fixture: AdminFixture;
const browsers: TestBrowser[] = [];

beforeAll(async () => {
  fixture = await createAdminFixture(import.meta.url);
  await fixture.ledger.tick({ now: new Date("2026-03-02T10:07:00Z") });
});

afterAll(async () => {
  for (const browser of browsers) await browser.close();
  await fixture?.dispose();
});

describe.each([
  { width: 1400, height: 1000, label: "desktop" },
  { width: 390, height: 844, label: "phone" },
])("entry actions on the Schedule page at $width px", ({ width, height, label }) => {
  it("pauses with a note after a confirmation, shows who and why, resumes, and runs the entry now once", async () => {
    const launched = await launchBrowser({ extraHTTPHeaders: { authorization: `Bearer ${fixture.token}` }, viewport: { width, height } });
    browsers.push(launched);
    const page = await launched.context.newPage();
    const entry = fixture.ledger.entries.find((candidate) => candidate.jobName === okJob.name && candidate.entryKey === undefined);
    if (entry === undefined) throw new Error("the fixture's every-15-minutes entry is missing");
    const row = () => page.locator(`#entries tr[data-identity="${entry.identity}"]`);
    await page.goto(`${fixture.server.url}/admin/scheduler`);

    // The confirmation is closed until asked for: the button that pauses is not visible yet.
    const pauseForm = row().locator("details", { hasText: "Pause…" });
    expect(await pauseForm.locator("button").isVisible()).toBe(false);
    await pauseForm.locator("summary").click();
    expect(await pauseForm.locator("button").isVisible()).toBe(true);
    await pauseForm.locator('input[name="note"]').fill(`billing API down (${label})`);
    await pauseForm.locator('input[name="by"]').fill("oncall:dana");
    await mkdir("test-results", { recursive: true });
    await page.screenshot({ path: join("test-results", `entry-actions-confirm-${width}.png`), fullPage: true });
    await Promise.all([page.waitForURL(/\/admin\/scheduler(#entries)?$/), pauseForm.locator("button").click()]);

    expect(await page.locator(".notice").innerText()).toContain(`Paused ${entry.identity}`);
    expect(await row().locator(".badge.state-paused").innerText()).toBe("paused");
    const reason = await row().locator(".reason").innerText();
    expect(reason).toContain("paused by oncall:dana");
    expect(reason).toContain(`billing API down (${label})`);
    const shot = join("test-results", `entry-actions-paused-${width}.png`);
    await page.screenshot({ path: shot, fullPage: true });
    expect(existsSync(shot)).toBe(true);

    // Run now: confirmed once, it queues one job with the entry's schedule key; the notice names it.
    const before = await fixture.rows<{ n: number }>(sql`select count(*)::int as n from cronledger.job_queue where schedule_key = ${entry.ledgerKey}`);
    const runForm = row().locator("details", { hasText: "Run now…" });
    await runForm.locator("summary").click();
    await Promise.all([page.waitForURL(/\/admin\/scheduler(#entries)?$/), runForm.locator("button").click()]);
    expect(await page.locator(".notice").innerText()).toMatch(new RegExp(`Run now of .+: job #\\d+ queued\\.`));
    const after = await fixture.rows<{ n: number }>(sql`select count(*)::int as n from cronledger.job_queue where schedule_key = ${entry.ledgerKey}`);
    expect((after[0]?.n ?? 0) - (before[0]?.n ?? 0)).toBe(1);

    // Resume, confirmed: the entry is no longer paused.
    const resumeForm = row().locator("details", { hasText: "Resume…" });
    await resumeForm.locator("summary").click();
    await Promise.all([page.waitForURL(/\/admin\/scheduler(#entries)?$/), resumeForm.locator("button").click()]);
    expect(await page.locator(".notice").innerText()).toContain(`Resumed ${entry.identity}`);
    expect(await row().locator(".badge.state-paused").count()).toBe(0);
    expect(await row().locator("details", { hasText: "Pause…" }).count()).toBe(1);
    // The chores have no buttons.
    expect(await page.locator("#entries tr.chore .entry-actions").count()).toBe(0);
    await page.close();
  }, 120_000);
});

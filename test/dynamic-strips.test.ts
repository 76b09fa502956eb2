import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdminHandler } from "../src/admin/handler.js";
import { startAdminServer } from "../src/admin/server.js";
import type { Cronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import { launchBrowser } from "./support/browser.js";
import { createTestStore, rows, type TestStore } from "./support/ledger.js";

// The run strips of dynamic entries (`ledger.schedules`, issue 33): a page of them in the status carries each entry's
// recent runs as a static entry's strip does, read for that page's keys only in one statement, and the Schedule page
// draws them in the dynamic entries' table, beside the same Pause/Resume/Run now buttons a static entry has.
const sync = defineJob({ name: "tenant.sync", run: () => {} });
const flaky = defineJob({
  name: "tenant.flaky",
  retry: { maxAttempts: 1, baseMs: 1_000, capMs: 1_000, jitter: 0 },
  run: () => {
    throw new Error("upstream refused");
  },
});
const MINUTE = 60_000;
const T0 = Date.parse("2026-06-01T00:00:00.000Z");
const TOKEN = "dynamic-strips-token-0123456789";
const STRIP = 20;

describe("the run strips of dynamic entries", () => {
  let store: TestStore;
  let ledger: Cronledger;

  beforeAll(async () => {
    store = await createTestStore("postgres", "dynamic_strips");
    ledger = await store.open({ jobs: [sync, flaky], chores: false });
    await ledger.schedules.upsertMany(
      [
        { key: "tenant:1:sync", job: sync, cron: "* * * * *" },
        { key: "tenant:2:flaky", job: flaky, cron: "*/10 * * * *" },
        { key: "tenant:3:sync", job: sync, cron: "0 * * * *" },
        { key: "tenant:4:sync", job: sync, cron: "* * * * *" },
      ],
      { now: new Date(T0) },
    );
    // tenant:4 is paused from the start: its slots are recorded as skipped, never run.
    await ledger.pause("tenant:4:sync", { note: "suspended" });
    // 25 minutes of slots, each fired by a pass at its instant and its job run before the next.
    for (let minute = 1; minute <= 25; minute += 1) {
      await ledger.tick({ now: new Date(T0 + minute * MINUTE + 500) });
      await ledger.work({ once: true });
    }
  }, 120_000);
  afterAll(async () => {
    await store.dispose();
  });

  it("come with a page of the status when asked: each entry's newest runs, newest first, as a static entry's strip", async () => {
    const status = await ledger.status({ dynamic: { prefix: "tenant:", runs: STRIP } });
    const byKey = new Map(status.dynamic.page?.entries.map((entry) => [entry.key, entry.recentRuns]));
    const every = byKey.get("tenant:1:sync") ?? [];
    expect(every.map((run) => run.scheduledFor.getTime())).toEqual(Array.from({ length: STRIP }, (_, index) => T0 + (25 - index) * MINUTE));
    expect(every.every((run) => run.kind === "succeeded")).toBe(true);
    // The job ids are the entry's own jobs, the newest 20 of its 25.
    const jobs = await rows<{ id: number }>(
      ledger,
      sql`select id::float8 as id from cronledger.jobs where schedule_key = ${ledger.schedules.ledgerKey("tenant:1:sync")} order by scheduled_for desc limit ${STRIP}`,
    );
    expect(every.map((run) => run.jobId)).toEqual(jobs.map((job) => job.id));
    const failed = byKey.get("tenant:2:flaky") ?? [];
    expect(failed.map((run) => [run.kind, run.scheduledFor.toISOString(), run.error])).toEqual([
      ["failed", "2026-06-01T00:20:00.000Z", "Error: upstream refused"],
      ["failed", "2026-06-01T00:10:00.000Z", "Error: upstream refused"],
    ]);
    expect(byKey.get("tenant:3:sync")).toEqual([]);
    const paused = byKey.get("tenant:4:sync") ?? [];
    expect(paused).toHaveLength(STRIP);
    expect(paused.every((run) => run.kind === "skipped" && run.outcome === "paused")).toBe(true);

    // Not asked for: no strip (null), and nothing more read.
    const plain = await ledger.status({ dynamic: { prefix: "tenant:" } });
    expect(plain.dynamic.page?.entries.map((entry) => entry.recentRuns)).toEqual([null, null, null, null]);
  });

  it("are drawn on the Schedule page for its page of dynamic entries, as the static entries' strips", async () => {
    const handler = createAdminHandler(ledger, { token: TOKEN });
    const page = await (await handler(new Request("http://localhost/admin/scheduler?prefix=tenant:", { headers: { authorization: `Bearer ${TOKEN}` } }))).text();
    const row = (key: string) => page.match(new RegExp(`<tr data-key="${key}"[\\s\\S]*?</tr>`))?.[0] ?? "";
    expect(page).toMatch(/<th>State<\/th><th>Recent runs<\/th><th>Next fire<\/th>/);
    // Oldest on the left, like the slots; each cell names its job (late: the slots are months before the runs).
    const every = row("tenant:1:sync");
    expect(every).toContain(`<span class="strip" role="img" aria-label="last ${STRIP} runs: ${STRIP} succeeded">`);
    const cells = [...every.matchAll(/<span class="run run-succeeded[^"]*" data-job="(\d+)"/g)].map((match) => Number(match[1]));
    const newest = (await ledger.status({ dynamic: { prefix: "tenant:1:", runs: STRIP } })).dynamic.page?.entries[0]?.recentRuns ?? [];
    expect(cells).toEqual(newest.map((run) => run.jobId).reverse());
    expect(row("tenant:2:flaky")).toContain(`aria-label="last 2 runs: 2 failed"`);
    expect(row("tenant:2:flaky")).toContain("upstream refused");
    expect(row("tenant:3:sync")).toContain(`<span class="strip empty muted">no runs yet</span>`);
    expect(row("tenant:4:sync")).toContain(`aria-label="last ${STRIP} runs: ${STRIP} skipped"`);
    expect(row("tenant:4:sync")).toContain("skipped (paused), never run");

    // The entry's buttons as a static entry's, named by its key: Pause… and Run now… on a running entry, Resume… on a paused one.
    expect(every).toMatch(/<form method="post" action="scheduler\/entries\/pause"><input type="hidden" name="entry" value="tenant:1:sync">/);
    expect(every).toContain(`action="scheduler/entries/trigger"`);
    expect(row("tenant:4:sync")).toMatch(/<form method="post" action="scheduler\/entries\/resume"><input type="hidden" name="entry" value="tenant:4:sync">/);
    // The form's own hidden fields are posted, as a browser would: it comes back to the same key prefix search.
    const resumeForm = row("tenant:4:sync").match(/<form method="post" action="scheduler\/entries\/resume">[\s\S]*?<\/form>/)?.[0] ?? "";
    const hidden = Object.fromEntries([...resumeForm.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((match) => [match[1], match[2]]));
    expect(hidden).toEqual({ entry: "tenant:4:sync", return_prefix: "tenant:" });
    const resumed = await handler(
      new Request("http://localhost/admin/scheduler/entries/resume", {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/x-www-form-urlencoded", accept: "text/html" },
        body: new URLSearchParams({ ...hidden, by: "ops" }).toString(),
      }),
    );
    expect([resumed.status, resumed.headers.get("location")]).toEqual([303, "../../scheduler?resumed=dynamic%3Atenant%3A4%3Async&changed=1&prefix=tenant%3A#dynamic"]);
    expect((await ledger.schedules.get("tenant:4:sync"))?.paused).toBeNull();
    await ledger.pause("tenant:4:sync", { note: "suspended" });
  });
  it("fit a 390 px phone in real Chromium: the dynamic entries' rows become cards, strips included, no sideways scrolling", async () => {
    const server = await startAdminServer(ledger, { port: 0, token: TOKEN });
    const browser = await launchBrowser({ extraHTTPHeaders: { authorization: `Bearer ${TOKEN}` } });
    try {
      const page = await browser.context.newPage();
      await page.setViewportSize({ width: 390, height: 900 });
      expect((await page.goto(`${server.url}/admin/scheduler?prefix=tenant:`))?.status()).toBe(200);
      // (Expressions run in the page; this project's TypeScript has no DOM types.)
      const widths = (await page.evaluate("({ page: document.documentElement.scrollWidth, viewport: window.innerWidth })")) as { page: number; viewport: number };
      // Nothing sticks out: neither the dynamic rows nor a failure's idempotency key (`<namespace>#dynamic|dynamic:<key>@<slot>`).
      const wide = await page.evaluate("[...document.querySelectorAll('main *')].filter((e) => e.getBoundingClientRect().right > window.innerWidth).map((e) => e.tagName + ' ' + (e.textContent || '').slice(0, 60))");
      expect(wide).toEqual([]);
      expect(widths.page).toBeLessThanOrEqual(widths.viewport);
      const strip = page.locator(`#dynamic-entries tr[data-key="tenant:1:sync"] .strip`);
      expect(await strip.isVisible()).toBe(true);
      const box = await strip.boundingBox();
      expect((box?.x ?? 0) + (box?.width ?? 0)).toBeLessThanOrEqual(390);
    } finally {
      await browser.close();
      await server.close();
    }
  });

  it("are read for the page only: one statement more whatever is stored, none for an empty page", async () => {
    const statementsOf = async (read: () => Promise<unknown>) => {
      const before = ledger.database.statements.count;
      await read();
      return ledger.database.statements.count - before;
    };
    const withoutStrips = await statementsOf(() => ledger.status({ dynamic: { prefix: "tenant:", limit: 2 } }));
    expect(await statementsOf(() => ledger.status({ dynamic: { prefix: "tenant:", limit: 2, runs: STRIP } }))).toBe(withoutStrips + 1);
    // A page of two of the four: the strips of those two only, the newest runs of tenant:1 and tenant:2.
    const page = await ledger.status({ dynamic: { prefix: "tenant:", limit: 2, runs: STRIP } });
    expect(page.dynamic.page?.entries.map((entry) => [entry.key, entry.recentRuns?.length])).toEqual([
      ["tenant:1:sync", STRIP],
      ["tenant:2:flaky", 2],
    ]);
    // 1,000 more entries stored, each with a run: the page's strips cost the same one statement.
    await ledger.schedules.upsertMany(
      Array.from({ length: 1_000 }, (_, index) => ({ key: `bulk:${String(index).padStart(4, "0")}`, job: sync, cron: "* * * * *" })),
      { now: new Date(T0 + 25 * MINUTE) },
    );
    await ledger.tick({ now: new Date(T0 + 26 * MINUTE + 500) });
    expect(await statementsOf(() => ledger.status({ dynamic: { prefix: "tenant:", limit: 2, runs: STRIP } }))).toBe(withoutStrips + 1);
    expect(await statementsOf(() => ledger.status({ dynamic: { prefix: "nobody:", runs: STRIP } }))).toBe(withoutStrips);
  });

});

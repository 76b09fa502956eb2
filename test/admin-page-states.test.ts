// The Schedule page's entry states as an operator reads them (issue 34, item 7), rendered from the status of a ledger on a
// real PostgreSQL: a paused entry shows no next run, a `skip` entry stays running while its job runs, the header's broken
// count agrees with the chips, no label counts down to "in 0s", and a pause asks for no note the API does not need.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PAGE_ENTRIES, renderSchedulePage } from "../src/admin/page.js";
import { relative, textWithInstants } from "../src/admin/page-times.js";
import type { Cronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import type { SchedulerStatus } from "../src/status/model.js";
import { createTestStore, rows, type TestStore } from "./support/ledger.js";

const MINUTE = 60_000;
const T0 = Date.parse("2026-03-02T10:00:00.000Z");
const at = (minutes: number, seconds = 1) => new Date(T0 + minutes * MINUTE + seconds * 1000);

const sync = defineJob({ name: "states.sync", run: () => {} });
const rollup = defineJob({ name: "states.rollup", run: () => {} });
const leap = defineJob({ name: "states.leap", run: () => {} });
const broken = defineJob({ name: "states.broken", run: () => {} });

let store: TestStore;
let ledger: Cronledger;

beforeAll(async () => {
  store = await createTestStore("postgres", "admin_page_states");
  ledger = await store.open({
    jobs: [sync, rollup, leap, broken],
    chores: false,
    invalidEntries: "quarantine",
    schedule: [
      { job: sync, cron: "* * * * *", key: "sync", overlap: "skip" },
      { job: rollup, cron: "* * * * *", key: "rollup" },
      // 30 February: valid, but it never fires (a never_matches warning, not a broken entry).
      { job: leap, cron: "0 0 30 2 *", key: "leap" },
      { job: broken, cron: "61 * * * *", key: "broken" },
    ],
  });
});

afterAll(async () => {
  await store?.dispose();
});

/** The page as the handler renders it, with strips and upcoming lists, judged at `now`. */
async function page(now: Date): Promise<{ status: SchedulerStatus; html: string; row(job: string): string }> {
  const status = await ledger.status({ now, runs: { limit: 20, page: 1, perPage: PAGE_ENTRIES } });
  const html = renderSchedulePage(status, [], { upcoming: ledger.entries, refreshSeconds: 0 });
  const row = (job: string) => {
    const start = html.indexOf(`<tr class="`, html.indexOf(`<strong>${job}</strong>`) - 400);
    return html.slice(start, html.indexOf("</tr>", start));
  };
  return { status, html, row };
}

const stateOf = (status: SchedulerStatus, job: string) => status.entries.find((entry) => entry.jobName === job)?.state;

describe("the Schedule page's entry states", () => {
  it("keeps a skip entry running while its job runs, slot after skipped slot, on the page and in the status", async () => {
    await ledger.tick({ now: at(0) });
    await ledger.tick({ now: at(1) });
    // Its minute-1 job runs (as a worker that claimed it would leave it).
    await rows(ledger, sql`update cronledger.job_queue set status = 'running', attempts = 1, started_at = now(), heartbeat_at = now(), locked_by = 'w1' where job_name = ${sync.name}`);
    for (const minute of [2, 3, 4]) {
      const report = await ledger.tick({ now: at(minute) });
      expect(report.skipped.map((slot) => slot.jobName), `minute ${minute}`).toEqual([sync.name]);
      const { status, row } = await page(at(minute, 2));
      expect(stateOf(status, sync.name), `minute ${minute}, with strips`).toBe("running");
      expect(row(sync.name)).toContain(`<span class="badge state-running">running</span>`);
      expect(stateOf(await ledger.status({ now: at(minute, 2) }), sync.name), `minute ${minute}, without strips`).toBe("running");
    }
    // The job ends: the entry is ok again, its latest run the last skipped slot.
    await rows(ledger, sql`delete from cronledger.job_queue where job_name = ${sync.name}`);
    expect(stateOf(await ledger.status({ now: at(4, 3) }), sync.name)).toBe("ok");
  });

  it("shows a paused entry with no next run and no upcoming slots, and asks no note to pause", async () => {
    const before = await page(at(4, 50));
    expect(before.row(rollup.name)).toMatch(/<td data-label="Next run"><time [^>]*>in 10s<\/time><details class="upcoming">/);
    // The pause form: a note is optional, as in the API and the CLI.
    const form = before.row(rollup.name).slice(before.row(rollup.name).indexOf('action="scheduler/entries/pause"'));
    expect(form).toContain('name="note"');
    expect(form.slice(0, form.indexOf("</form>"))).not.toMatch(/\brequired\b/);
    expect(await ledger.pause("rollup", { by: "alice" })).toMatchObject({ paused: true, note: null });

    const { status, row } = await page(at(4, 51));
    expect(stateOf(status, rollup.name)).toBe("paused");
    const nextRun = row(rollup.name).slice(row(rollup.name).indexOf('data-label="Next run"'));
    expect(nextRun).toContain("none while paused");
    expect(nextRun).not.toMatch(/<time|class="upcoming"/);
    await ledger.resume("rollup");
  });

  it("counts as broken in the header what the chips and the section call broken: a never_matches warning is not", async () => {
    const { status, html, row } = await page(at(5, 2));
    expect(status.invalid).toHaveLength(1);
    expect(status.broken.map((entry) => entry.jobName).sort()).toEqual([broken.name, leap.name]);
    expect(html).toMatch(/<a href="#broken"><span class="badge state-invalid">invalid<\/span> 1<\/a>/);
    expect(html).toMatch(/ · 1 broken · 1 with warnings\n/);
    expect(row(leap.name)).toMatch(/^<tr class="warned/);
    expect(html).toMatch(/class="card broken-entry warning-only"[^>]*>\s*<strong>states\.leap<\/strong> <span class="badge warning">/);
  });

  it("says due now, never in 0s, for an instant within the second the page was read", async () => {
    const now = new Date(T0);
    expect(relative(now, now)).toBe("due now");
    expect(relative(new Date(T0 + 400), now)).toBe("due now");
    expect(relative(new Date(T0 + 9_000), now)).toBe("in 9s");
    const iso = now.toISOString();
    expect(textWithInstants(`job #12 for slot ${iso} is running`, now)).toMatch(/for slot <time [^>]*>due now<\/time> is running/);
    expect(textWithInstants(`the next attempt is due at ${iso}`, now)).toMatch(/is due <time [^>]*>now<\/time>$/);
    expect(textWithInstants(`running since ${iso}`, now)).toMatch(/running <time [^>]*>just now<\/time>$/);
    // On the page: the rollup entry's slot read at its own fire time.
    await ledger.tick({ now: at(6, 0) });
    await rows(ledger, sql`update cronledger.job_queue set status = 'running', attempts = 1, started_at = ${at(6, 0).toISOString()}::timestamptz, heartbeat_at = now(), locked_by = 'w1' where job_name = ${rollup.name}`);
    const { html, row } = await page(at(6, 0));
    expect(row(rollup.name)).toContain("running");
    expect(html).not.toMatch(/in 0s|0s ago/);
  });
});

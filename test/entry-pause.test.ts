import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createCronledger } from "../src/cronledger.js";
import { silentLogger } from "../src/log.js";
import { runCli } from "./support/child.js";
import { createTestDatabase } from "./support/database.js";
import { renderSchedulePage } from "../src/admin/page.js";
import { EntryNotFoundError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import { defineSchedule } from "../src/schedule/define-schedule.js";
import { statusDocument } from "../src/wire/status.js";
import { BACKENDS, createTestStore, rows, type TestStore } from "./support/ledger.js";

const MINUTE = 60_000;
const T0 = Date.parse("2026-03-02T10:00:00.000Z");
const at = (minutes: number, seconds = 1) => new Date(T0 + minutes * MINUTE + seconds * 1000);

const rollup = defineJob({ name: "reports.rollup", run: () => {} });
const digest = defineJob({ name: "email.digest", run: () => {} });
const schedule = defineSchedule([
  { job: rollup, cron: "* * * * *", key: "minutely" },
  { job: digest, cron: "* * * * *" },
]);

interface RunRow {
  status: string;
  outcome: string | null;
  slot_ms: number;
  last_error: string | null;
}

describe.each(BACKENDS)("pausing an entry on %s", (backend) => {
  let store: TestStore;
  afterEach(async () => {
    await store?.dispose();
    store = undefined as unknown as TestStore;
  });

  it("records a paused entry's slots as skipped, moves its ledger, shows it paused, and resumes with the next slot only", async () => {
    store = await createTestStore(backend, `pause_${backend}`);
    const ledger = await store.open({ jobs: [rollup, digest], schedule });
    const runsOf = (jobName: string) =>
      rows<RunRow>(
        ledger,
        sql`select status, outcome, (extract(epoch from scheduled_for) * 1000)::float8 as slot_ms, last_error from cronledger.jobs where job_name = ${jobName}
            order by scheduled_for`,
      );

    await ledger.tick({ now: at(0) });
    expect((await ledger.tick({ now: at(1) })).enqueued.map((slot) => slot.jobName).sort()).toEqual(["email.digest", "reports.rollup"]);

    const paused = await ledger.pause("minutely", { note: "reports DB is failing over", by: "alice" });
    expect(paused).toMatchObject({ jobName: "reports.rollup", paused: true, changed: true, pausedBy: "alice", note: "reports DB is failing over" });
    // A second pause keeps the instant, replaces who and the note, and says nothing changed.
    const again = await ledger.pause("minutely", { note: "still failing over", by: "bob" });
    expect(again).toMatchObject({ changed: false, pausedBy: "bob", note: "still failing over", pausedAt: paused.pausedAt });

    const second = await ledger.tick({ now: at(2) });
    expect(second.enqueued.map((slot) => slot.jobName)).toEqual(["email.digest"]);
    expect(second.skipped).toEqual([
      expect.objectContaining({ jobName: "reports.rollup", reason: "paused", slot: new Date(T0 + 2 * MINUTE), detail: "paused by bob: still failing over" }),
    ]);
    expect((await ledger.tick({ now: at(3) })).skipped).toHaveLength(1);

    // Every slot is accounted for: fired, or recorded as skipped with why.
    expect(await runsOf("reports.rollup")).toEqual([
      { status: "queued", outcome: null, slot_ms: T0 + MINUTE, last_error: null },
      { status: "skipped", outcome: "paused", slot_ms: T0 + 2 * MINUTE, last_error: "paused by bob: still failing over" },
      { status: "skipped", outcome: "paused", slot_ms: T0 + 3 * MINUTE, last_error: "paused by bob: still failing over" },
    ]);

    const status = await ledger.status({ now: at(3, 30), runs: { limit: 5, page: 1, perPage: 10 } });
    const entry = status.entries.find((candidate) => candidate.jobName === "reports.rollup");
    expect(entry?.state).toBe("paused");
    expect(entry?.reason).toContain("paused by bob");
    expect(entry?.reason).toContain("still failing over");
    expect(entry?.pause).toMatchObject({ by: "bob", note: "still failing over" });
    expect(entry?.lastEnqueuedSlot).toEqual(new Date(T0 + 3 * MINUTE));
    expect(entry?.recentRuns?.map((run) => [run.kind, run.outcome])).toEqual([
      ["skipped", "paused"],
      ["skipped", "paused"],
      ["queued", null],
    ]);
    expect(statusDocument(status).entries.find((doc) => doc.job === "reports.rollup")?.pause).toMatchObject({ by: "bob", note: "still failing over" });
    expect(status.entries.find((candidate) => candidate.jobName === "email.digest")?.state).not.toBe("paused");
    // The page's strip says so on each skipped run.
    const html = renderSchedulePage(status, []);
    expect(html).toContain("skipped (paused), never run");
    expect(html).toContain("paused by bob: still failing over");
    const metrics = (await ledger.metrics?.registry.metrics()) ?? "";
    expect(metrics).toContain('cronledger_schedule_slots_total{outcome="skipped_paused"} 2');
    expect(metrics).toMatch(/cronledger_schedule_entries\{state="paused"\} 1/);

    // Resumed at 3:30, with no pass during minutes 4 and 5: the pass at 5:01 fires slot 5 alone, never 4.
    expect(await ledger.resume("reports.rollup", { by: "alice" })).toMatchObject({ paused: false, changed: true, pausedBy: "bob" });
    expect(await ledger.resume("reports.rollup")).toMatchObject({ changed: false });
    const resumed = await ledger.tick({ now: at(5) });
    expect(resumed.skipped).toEqual([]);
    expect(resumed.enqueued.filter((slot) => slot.jobName === "reports.rollup").map((slot) => slot.slot)).toEqual([new Date(T0 + 5 * MINUTE)]);
    expect((await runsOf("reports.rollup")).map((run) => run.status)).toEqual(["queued", "skipped", "skipped", "queued"]);
    expect((await ledger.status({ now: at(5, 30) })).entries.find((candidate) => candidate.jobName === "reports.rollup")?.state).not.toBe("paused");
  });

  it("refuses an unknown entry with a did-you-mean over the schedule's entries", async () => {
    store = await createTestStore(backend, `pause_unknown_${backend}`);
    const ledger = await store.open({ jobs: [rollup, digest], schedule });
    const error = await ledger.pause("minutly").catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(EntryNotFoundError);
    expect((error as EntryNotFoundError).code).toBe("entry_not_found");
    expect((error as Error).message).toContain('Did you mean "minutely"?');
    await expect(ledger.resume("nothing.like.it")).rejects.toThrow(/No schedule entry "nothing.like.it"/);
  });
});

describe("cronledger pause / resume / trigger", () => {
  const CONFIG = fileURLToPath(new URL("./fixtures/cli/pause.config.mjs", import.meta.url));
  let database: { url: string; drop: () => Promise<void> };
  let env: NodeJS.ProcessEnv;
  beforeAll(async () => {
    database = await createTestDatabase(import.meta.url);
    env = { ...process.env, DATABASE_URL: database.url, USER: "carol" };
    const ledger = createCronledger({ database: database.url, logger: silentLogger });
    await ledger.migrate();
    await ledger.close();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it("pauses with a note and who, shows it in status, resumes, and refuses an unknown entry with a did-you-mean", async () => {
    const paused = await runCli(["pause", "hourly", "--note", "vendor API down", "--config", CONFIG], { env });
    expect(paused.code, paused.stderr).toBe(0);
    expect(paused.stdout).toMatch(/^Paused cli\.rollup\|hourly\|.* by cli:carol \(note: vendor API down\)/);

    const status = await runCli(["status", "--json", "--config", CONFIG], { env });
    const entry = (JSON.parse(status.stdout) as { entries: { job: string; state: string; pause: unknown }[] }).entries.find((doc) => doc.job === "cli.rollup");
    expect(entry).toMatchObject({ state: "paused", pause: { by: "cli:carol", note: "vendor API down" } });
    const text = await runCli(["status", "--config", CONFIG], { env });
    expect(text.stdout).toMatch(/paused.*paused by cli:carol/);

    const json = await runCli(["resume", "cli.rollup", "--by", "dave", "--json", "--config", CONFIG], { env });
    expect(JSON.parse(json.stdout)).toMatchObject({ version: 1, job: "cli.rollup", paused: false, changed: true, paused_by: "cli:carol", note: "vendor API down" });

    // Run now, twice with one request id: one job.
    const triggered = await runCli(["trigger", "hourly", "--request-id", "cli-1", "--json", "--config", CONFIG], { env });
    expect(triggered.code, triggered.stderr).toBe(0);
    const run = JSON.parse(triggered.stdout) as { job_id: number; created: boolean; by: string };
    expect(run).toMatchObject({ created: true, by: "cli:carol" });
    const again = await runCli(["trigger", "hourly", "--request-id", "cli-1", "--config", CONFIG], { env });
    expect(again.stdout).toContain(`Request cli-1 had already run cli.rollup|hourly|`);
    expect(again.stdout).toContain(`job ${run.job_id}; nothing new was queued.`);

    const unknown = await runCli(["pause", "hourli", "--config", CONFIG], { env });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('error [entry_not_found]: No schedule entry "hourli" here. Did you mean "hourly"?');
  }, 60_000);
});

import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Cronledger } from "../src/cronledger.js";
import { ScheduleEntryError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import { createTestStore, rows, type TestStore } from "./support/ledger.js";

// Schedules as data in one process: the API, validation, and a pass that fires, retimes and removes dynamic entries.
const digest = defineJob({ name: "tenant.digest", payload: z.object({ tenant: z.number() }), run: () => {} });
const sync = defineJob({ name: "tenant.sync", run: () => {} });
const T0 = Date.parse("2026-06-01T00:00:00.000Z");
const SECOND = 1_000;

async function jobsOf(ledger: Cronledger, key: string): Promise<string[]> {
  const found = await rows<{ slot: string }>(
    ledger,
    sql`select to_char(scheduled_for at time zone 'UTC', 'HH24:MI:SS') as slot from cronledger.jobs where schedule_key = ${ledger.schedules.ledgerKey(key)} order by scheduled_for`,
  );
  return found.map((row) => row.slot);
}

describe("ledger.schedules: entries created at runtime", () => {
  let store: TestStore;
  let ledger: Cronledger;

  beforeAll(async () => {
    store = await createTestStore("postgres", "dynamic_schedules");
    ledger = await store.open({ jobs: [digest, sync], schedule: [{ job: sync, cron: "0 3 * * *", key: "nightly" }], metrics: false, chores: false });
  });
  afterAll(() => store.dispose());

  it("refuses invalid entries with the preflight codes and the field, and writes nothing", async () => {
    const attempt = ledger.schedules.upsertMany(
      [
        { key: "ok:1", job: digest, cron: "* * * * *", payload: { tenant: 1 } },
        { key: "bad cron", job: digest, cron: "61 * * * *", payload: { tenant: 2 } },
        { key: "t:3", job: "tenant.nope", cron: "* * * * *" },
        { key: "t:4", job: digest, cron: "* * * * *", payload: { tenant: "four" } },
        { key: "t:5", job: sync, cron: "* * * * *", timezone: "Mars/Olympus" },
        { key: "t:6", job: sync, cron: "* * * * *", jitter: "5m" },
        { key: "nightly", job: sync, cron: "* * * * *" },
      ],
      { now: new Date(T0) },
    );
    const error = await attempt.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ScheduleEntryError);
    const problems = (error as ScheduleEntryError).problems.map((problem) => [problem.index, problem.code, problem.field]);
    expect(problems).toEqual([
      [1, "invalid_key", "key"],
      [1, "invalid_cron", "cron"],
      [2, "unregistered_job", "job"],
      [3, "invalid_payload", "payload"],
      [4, "invalid_timezone", "timezone"],
      [5, "invalid_jitter", "jitter"],
      [6, "duplicate_entry", "key"],
    ]);
    expect(await rows(ledger, sql`select 1 from cronledger.dynamic_schedules`)).toEqual([]);
    expect(await rows(ledger, sql`select 1 from cronledger.schedule_state where namespace like '%#dynamic'`)).toEqual([]);
  });

  it("fires a new entry from the slot after its creation, once per slot; an unchanged upsert writes nothing", async () => {
    expect(await ledger.schedules.upsert({ key: "tenant:1:sync", job: sync, cron: "*/2 * * * * *" }, { now: new Date(T0 + 500) })).toEqual({ key: "tenant:1:sync", outcome: "created" });
    const before = await ledger.schedules.get("tenant:1:sync");
    expect(await ledger.schedules.upsert({ key: "tenant:1:sync", job: sync, cron: "*/2 * * * * *" }, { now: new Date(T0 + 700) })).toEqual({ key: "tenant:1:sync", outcome: "unchanged" });
    expect((await ledger.schedules.get("tenant:1:sync"))?.updatedAt).toEqual(before?.updatedAt);
    for (let step = 1; step <= 6; step += 1) await ledger.tick({ now: new Date(T0 + step * SECOND) });
    expect(await jobsOf(ledger, "tenant:1:sync")).toEqual(["00:00:02", "00:00:04", "00:00:06"]);
    // A second process ticking the same instants adds nothing.
    const other = await store.open({ jobs: [digest, sync], metrics: false, chores: false });
    for (let step = 1; step <= 6; step += 1) await other.tick({ now: new Date(T0 + step * SECOND) });
    expect(await jobsOf(ledger, "tenant:1:sync")).toEqual(["00:00:02", "00:00:04", "00:00:06"]);
  });

  it("an idle pass is one statement whatever is stored; a pass whose due entry the take fires three (the probe, the take, the release)", async () => {
    const idle = await ledger.tick({ now: new Date(T0 + 6_500) });
    expect(idle.statements).toBe(1);
    const due = await ledger.tick({ now: new Date(T0 + 8 * SECOND) });
    expect([due.statements, due.enqueued.map((slot) => slot.key)]).toEqual([3, [ledger.schedules.ledgerKey("tenant:1:sync")]]);
  });

  it("a retime fires no slot twice and none before the switch; a removal stops it at once", async () => {
    // At 00:00:09 the entry moves to every 3 seconds: 00:00:09 itself is the switch instant, never fired.
    expect((await ledger.schedules.upsert({ key: "tenant:1:sync", job: sync, cron: "*/3 * * * * *" }, { now: new Date(T0 + 9 * SECOND) })).outcome).toBe("retimed");
    for (let step = 9; step <= 13; step += 1) await ledger.tick({ now: new Date(T0 + step * SECOND) });
    expect(await jobsOf(ledger, "tenant:1:sync")).toEqual(["00:00:02", "00:00:04", "00:00:06", "00:00:08", "00:00:12"]);
    expect(await ledger.schedules.remove("tenant:1:sync")).toBe(true);
    for (let step = 14; step <= 19; step += 1) await ledger.tick({ now: new Date(T0 + step * SECOND) });
    expect(await jobsOf(ledger, "tenant:1:sync")).toEqual(["00:00:02", "00:00:04", "00:00:06", "00:00:08", "00:00:12"]);
    expect(await ledger.schedules.get("tenant:1:sync")).toBeNull();
    expect(await ledger.schedules.remove("tenant:1:sync")).toBe(false);
  });

  it("pause, resume, run now and backfill address a dynamic key as any entry", async () => {
    const key = "tenant:9:sync";
    await ledger.schedules.upsert({ key, job: sync, cron: "*/2 * * * * *" }, { now: new Date(T0 + 100 * SECOND) });
    await ledger.pause(key, { note: "incident", by: "ops" });
    const paused = await ledger.tick({ now: new Date(T0 + 102 * SECOND) });
    expect(paused.skipped.map((slot) => [slot.key, slot.reason])).toEqual([[ledger.schedules.ledgerKey(key), "paused"]]);
    expect((await ledger.schedules.get(key))?.paused?.note).toBe("incident");
    await ledger.resume(key);
    await ledger.tick({ now: new Date(T0 + 104 * SECOND) });
    expect(await jobsOf(ledger, key)).toEqual(["00:01:42", "00:01:44"]);
    const run = await ledger.trigger(key, { requestId: "r1" });
    expect(run.jobId).not.toBeNull();
    expect(await jobsOf(ledger, key)).toHaveLength(3);
  });

  it("lists entries in key order by prefix, keyset-paged, with counts", async () => {
    await ledger.schedules.upsertMany(
      Array.from({ length: 25 }, (_, index) => ({ key: `tenant:${index}:digest`, job: digest, cron: "0 8 * * 1-5", timezone: "Europe/Berlin", payload: { tenant: index } })),
      { now: new Date(T0) },
    );
    await ledger.schedules.upsert({ key: "other:1", job: sync, cron: "0 * * * *" }, { now: new Date(T0) });
    const first = await ledger.schedules.list({ prefix: "tenant:1", limit: 5 });
    expect(first.entries.map((entry) => entry.key)).toEqual(["tenant:10:digest", "tenant:11:digest", "tenant:12:digest", "tenant:13:digest", "tenant:14:digest"]);
    const second = await ledger.schedules.list({ prefix: "tenant:1", limit: 5, after: first.next! });
    expect(second.entries.map((entry) => entry.key)).toEqual(["tenant:15:digest", "tenant:16:digest", "tenant:17:digest", "tenant:18:digest", "tenant:19:digest"]);
    const last = await ledger.schedules.list({ prefix: "tenant:1", limit: 5, after: second.next! });
    expect([last.entries.map((entry) => entry.key), last.next]).toEqual([["tenant:1:digest"], null]);
    expect((await ledger.schedules.counts()).total).toBe(27);
    expect(await ledger.schedules.orphans(["tenant.digest"])).toEqual({ total: 2, byJob: { "tenant.sync": 2 } });
  });
});

import { sql } from "drizzle-orm";
import postgres from "postgres";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Cronledger } from "../src/cronledger.js";
import { createCronledger } from "../src/cronledger.js";
import { completeJobs } from "../src/db/sql/completions.js";
import { claimJobs, reapStaleJobs } from "../src/db/sql/jobs.js";
import { ConfigError, ScheduleValidationError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import type { OverlapPolicy } from "../src/schedule/define-schedule.js";
import { createTestDatabase } from "./support/database.js";
import { startGateProxy, type GateProxy } from "./support/gate-proxy.js";
import { BACKENDS, createTestStore, rows, type TestStore } from "./support/ledger.js";

const MINUTE = 60_000;
const T0 = Date.parse("2026-03-02T10:00:00.000Z");
const at = (minute: number) => new Date(T0 + minute * MINUTE + 1_000);
const slot = (minute: number) => new Date(T0 + minute * MINUTE);

const sync = defineJob({ name: "overlap.sync", run: () => {} });

interface JobRow {
  id: number;
  status: string;
  outcome: string | null;
  slot_ms: number;
  last_error: string | null;
  cancel_requested_by: string | null;
  cancel_reason: string | null;
}

const jobsOf = (ledger: Cronledger) =>
  rows<JobRow>(
    ledger,
    sql`select v.id::float8 as id, v.status, v.outcome, (extract(epoch from v.scheduled_for) * 1000)::float8 as slot_ms, v.last_error,
          q.cancel_requested_by, q.cancel_reason
        from cronledger.jobs v left join cronledger.job_queue q on q.id = v.id where v.job_name = ${sync.name} order by v.scheduled_for, v.id`,
  );
const WORKER = "overlap-test-worker";
/** A worker claimed it (its claim's fence: this worker, attempt 1). */
const start = (ledger: Cronledger, id: number) =>
  rows(ledger, sql`update cronledger.job_queue set status = 'running', started_at = now(), heartbeat_at = now(), locked_by = ${WORKER}, attempts = 1 where id = ${id}`);
/** Its worker wrote its end: the real completion statement, which releases a held job of its entry. */
const complete = (ledger: Cronledger, id: number, status: "succeeded" | "cancelled" = "succeeded") =>
  completeJobs(ledger.database.db, WORKER, [{ id, attempt: 1, status, outcome: null, error: null, delayMs: 0, returned: false }]);
/** It left the queue behind cronledger's back (a row deleted by hand): nothing releases a held job but the reaper's sweep. */
const vanish = (ledger: Cronledger, id: number) => rows(ledger, sql`delete from cronledger.job_queue where id = ${id}`);
const statusOf = async (ledger: Cronledger, id: number) => (await jobsOf(ledger)).find((row) => row.id === id)?.status;
const claimable = async (ledger: Cronledger) =>
  (await claimJobs(ledger.database.db, { workerId: "other-worker", queues: ["default"], jobNames: [sync.name], limit: 10 })).map((job) => job.id);

describe.each(BACKENDS)("overlap policies on %s", (backend) => {
  let store: TestStore;
  afterEach(async () => {
    await store?.dispose();
    store = undefined as unknown as TestStore;
  });
  const open = async (overlap: OverlapPolicy, global?: OverlapPolicy) => {
    store = await createTestStore(backend, `overlap_${overlap}_${backend}`);
    const ledger = await store.open({ jobs: [sync], schedule: [{ job: sync, cron: "* * * * *", ...(global ? {} : { overlap }) }], ...(global ? { overlap: global } : {}) });
    await ledger.tick({ now: at(0) });
    return ledger;
  };

  it("skip: a slot whose entry still has a queued or running job is recorded as skipped, with the job it waited on", async () => {
    const ledger = await open("skip");
    const first = await ledger.tick({ now: at(1) });
    const a = first.enqueued[0]?.jobId ?? 0;
    const queuedSkip = await ledger.tick({ now: at(2) });
    expect(queuedSkip.enqueued).toEqual([]);
    expect(queuedSkip.skipped).toEqual([expect.objectContaining({ reason: "overlap", slot: slot(2), detail: `overlap policy skip: job #${a} of this entry is still queued` })]);
    await start(ledger, a);
    expect((await ledger.tick({ now: at(3) })).skipped[0]?.detail).toBe(`overlap policy skip: job #${a} of this entry is still running`);
    await vanish(ledger, a);
    expect((await ledger.tick({ now: at(4) })).enqueued.map((outcome) => outcome.slot)).toEqual([slot(4)]);
    expect((await jobsOf(ledger)).map((row) => [row.slot_ms, row.status, row.outcome])).toEqual([
      [slot(2).getTime(), "skipped", "overlap"],
      [slot(3).getTime(), "skipped", "overlap"],
      [slot(4).getTime(), "queued", null],
    ]);
    const status = await ledger.status({ now: at(4), runs: { limit: 5, page: 1, perPage: 5 } });
    expect(status.entries[0]?.recentRuns?.map((run) => run.kind)).toEqual(["queued", "skipped", "skipped"]);
    expect(status.entries[0]?.recentRuns?.[1]?.error).toContain("overlap policy skip");
    expect((await ledger.metrics?.registry.metrics()) ?? "").toContain('cronledger_schedule_slots_total{outcome="skipped_overlap"} 2');
  });

  it("skip as the global default applies to entries that set no policy", async () => {
    const ledger = await open("allow_all", "skip");
    await ledger.tick({ now: at(1) });
    expect((await ledger.tick({ now: at(2) })).skipped).toHaveLength(1);
  });

  it("buffer_one: the buffered job is held while one runs, released when it ends; a slot that finds one waiting is skipped", async () => {
    const ledger = await open("buffer_one");
    const a = (await ledger.tick({ now: at(1) })).enqueued[0]?.jobId ?? 0;
    // A waits (nothing runs): the next slot finds a job waiting and is skipped.
    expect((await ledger.tick({ now: at(2) })).skipped[0]?.detail).toBe(`overlap policy buffer_one: job #${a} of this entry already waits`);
    await start(ledger, a);
    const b = (await ledger.tick({ now: at(3) })).enqueued[0]?.jobId ?? 0;
    expect(b).toBeGreaterThan(a);
    // B is held: no worker can claim it while A runs, and it is the one waiting job.
    expect(await statusOf(ledger, b)).toBe("held");
    expect(await claimable(ledger)).toEqual([]);
    expect((await ledger.tick({ now: at(4) })).skipped[0]?.detail).toBe(`overlap policy buffer_one: job #${b} of this entry already waits`);
    const status = await ledger.status({ now: at(4), runs: { limit: 5, page: 1, perPage: 5 } });
    expect(status.totals).toMatchObject({ queued: 0, held: 1, running: 1 });
    expect(status.entries[0]?.recentRuns?.map((run) => run.kind)).toEqual(["skipped", "held", "skipped", "running"]);
    // A ends: B becomes queued in the same statement, and a worker takes it.
    await complete(ledger, a);
    expect(await statusOf(ledger, b)).toBe("queued");
    expect(await claimable(ledger)).toEqual([b]);
    expect((await jobsOf(ledger)).map((row) => [row.slot_ms, row.status])).toEqual([
      [slot(1).getTime(), "succeeded"],
      [slot(2).getTime(), "skipped"],
      [slot(3).getTime(), "running"],
      [slot(4).getTime(), "skipped"],
    ]);
  });

  it("buffer_one: a held job whose running job vanished is released by the reaper's sweep, or by the entry's next slot", async () => {
    const ledger = await open("buffer_one");
    const a = (await ledger.tick({ now: at(1) })).enqueued[0]?.jobId ?? 0;
    await start(ledger, a);
    const b = (await ledger.tick({ now: at(2) })).enqueued[0]?.jobId ?? 0;
    await vanish(ledger, a);
    expect(await statusOf(ledger, b)).toBe("held");
    await reapStaleJobs(ledger.database.db, 60_000);
    expect(await statusOf(ledger, b)).toBe("queued");

    await start(ledger, b);
    const c = (await ledger.tick({ now: at(3) })).enqueued[0]?.jobId ?? 0;
    await vanish(ledger, b);
    // The next slot finds C waiting: it is skipped, and C, with nothing running before it, is released.
    expect((await ledger.tick({ now: at(4) })).skipped[0]?.detail).toBe(`overlap policy buffer_one: job #${c} of this entry already waits`);
    expect(await statusOf(ledger, c)).toBe("queued");
  });

  it("buffer_one: a run-now while a job runs is held like a slot; an operator can cancel a held job", async () => {
    const ledger = await open("buffer_one");
    const a = (await ledger.tick({ now: at(1) })).enqueued[0]?.jobId ?? 0;
    await start(ledger, a);
    const identity = ledger.entries[0]?.identity ?? "";
    const now = await ledger.trigger(identity, { requestId: "held-run-now" });
    expect(now.skipped).toBeNull();
    expect(await statusOf(ledger, now.jobId ?? 0)).toBe("held");
    expect((await ledger.trigger(identity, { requestId: "second" })).skipped?.detail).toBe(`overlap policy buffer_one: job #${now.jobId} of this entry already waits`);
    expect(await ledger.cancelJob(now.jobId ?? 0)).toMatchObject({ cancelled: true, was: "queued" });
    expect(await statusOf(ledger, now.jobId ?? 0)).toBe("cancelled");
  });

  it("cancel_other: the new slot is held while the stopped job runs; the waiting one is cancelled; the running one asked to stop, once", async () => {
    const ledger = await open("cancel_other");
    const a = (await ledger.tick({ now: at(1) })).enqueued[0]?.jobId ?? 0;
    await start(ledger, a);
    const b = (await ledger.tick({ now: at(2) })).enqueued[0]?.jobId ?? 0;
    expect(await statusOf(ledger, b)).toBe("held");
    const c = (await ledger.tick({ now: at(3) })).enqueued[0]?.jobId ?? 0;
    expect([a < b, b < c]).toEqual([true, true]);
    const [rowA, rowB, rowC] = await jobsOf(ledger);
    expect(rowA).toMatchObject({ id: a, status: "running", cancel_requested_by: "overlap", cancel_reason: "the overlap policy cancel_other: slot 2026-03-02T10:02:00.000Z replaces it" });
    expect(rowB).toMatchObject({ id: b, status: "cancelled", outcome: "overlap", last_error: "cancelled by the overlap policy cancel_other: slot 2026-03-02T10:03:00.000Z replaced it" });
    expect(rowC).toMatchObject({ id: c, status: "held", cancel_requested_by: null });
    expect(await claimable(ledger)).toEqual([]);
    // A stops (its handler returned, or its grace passed): C is released in the same statement.
    await complete(ledger, a, "cancelled");
    expect(await statusOf(ledger, c)).toBe("queued");
    // With nothing running, the next slot cancels the waiting C and goes in queued.
    const d = (await ledger.tick({ now: at(4) })).enqueued[0]?.jobId ?? 0;
    expect([await statusOf(ledger, c), await statusOf(ledger, d)]).toEqual(["cancelled", "queued"]);
  });

  it("refuses an unknown policy, in an entry and as the default", async () => {
    store = await createTestStore(backend, `overlap_bad_${backend}`);
    const bad = store.open({ jobs: [sync], schedule: [{ job: sync, cron: "* * * * *", overlap: "replace" as OverlapPolicy }], invalidEntries: "fail" });
    await expect(bad).rejects.toThrow(ScheduleValidationError);
    await expect(bad).rejects.toThrow(/overlap must be one of "allow_all", "skip", "buffer_one", "cancel_other"/);
    await expect(store.open({ jobs: [sync], overlap: "skip_all" as OverlapPolicy })).rejects.toThrow(ConfigError);
  });
});

/** A ledger of one every-minute `cancel_other` entry on a database of its own, with no chores (the describes below). */
const cancelOtherLedger = (url: string) =>
  createCronledger({ database: { url, poolSize: 2 }, jobs: [sync], schedule: [{ job: sync, cron: "* * * * *", overlap: "cancel_other" }], logger: silentLogger, metrics: false, chores: false });

describe("cancel_other's stop request", () => {
  let database: { url: string; drop: () => Promise<void> };
  let ledger: Cronledger;
  beforeAll(async () => {
    database = await createTestDatabase(import.meta.url);
    ledger = cancelOtherLedger(database.url);
    await ledger.migrate();
  });
  afterAll(async () => {
    await ledger?.close();
    await database?.drop();
  });

  it("notifies cronledger_cancel with the running job's id, on commit", async () => {
    const listener = postgres(database.url, { max: 1, onnotice: () => {} });
    const heard: string[] = [];
    try {
      await listener.listen("cronledger_cancel", (payload) => heard.push(payload));
      await ledger.tick({ now: at(0) });
      const a = (await ledger.tick({ now: at(1) })).enqueued[0]?.jobId ?? 0;
      await start(ledger, a);
      await ledger.tick({ now: at(2) });
      await ledger.tick({ now: at(3) });
      await expect.poll(() => heard, { timeout: 10_000 }).toEqual([String(a)]);
    } finally {
      await listener.end({ timeout: 1 });
    }
  });
});

describe("a held job's claim", () => {
  let database: { url: string; drop: () => Promise<void> };
  let ledger: Cronledger;
  let proxy: GateProxy;
  let claimer: Cronledger;
  beforeAll(async () => {
    database = await createTestDatabase(`${import.meta.url}_held_claim`);
    ledger = cancelOtherLedger(database.url);
    await ledger.migrate();
    proxy = await startGateProxy(database.url);
    claimer = createCronledger({ database: { url: proxy.url(database.url), poolSize: 2 }, jobs: [sync], logger: silentLogger, metrics: false, chores: false });
  });
  afterAll(async () => {
    await claimer?.close();
    await proxy?.close();
    await ledger?.close();
    await database?.drop();
  });

  it("is stamped after the end that released it, even when the claim's statement began before that end", async () => {
    await ledger.tick({ now: at(0) });
    const a = (await ledger.tick({ now: at(1) })).enqueued[0]?.jobId ?? 0;
    await start(ledger, a);
    const b = (await ledger.tick({ now: at(2) })).enqueued[0]?.jobId ?? 0;
    expect(await statusOf(ledger, b)).toBe("held");
    // A worker sends its next claim as a job ends, just before that job's completion (src/jobs/worker.ts, settle). On a
    // loaded server the claim can be bound first (its transaction begun, now() fixed) and take its snapshot after the
    // completion committed and released B: the gate holds it there.
    const gate = proxy.arm();
    const claim = claimJobs(claimer.database.db, { workerId: "other-worker", queues: ["default"], jobNames: [sync.name], limit: 1 });
    await gate.bound;
    await complete(ledger, a, "cancelled");
    gate.release();
    expect((await claim).map((job) => job.id)).toEqual([b]);
    const [stamps] = await rows<{ ended: string; started: string; ordered: boolean }>(
      ledger,
      sql`select a.finished_at::text as ended, b.started_at::text as started, b.started_at >= a.finished_at as ordered
          from cronledger.jobs a, cronledger.jobs b where a.id = ${a} and b.id = ${b}`,
    );
    expect(stamps?.ordered, `B's claim (started_at) is stamped after A's end (finished_at): ${JSON.stringify(stamps)}`).toBe(true);
  });
});

import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import type { OverlapPolicy } from "../src/schedule/define-schedule.js";
import { SYNC_JOB } from "./fixtures/slot-schedule.js";
import { createTestDatabase } from "./support/database.js";
import { startSlotReplica, type ReplicaTick, type SlotReplica } from "./support/slot-replicas.js";

/**
 * The acceptance of the overlap policies (issue 17): three replica processes tick an every-minute
 * entry in lock-step at injected instants, one minute of the entry's clock per STEP_MS of real time,
 * and work its jobs, which take three periods (JOB_MS of real time). After every step the queue is
 * sampled; at the end every slot must have exactly one row (fired, skipped, or cancelled by a later one).
 * buffer_one and cancel_other hold the next job (status `held`) until the running one has ended, so
 * no two runs of the entry overlap, by the handlers' clocks and by the history's started/finished times.
 */
const MINUTE = 60_000;
const T0 = Date.parse("2026-04-01T12:00:00.000Z");
const STEP_MS = 1_500;
const JOB_MS = 3 * STEP_MS;
const STEPS = 12;
const slot = (step: number) => T0 + step * MINUTE;

interface Sample {
  queued: number;
  held: number;
  running: number;
  /** Running jobs older than the entry's newest live job that were not asked to stop. */
  unasked: number;
}

describe.each(["skip", "buffer_one", "cancel_other"] as const)("overlap %s across three replica processes", (policy: OverlapPolicy) => {
  let database: { url: string; drop: () => Promise<void> };
  let observer: Cronledger;
  const replicas: SlotReplica[] = [];
  const run = <T>(statement: ReturnType<typeof sql>) => query<T>(observer.database.db, statement);

  beforeAll(async () => {
    database = await createTestDatabase(`${import.meta.url}_${policy}`);
    const sync = defineJob({ name: SYNC_JOB, run: () => {} });
    observer = createCronledger({ database: { url: database.url, poolSize: 2 }, jobs: [sync], logger: silentLogger, metrics: false, chores: false });
    await observer.migrate();
    await run(sql`create table overlap_runs (job_id bigint primary key, replica text not null, started timestamptz not null, ended timestamptz)`);
  });

  afterAll(async () => {
    for (const replica of replicas) replica.child.kill("SIGKILL");
    await observer?.close();
    await database?.drop();
  });

  it("decides each slot once across the replicas and keeps the policy's invariant", async () => {
    for (const name of ["r1", "r2", "r3"]) {
      replicas.push(await startSlotReplica({ databaseUrl: database.url, env: { OVERLAP: policy, WORK: "1", JOB_MS: String(JOB_MS), REPLICA: name } }));
    }
    const tickAll = (step: number) => Promise.all(replicas.map((replica) => replica.send<ReplicaTick>(`tick ${slot(step) + 500}`)));
    await tickAll(0);
    const samples: Sample[] = [];
    let skippedSlots = 0;
    for (let step = 1; step <= STEPS; step += 1) {
      const reports = await tickAll(step);
      // Exactly one replica handled the slot (fired it or recorded it as skipped); the others lost the race.
      const handled = reports.reduce((sum, report) => sum + report.enqueued.length + report.skipped.length, 0);
      expect(handled, `step ${step}: ${JSON.stringify(reports)}`).toBe(1);
      skippedSlots += reports.reduce((sum, report) => sum + report.skipped.length, 0);
      const [sample] = await run<Sample>(
        sql`select count(*) filter (where status = 'queued')::int as queued, count(*) filter (where status = 'held')::int as held,
              count(*) filter (where status = 'running')::int as running,
              count(*) filter (where status = 'running' and cancel_requested_at is null and id < (select max(id) from cronledger.job_queue where job_name = ${SYNC_JOB}))::int as unasked
            from cronledger.job_queue where job_name = ${SYNC_JOB}`,
      );
      if (sample) samples.push(sample);
      // The entry's clock advances one period per STEP_MS of real time, so a job of JOB_MS spans three slots.
      await new Promise((resolve) => setTimeout(resolve, STEP_MS));
    }
    await Promise.all(replicas.map((replica) => replica.exit()));
    replicas.length = 0;

    // Every slot exactly once: fired (whatever became of its job), skipped, or cancelled by a later slot. None missing, no duplicate.
    const rows = await run<{ slot_ms: number; status: string; outcome: string | null }>(
      sql`select (extract(epoch from scheduled_for) * 1000)::float8 as slot_ms, status, outcome from cronledger.jobs where job_name = ${SYNC_JOB} order by scheduled_for, id`,
    );
    expect(rows.map((row) => row.slot_ms)).toEqual(Array.from({ length: STEPS }, (_, index) => slot(index + 1)));
    const runs = await run<{ started_ms: number; ended_ms: number | null }>(
      sql`select (extract(epoch from started) * 1000)::float8 as started_ms, (extract(epoch from ended) * 1000)::float8 as ended_ms from overlap_runs order by started`,
    );
    const mostAtOnce = Math.max(...runs.map((a) => runs.filter((b) => b.started_ms <= a.started_ms && (b.ended_ms ?? Infinity) > a.started_ms).length));
    expect(runs.length).toBeGreaterThanOrEqual(2);
    // The history's view of the same runs: each attempt's claim (started_at) and its end (finished_at; null while it runs).
    const attempts = await run<{ id: number; started_ms: number; finished_ms: number | null }>(
      sql`select id::float8 as id, (extract(epoch from started_at) * 1000)::float8 as started_ms, (extract(epoch from finished_at) * 1000)::float8 as finished_ms
          from cronledger.jobs where job_name = ${SYNC_JOB} and started_at is not null order by started_at, id`,
    );
    const overlapping = attempts.flatMap((a, index) =>
      attempts.slice(index + 1).filter((b) => b.started_ms < (a.finished_ms ?? Infinity)).map((b) => `#${a.id} and #${b.id}`),
    );

    if (policy === "skip") {
      // Never two jobs of the entry queued or running at once: in the queue at every step, and in the handlers' own clocks.
      expect(samples.every((sample) => sample.queued + sample.running <= 1), JSON.stringify(samples)).toBe(true);
      expect(mostAtOnce).toBe(1);
      expect(skippedSlots).toBeGreaterThan(0);
      expect(rows.filter((row) => row.status === "skipped").every((row) => row.outcome === "overlap")).toBe(true);
    } else if (policy === "buffer_one") {
      // One runs at a time, at most one waits (held behind it), slots beyond that are skipped; runs never overlap.
      expect(samples.every((sample) => sample.running <= 1 && sample.queued + sample.held <= 1), JSON.stringify(samples)).toBe(true);
      expect(samples.some((sample) => sample.held === 1), JSON.stringify(samples)).toBe(true);
      expect(mostAtOnce).toBe(1);
      expect(overlapping).toEqual([]);
      expect(attempts.length).toBeGreaterThanOrEqual(3);
      expect(skippedSlots).toBeGreaterThan(0);
    } else {
      // Nothing is skipped; one runs at a time and at most one waits; every running job older than the newest has been asked
      // to stop; the replacing job starts only after the stopped one has ended.
      expect(skippedSlots).toBe(0);
      expect(rows.some((row) => row.status === "skipped")).toBe(false);
      expect(samples.every((sample) => sample.running <= 1 && sample.queued + sample.held <= 1 && sample.unasked === 0), JSON.stringify(samples)).toBe(true);
      expect(mostAtOnce).toBe(1);
      expect(overlapping).toEqual([]);
      // The policy acted: running jobs were stopped (they end cancelled) and their replacements waited held.
      const [stopped] = await run<{ n: number }>(sql`select count(*)::int as n from cronledger.jobs where job_name = ${SYNC_JOB} and status = 'cancelled'`);
      expect(stopped?.n ?? 0).toBeGreaterThan(0);
      expect(samples.some((sample) => sample.held === 1), JSON.stringify(samples)).toBe(true);
    }
  }, 180_000);
});

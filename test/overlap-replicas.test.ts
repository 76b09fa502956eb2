import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import type { OverlapPolicy } from "../src/schedule/define-schedule.js";
import { SYNC_JOB } from "./fixtures/slot-schedule.js";
import { createTestDatabase } from "./support/database.js";
import { expectOverlapPolicy, overlapFindings, OVERLAP_RUNS_TABLE, sampleQueue, type QueueSample } from "./support/overlap-policy.js";
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

describe.each(["skip", "buffer_one", "cancel_other", "allow_all"] as const)("overlap %s across three replica processes", (policy: OverlapPolicy) => {
  let database: { url: string; drop: () => Promise<void> };
  let observer: Cronledger;
  const replicas: SlotReplica[] = [];
  const ofEntry = sql`job_name = ${SYNC_JOB}`;

  beforeAll(async () => {
    database = await createTestDatabase(`${import.meta.url}_${policy}`);
    const sync = defineJob({ name: SYNC_JOB, run: () => {} });
    observer = createCronledger({ database: { url: database.url, poolSize: 2 }, jobs: [sync], logger: silentLogger, metrics: false, chores: false });
    await observer.migrate();
    await query(observer.database.db, OVERLAP_RUNS_TABLE);
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
    const samples: QueueSample[] = [];
    let skippedSlots = 0;
    for (let step = 1; step <= STEPS; step += 1) {
      const reports = await tickAll(step);
      // Exactly one replica handled the slot (fired it or recorded it as skipped); the others lost the race.
      const handled = reports.reduce((sum, report) => sum + report.enqueued.length + report.skipped.length, 0);
      expect(handled, `step ${step}: ${JSON.stringify(reports)}`).toBe(1);
      skippedSlots += reports.reduce((sum, report) => sum + report.skipped.length, 0);
      const sample = await sampleQueue(observer.database.db, ofEntry);
      if (sample) samples.push(sample);
      // The entry's clock advances one period per STEP_MS of real time, so a job of JOB_MS spans three slots.
      await new Promise((resolve) => setTimeout(resolve, STEP_MS));
    }
    await Promise.all(replicas.map((replica) => replica.exit()));
    replicas.length = 0;

    // Every slot exactly once: fired (whatever became of its job), skipped, or cancelled by a later slot. None missing, no duplicate.
    const findings = await overlapFindings(observer.database.db, ofEntry);
    expect(findings.rows.map((row) => row.slot_ms)).toEqual(Array.from({ length: STEPS }, (_, index) => slot(index + 1)));
    expectOverlapPolicy(policy, findings, samples, skippedSlots);
  }, 180_000);
});

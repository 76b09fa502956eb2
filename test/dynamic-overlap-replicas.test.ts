import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import type { OverlapPolicy } from "../src/schema.js";
import { createTestDatabase } from "./support/database.js";
import { expectOverlapPolicy, overlapFindings, OVERLAP_RUNS_TABLE, sampleQueue, type QueueSample } from "./support/overlap-policy.js";
import { startSlotReplica, type SlotReplica } from "./support/slot-replicas.js";

/**
 * The overlap policies on a dynamic entry (`ledger.schedules`, issue 33), as test/overlap-replicas.test.ts holds them on
 * a static one: three replica processes (test/fixtures/dynamic-overlap-replica.ts) tick an every-2-seconds dynamic entry
 * in lock-step at injected instants, one period of the entry's clock per STEP_MS of real time, and work its jobs, which
 * take three periods (JOB_MS of real time). After every step the queue is sampled; at the end every slot must have
 * exactly one row (fired, skipped, or cancelled by a later one), and the runs' overlap is what the policy allows.
 */
const FIXTURE = new URL("./fixtures/dynamic-overlap-replica.ts", import.meta.url).pathname;
const PERIOD = 2_000;
const T0 = Date.parse("2026-06-01T00:00:00.000Z");
const STEP_MS = 1_500;
const JOB_MS = 3 * STEP_MS;
const STEPS = 12;
/** The fixture's job (importing it would start the fixture). */
const DYNAMIC_OVERLAP_JOB = "tenant.sync";
const KEY = "tenant:7:sync";
const LEDGER_KEY = `default#dynamic|${KEY}`;
const slot = (step: number) => T0 + step * PERIOD;

interface Tick {
  readonly enqueued: string[];
  readonly lostRace: string[];
  readonly skipped: { key: string; reason: string; slot: number }[];
}

describe.each(["skip", "buffer_one", "cancel_other", "allow_all"] as const)("overlap %s on a dynamic entry across three replica processes", (policy: OverlapPolicy) => {
  let database: { url: string; drop: () => Promise<void> };
  let observer: Cronledger;
  const replicas: SlotReplica[] = [];
  const ofEntry = sql`schedule_key = ${LEDGER_KEY}`;

  beforeAll(async () => {
    database = await createTestDatabase(`${import.meta.url}_${policy}`);
    const sync = defineJob({ name: DYNAMIC_OVERLAP_JOB, run: () => {} });
    observer = createCronledger({ database: { url: database.url, poolSize: 2 }, jobs: [sync], logger: silentLogger, metrics: false, chores: false });
    await observer.migrate();
    await query(observer.database.db, OVERLAP_RUNS_TABLE);
  });

  afterAll(async () => {
    for (const replica of replicas) replica.child.kill("SIGKILL");
    await observer?.close();
    await database?.drop();
  });

  it("decides each slot once across the replicas and keeps the policy's invariant, as on a static entry", async () => {
    for (const name of ["r1", "r2", "r3"]) {
      replicas.push(await startSlotReplica({ databaseUrl: database.url, fixture: FIXTURE, env: { JOB_MS: String(JOB_MS), REPLICA: name } }));
    }
    expect(await observer.schedules.upsert({ key: KEY, job: DYNAMIC_OVERLAP_JOB, cron: "*/2 * * * * *", overlap: policy }, { now: new Date(T0 + 100) })).toEqual({
      key: KEY,
      outcome: "created",
    });
    const tickAll = (step: number) => Promise.all(replicas.map((replica) => replica.send<Tick>(`tick ${slot(step) + 500}`)));
    const samples: QueueSample[] = [];
    let skippedSlots = 0;
    for (let step = 1; step <= STEPS; step += 1) {
      const reports = await tickAll(step);
      // Exactly one replica handled the slot (fired it or recorded it as skipped); the others took nothing or lost the race.
      const handled = reports.reduce((sum, report) => sum + report.enqueued.length + report.skipped.length, 0);
      expect(handled, `step ${step}: ${JSON.stringify(reports)}`).toBe(1);
      expect(reports.flatMap((report) => [...report.enqueued, ...report.skipped.map((skipped) => skipped.key)])).toEqual([LEDGER_KEY]);
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

import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createCronledger } from "../src/cronledger.js";
import { silentLogger } from "../src/log.js";
import { throughPgBouncer } from "./support/database.js";
import { record, until, workerProcessHarness } from "./support/worker-processes.js";

const harness = workerProcessHarness(import.meta.url);
const ledger = () => harness.ledger();
const { run, count, spawnWorker, ready } = harness;

describe("several worker processes", () => {
  it("two worker processes with concurrency 10 each drain 5,000 jobs with no job run twice", async () => {
    const workers = [spawnWorker("work"), spawnWorker("work")];
    await Promise.all(workers.map(ready));
    await ledger().enqueueMany(Array.from({ length: 5_000 }, () => ({ job: record, payload: { sleepMs: 0 } })));
    await until("all jobs succeeded", async () => (await count(sql`select count(*)::int as n from cronledger.jobs where status = 'succeeded'`)) === 5_000, 45_000);
    for (const worker of workers) worker.process.kill("SIGTERM");
    await Promise.all(workers.map((worker) => worker.exited));

    expect(await count(sql`select count(*)::int as n from runs where phase = 'start'`)).toBe(5_000);
    expect(await count(sql`select count(distinct job_id)::int as n from runs where phase = 'start'`)).toBe(5_000);
    const perProcess = await run<{ pid: number; n: number }>(sql`select pid, count(*)::int as n from runs where phase = 'start' group by pid`);
    expect(perProcess).toHaveLength(2);
    expect(await count(sql`select count(*)::int as n from cronledger.jobs where attempts <> 1`)).toBe(0);
  });

  it("four worker processes through PgBouncer drain 8,000 jobs enqueued through it: none lost, none run twice", async () => {
    const bouncer = { DATABASE_URL: throughPgBouncer(harness.url()), POOLER: "pgbouncer" };
    // Two are woken by LISTEN on a direct connection, two find jobs by polling only.
    const workers = [
      spawnWorker("work", { ...bouncer, LISTEN_URL: harness.url() }),
      spawnWorker("work", { ...bouncer, LISTEN_URL: harness.url() }),
      spawnWorker("work", bouncer),
      spawnWorker("work", bouncer),
    ];
    await Promise.all(workers.map(ready));
    const producer = createCronledger({ database: { url: bouncer.DATABASE_URL, poolSize: 2, pooler: "pgbouncer" }, jobs: [record], logger: silentLogger, metrics: false });
    try {
      for (let i = 0; i < 4; i += 1) await producer.enqueueMany(Array.from({ length: 2_000 }, () => ({ job: record, payload: { sleepMs: 0 } })));
    } finally {
      await producer.close();
    }
    await until("all jobs succeeded", async () => (await count(sql`select count(*)::int as n from cronledger.jobs where status = 'succeeded'`)) === 8_000, 100_000);
    for (const worker of workers) worker.process.kill("SIGTERM");
    await Promise.all(workers.map((worker) => worker.exited));

    expect(await count(sql`select count(*)::int as n from cronledger.jobs`)).toBe(8_000);
    expect(await count(sql`select count(*)::int as n from runs where phase = 'start'`)).toBe(8_000);
    expect(await count(sql`select count(distinct job_id)::int as n from runs where phase = 'start'`)).toBe(8_000);
    expect(await count(sql`select count(*)::int as n from cronledger.jobs where attempts <> 1`)).toBe(0);
    expect(await count(sql`select count(distinct pid)::int as n from runs`)).toBe(4);
  }, 150_000);

  it("end to end: start() in 3 processes for 10 s runs an every-second entry exactly once per slot, each enqueued within a second", async () => {
    const workers = [0, 1, 2].map(() => spawnWorker("start", { SCHEDULE: "every-second" }));
    await Promise.all(workers.map(ready));
    await new Promise((resolve) => setTimeout(resolve, 10_000));
    for (const worker of workers) worker.process.kill("SIGTERM");
    await Promise.all(workers.map((worker) => worker.exited));

    const slots = await run<{ slot_ms: number; runs: number; lag_ms: number }>(
      sql`select (extract(epoch from scheduled_for) * 1000)::float8 as slot_ms, count(*)::int as runs,
            max(extract(epoch from enqueued_at - scheduled_for) * 1000)::float8 as lag_ms
          from runs where phase = 'scheduled' group by scheduled_for order by scheduled_for`,
    );
    expect(slots.length).toBeGreaterThanOrEqual(7);
    for (const slot of slots) {
      expect(slot.runs).toBe(1);
      expect(slot.lag_ms).toBeGreaterThanOrEqual(0);
      expect(slot.lag_ms).toBeLessThan(1_000);
    }
    // Consecutive seconds: no slot skipped between the first and the last.
    const first = slots[0]?.slot_ms ?? 0;
    expect(slots.map((slot) => slot.slot_ms - first)).toEqual(slots.map((_, i) => i * 1_000));
    const scheduledJobs = await count(sql`select count(*)::int as n from cronledger.jobs where job_name = 'proc.every-second'`);
    expect(scheduledJobs).toBeGreaterThanOrEqual(slots.length);
    expect(scheduledJobs - slots.length).toBeLessThanOrEqual(1);
    const processes = await count(sql`select count(distinct pid)::int as n from runs where phase = 'scheduled'`);
    expect(processes).toBeGreaterThanOrEqual(1);
  });
});

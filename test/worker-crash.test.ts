import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createCronledger } from "../src/cronledger.js";
import { silentLogger } from "../src/log.js";
import { record, until, workerProcessHarness } from "./support/worker-processes.js";

const harness = workerProcessHarness(import.meta.url);
const ledger = () => harness.ledger();
const { run, count, spawnWorker, ready } = harness;

describe("worker processes that crash or are stopped", () => {
  it("reaps the job of a worker SIGKILLed mid-job and completes it on another worker; none is lost", async () => {
    const lease = 2_000;
    const crashing = spawnWorker("work", { LEASE_MS: String(lease) });
    await ready(crashing);
    const job = await ledger().enqueue(record, { sleepMs: 60_000 });
    await until("the long job has started", async () => (await count(sql`select count(*)::int as n from runs where job_id = ${job.id} and phase = 'start'`)) === 1);
    crashing.process.kill("SIGKILL");
    await crashing.exited;

    const [state] = await run<{ status: string; attempts: number }>(sql`select status, attempts from cronledger.jobs where id = ${job.id}`);
    expect(state).toEqual({ status: "running", attempts: 1 });
    // Judge the lease at a later instant instead of waiting it out.
    const [clock] = await run<{ ms: number }>(sql`select (extract(epoch from now()) * 1000)::float8 as ms`);
    const reaper = createCronledger({ database: ledger().database, jobs: [record], logger: silentLogger, metrics: false, chores: false, lease });
    expect(await reaper.reap({ now: new Date((clock?.ms ?? 0) + lease + 1_000) })).toEqual({ requeued: 1, failed: 0 });

    const rescuer = spawnWorker("once", { SLEEP_MS: "0" });
    expect((await rescuer.exited).code).toBe(0);
    const jobs = await run<{ status: string; attempts: number }>(sql`select status, attempts from cronledger.jobs order by id`);
    expect(jobs).toEqual([{ status: "succeeded", attempts: 2 }]);
    const runs = await run<{ phase: string; n: number }>(sql`select phase, count(*)::int as n from runs where job_id = ${job.id} group by phase order by phase`);
    expect(runs).toEqual([
      { phase: "finish", n: 1 },
      { phase: "start", n: 2 },
    ]);
  });

  it("on SIGTERM during 50 running jobs loses none: finished ones stay finished, the rest run again after restart", async () => {
    const worker = spawnWorker("start", { CONCURRENCY: "50", GRACE_MS: "1500" });
    await ready(worker);
    const jobs = await ledger().enqueueMany(
      Array.from({ length: 50 }, (_, i) => ({ job: record, payload: { sleepMs: i % 2 === 0 ? 300 : 60_000 } })),
    );
    await until("all 50 jobs are running", async () => (await count(sql`select count(*)::int as n from runs where phase = 'start'`)) === 50);
    worker.process.kill("SIGTERM");
    const exit = await worker.exited;
    expect(exit.signal === "SIGTERM" || exit.code === 0).toBe(true);

    const quick = jobs.filter((_, i) => i % 2 === 0).map((job) => job.id);
    // start() also runs the chores, whose reap entry may fire a job of its own while the test runs.
    const states = await run<{ id: number; status: string; attempts: number; locked_by: string | null }>(
      sql`select id::float8 as id, status, attempts, locked_by from cronledger.jobs where job_name = ${record.name} order by id`,
    );
    expect(states).toHaveLength(50);
    for (const state of states) {
      if (quick.includes(state.id)) expect(state).toMatchObject({ status: "succeeded", attempts: 1 });
      else expect(state).toMatchObject({ status: "queued", attempts: 0, locked_by: null });
    }

    const restarted = spawnWorker("once", { CONCURRENCY: "50", SLEEP_MS: "0" });
    expect((await restarted.exited).code).toBe(0);
    expect(await count(sql`select count(*)::int as n from cronledger.jobs where job_name = ${record.name} and status = 'succeeded'`)).toBe(50);
    const finishes = await run<{ job_id: string; n: number }>(sql`select job_id, count(*)::int as n from runs where phase = 'finish' group by job_id having count(*) > 1`);
    expect(finishes).toEqual([]);
    expect(await count(sql`select count(distinct job_id)::int as n from runs where phase = 'finish'`)).toBe(50);
  });
});

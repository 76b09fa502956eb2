import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { record, until, workerProcessHarness } from "./support/worker-processes.js";

const harness = workerProcessHarness(import.meta.url);
const { run, count, spawnWorker, ready } = harness;
const ledger = () => harness.ledger();

const LEASE_MS = 2_000;
const REAP_INTERVAL_MS = 3_000;

describe("the reaper under a backlog", () => {
  it("returns a SIGKILLed worker's job to the queue within lease + reap interval + 1 s while one slot works through 200 ready 100 ms jobs", async () => {
    const victim = spawnWorker("work", { LEASE_MS: String(LEASE_MS), CONCURRENCY: "1" });
    await ready(victim);
    const long = await ledger().enqueue(record, { sleepMs: 60_000 });
    await until("the long job runs", async () => (await count(sql`select count(*)::int as n from runs where job_id = ${long.id} and phase = 'start'`)) === 1);
    await ledger().enqueueMany(Array.from({ length: 200 }, () => ({ job: record, payload: { sleepMs: 100 } })));

    // The survivor runs start(): its ticker fires the reap chore every 3 s; its one slot is never free for long.
    const survivor = spawnWorker("start", { LEASE_MS: String(LEASE_MS), CONCURRENCY: "1", REAP_CRON: `*/${REAP_INTERVAL_MS / 1000} * * * * *` });
    await ready(survivor);
    await until("the survivor works the backlog", async () => (await count(sql`select count(*)::int as n from runs where phase = 'finish'`)) >= 3);
    victim.process.kill("SIGKILL");
    await victim.exited;
    const [killed] = await run<{ ms: number }>(sql`select (extract(epoch from clock_timestamp()) * 1000)::float8 as ms`);

    await until(
      "the long job is back in the queue",
      async () => (await count(sql`select count(*)::int as n from cronledger.jobs where id = ${long.id} and attempts = 1 and status <> 'running'`)) === 1,
      30_000,
    );
    const backlogLeft = await count(sql`select count(*)::int as n from cronledger.jobs where id <> ${long.id} and status = 'queued' and job_name = 'proc.record'`);
    const [reaped] = await run<{ status: string; run_at_ms: number; last_error: string }>(
      sql`select status, (extract(epoch from run_at) * 1000)::float8 as run_at_ms, last_error from cronledger.jobs where id = ${long.id}`,
    );
    const delayMs = (reaped?.run_at_ms ?? 0) - (killed?.ms ?? 0);
    process.stderr.write(`reaper under backlog: job requeued ${Math.round(delayMs)} ms after SIGKILL with ${backlogLeft} backlog jobs still queued\n`);
    expect(reaped?.status).toBe("queued");
    expect(reaped?.last_error).toContain("LeaseExpiredError");
    expect(backlogLeft).toBeGreaterThan(0);
    expect(delayMs).toBeLessThanOrEqual(LEASE_MS + REAP_INTERVAL_MS + 1_000);
  }, 120_000);
});

// Stopping a running job (cancelJob on a running job), with the worker in its own OS process and the
// request from another: the CLI, or this test's process. Real PostgreSQL, real PgBouncer.
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { runCli, watch, type Watched } from "./support/child.js";
import { createTestDatabase, throughPgBouncer } from "./support/database.js";
import { until } from "./support/worker-processes.js";

const FIXTURE = fileURLToPath(new URL("./fixtures/stop-worker.ts", import.meta.url));
const CONFIG = fileURLToPath(new URL("./fixtures/cli/good.config.mjs", import.meta.url));
/** The producer's side of the fixture's job: never run here. */
const long = defineJob({ name: "stop.long", retry: "probe", payload: z.object({ ms: z.number(), honour: z.boolean() }), run: () => {} });
const STOP_GRACE_MS = 1_500;

let database: { url: string; drop: () => Promise<void> };
let ledger: Cronledger;
const workers = new Set<Watched>();

const run = <T>(statement: ReturnType<typeof sql>) => query<T>(ledger.database.db, statement);

beforeAll(async () => {
  database = await createTestDatabase(import.meta.url);
  ledger = createCronledger({ database: { url: database.url, poolSize: 4 }, jobs: [long], logger: silentLogger, metrics: false, chores: false, stopGrace: STOP_GRACE_MS });
  await ledger.migrate();
  await run(sql`create table stops (job_id bigint, pid int, phase text, requested_by text, reason text, at timestamptz)`);
});

afterEach(async () => {
  for (const worker of workers) worker.child.kill("SIGKILL");
  await Promise.all([...workers].map((worker) => worker.exited));
  workers.clear();
});

afterAll(async () => {
  await ledger?.close();
  await database?.drop();
});

function spawnWorker(env: Record<string, string> = {}): Watched {
  const worker = watch(process.execPath, ["--import", "tsx", FIXTURE], {
    env: { ...process.env, DATABASE_URL: database.url, STOP_GRACE_MS: String(STOP_GRACE_MS), ...env },
  });
  workers.add(worker);
  return worker;
}

async function started(jobId: number): Promise<void> {
  await until(`job ${jobId} started`, async () => (await run<{ n: number }>(sql`select count(*)::int as n from stops where job_id = ${jobId} and phase = 'start'`))[0]?.n === 1, 30_000);
}

async function stopRow(jobId: number): Promise<{ requested_by: string | null; reason: string | null; at_ms: number; pid: number }> {
  await until(`job ${jobId}'s signal aborted`, async () => (await run<{ n: number }>(sql`select count(*)::int as n from stops where job_id = ${jobId} and phase = 'aborted'`))[0]?.n === 1, 30_000);
  const [row] = await run<{ requested_by: string | null; reason: string | null; at_ms: number; pid: number }>(
    sql`select requested_by, reason, (extract(epoch from at) * 1000)::float8 as at_ms, pid from stops where job_id = ${jobId} and phase = 'aborted'`,
  );
  return row as { requested_by: string | null; reason: string | null; at_ms: number; pid: number };
}

async function finished(jobId: number): Promise<{ status: string; attempts: number; last_error: string | null; finished_ms: number; queued: number }> {
  const [row] = await run<{ status: string; attempts: number; last_error: string | null; finished_ms: number; queued: number }>(
    sql`select status, attempts, last_error, (extract(epoch from finished_at) * 1000)::float8 as finished_ms,
               (select count(*)::int from cronledger.job_queue where id = ${jobId}) as queued
        from cronledger.job_history where id = ${jobId}`,
  );
  return row as { status: string; attempts: number; last_error: string | null; finished_ms: number; queued: number };
}

describe("stopping a running job", () => {
  it("a running 60 s job cancelled by `cronledger cancel` in another process: its signal aborts within 2 s with who and why, it ends cancelled, never retried, not a failure", async () => {
    const worker = spawnWorker();
    await worker.waitFor(/ready/, 30_000);
    const job = await ledger.enqueue(long, { ms: 60_000, honour: true });
    await started(job.id);

    const cancel = await runCli(["cancel", String(job.id), "--reason", "runaway import", "--by", "oncall:alice", "--json", "--config", CONFIG], {
      env: { ...process.env, DATABASE_URL: database.url },
    });
    expect(cancel.code, cancel.stderr).toBe(0);
    const answer = JSON.parse(cancel.stdout) as { was: string; cancelled: boolean; stop: { requested_at: string; requested_by: string; reason: string; grace_ms: number } };
    expect(answer).toMatchObject({ was: "running", cancelled: true, stop: { requested_by: "oncall:alice", reason: "runaway import", grace_ms: 30_000 } });

    const stop = await stopRow(job.id);
    expect(stop).toMatchObject({ requested_by: "oncall:alice", reason: "runaway import" });
    const latencyMs = stop.at_ms - Date.parse(answer.stop.requested_at);
    console.log(`stop latency through LISTEN/NOTIFY: ${Math.round(latencyMs)} ms`);
    expect(latencyMs).toBeLessThan(2_000);

    await worker.waitFor(new RegExp(`finished ${job.id} cancelled failures_total=0`), 30_000);
    await until("the job is in the history", async () => (await run<{ n: number }>(sql`select count(*)::int as n from cronledger.job_history where id = ${job.id}`))[0]?.n === 1);
    const row = await finished(job.id);
    // In the history, out of the queue: no retry can ever claim it.
    expect(row).toMatchObject({ status: "cancelled", attempts: 1, queued: 0 });
    expect(row.last_error).toMatch(/asked to stop by oncall:alice \(runaway import\)/);
    const [counts] = await run<{ cancelled: number; failed: number }>(
      sql`select coalesce(sum(n) filter (where status = 'cancelled'), 0)::int as cancelled, coalesce(sum(n) filter (where status = 'failed'), 0)::int as failed from cronledger.job_counts`,
    );
    expect(counts).toEqual({ cancelled: 1, failed: 0 });

    // A second request changes nothing and says so.
    const again = await runCli(["cancel", String(job.id), "--config", CONFIG], { env: { ...process.env, DATABASE_URL: database.url } });
    expect(again.stdout.trim()).toBe(`Job ${job.id} (stop.long) was already cancelled; nothing changed.`);
  }, 90_000);

  it("a handler that ignores its signal is failed as killed after the stop grace, not retried", async () => {
    const worker = spawnWorker();
    await worker.waitFor(/ready/, 30_000);
    const job = await ledger.enqueue(long, { ms: 60_000, honour: false });
    await started(job.id);

    const answer = await ledger.cancelJob(job.id, { by: "test", reason: "stuck" });
    expect(answer).toMatchObject({ was: "running", cancelled: true, stop: { requestedBy: "test", reason: "stuck", graceMs: STOP_GRACE_MS } });
    const repeat = await ledger.cancelJob(job.id, { by: "someone else", reason: "again" });
    expect(repeat).toMatchObject({ was: "stopping", cancelled: false, stop: { requestedBy: "test", reason: "stuck" } });

    const stop = await stopRow(job.id);
    expect(stop).toMatchObject({ requested_by: "test", reason: "stuck" });
    await worker.waitFor(new RegExp(`finished ${job.id} panicked failures_total=1`), 30_000);
    await until("the job is in the history", async () => (await run<{ n: number }>(sql`select count(*)::int as n from cronledger.job_history where id = ${job.id}`))[0]?.n === 1);
    const row = await finished(job.id);
    expect(row).toMatchObject({ status: "failed", attempts: 1, queued: 0 });
    expect(row.last_error).toMatch(/job_killed.*asked to stop by test \(stuck\) and its handler had not returned 1500 ms later/);
    // The kill came no earlier than the grace after the worker aborted the signal.
    expect(row.finished_ms - stop.at_ms).toBeGreaterThanOrEqual(STOP_GRACE_MS - 50);
    // The worker's slot is free again: the next job runs.
    const next = await ledger.enqueue(long, { ms: 0, honour: true });
    await worker.waitFor(new RegExp(`finished ${next.id} done`), 30_000);
    await until("the next job is in the history", async () => (await run<{ n: number }>(sql`select count(*)::int as n from cronledger.job_history where id = ${next.id}`))[0]?.n === 1);
  }, 90_000);

  it("behind PgBouncer with no LISTEN, the heartbeat brings the stop request (within lease/3)", async () => {
    const leaseMs = 3_000;
    const worker = spawnWorker({ DATABASE_URL: throughPgBouncer(database.url), POOLER: "pgbouncer", LEASE_MS: String(leaseMs) });
    await worker.waitFor(/ready/, 30_000);
    const job = await ledger.enqueue(long, { ms: 60_000, honour: true });
    await started(job.id);
    const answer = await ledger.cancelJob(job.id, { reason: "no notify here" });
    const stop = await stopRow(job.id);
    expect(stop).toMatchObject({ requested_by: "api", reason: "no notify here" });
    const latencyMs = stop.at_ms - (answer.stop?.requestedAt.getTime() ?? 0);
    console.log(`stop latency through the heartbeat (lease ${leaseMs} ms, beats every ${leaseMs / 3} ms): ${Math.round(latencyMs)} ms`);
    expect(latencyMs).toBeLessThan(leaseMs / 3 + 1_000);
    await worker.waitFor(new RegExp(`finished ${job.id} cancelled failures_total=0`), 30_000);
  }, 90_000);

  it("a job asked to stop whose worker was killed ends cancelled when reaped, not requeued", async () => {
    const worker = spawnWorker({ LEASE_MS: "1000" });
    await worker.waitFor(/ready/, 30_000);
    const job = await ledger.enqueue(long, { ms: 60_000, honour: false });
    await started(job.id);
    worker.child.kill("SIGKILL");
    await worker.exited;
    const answer = await ledger.cancelJob(job.id, { reason: "its worker is gone" });
    expect(answer.was).toBe("running");
    const report = await ledger.reap({ now: new Date(Date.now() + 60_000) });
    expect(report).toEqual({ requeued: 0, failed: 0 });
    expect(await finished(job.id)).toMatchObject({ status: "cancelled", attempts: 1, queued: 0 });
  }, 60_000);
});

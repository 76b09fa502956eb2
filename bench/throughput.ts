import { pathToFileURL } from "node:url";
import { sql } from "drizzle-orm";
import { Logger as GraphileLogger, makeWorkerUtils, run as runGraphile } from "graphile-worker";
import PgBoss from "pg-boss";
import postgres from "postgres";
import { z } from "zod";
import { createCronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { dropDatabase, freshDatabase, percentile, printTable } from "./support.js";

const JOBS = 20_000;
const CONCURRENCY = 10;
const LATENCY_SAMPLES = 200;
const LATENCY_SPACING_MS = 5;
const TICKER_SECONDS = 6;
/** Jobs per bulk-insert call: 20,000 arrive as 10 calls, for every system alike. */
const ENQUEUE_CHUNK = 2_000;

export interface SystemFigures {
  /** Jobs per second inserted by bulk calls of ENQUEUE_CHUNK jobs. */
  readonly enqueuePerSecond: number;
  /** Jobs per second from start until every job is recorded as finished. */
  readonly drainPerSecond: number;
  readonly startLatencyP50Ms: number;
  readonly startLatencyP99Ms: number;
}

export interface ThroughputFigures {
  readonly cronledger: SystemFigures & { readonly slotToEnqueueP50Ms: number; readonly slotToEnqueueP99Ms: number };
  readonly graphileWorker: SystemFigures;
  readonly pgBoss: SystemFigures;
}

const nowMs = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls until `done()` holds (every 10 ms), returning when it does. */
async function waitFor(done: () => Promise<boolean> | boolean, timeoutMs = 300_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error("bench: timed out");
    await sleep(10);
  }
}

/** Inserts JOBS jobs in ENQUEUE_CHUNK-sized bulk calls and returns jobs per second. */
async function timedBulkInsert(insert: (count: number) => Promise<unknown>): Promise<number> {
  const started = performance.now();
  for (let done = 0; done < JOBS; done += ENQUEUE_CHUNK) await insert(Math.min(ENQUEUE_CHUNK, JOBS - done));
  return JOBS / ((performance.now() - started) / 1000);
}

/** Enqueues LATENCY_SAMPLES jobs one at a time into an idle, running worker; returns p50 and p99 of enqueue-to-start. */
async function measureStartLatency(enqueueOne: (sentAt: number) => Promise<void>, latencies: number[]): Promise<[number, number]> {
  for (let i = 0; i < LATENCY_SAMPLES; i += 1) {
    await enqueueOne(nowMs());
    await sleep(LATENCY_SPACING_MS);
  }
  await waitFor(() => latencies.length >= LATENCY_SAMPLES, 60_000);
  return [percentile(latencies, 50), percentile(latencies, 99)];
}

async function benchCronledger(): Promise<ThroughputFigures["cronledger"]> {
  const name = "cronledger_bench_throughput";
  const url = await freshDatabase(name);
  const latencies: number[] = [];
  const noopJob = defineJob({ name: "bench.noop", run: () => {} });
  const timed = defineJob({
    name: "bench.timed",
    payload: z.object({ sentAt: z.number() }),
    run: (payload) => {
      latencies.push(nowMs() - payload.sentAt);
    },
  });
  const everySecond = defineJob({ name: "bench.every-second", run: () => {} });
  // Default settings, except no chores: they would add their own rows to the counts.
  const ledger = createCronledger({
    database: url,
    jobs: [noopJob, timed, everySecond],
    schedule: [{ job: everySecond, cron: "* * * * * *" }],
    logger: silentLogger,
    chores: false,
  });
  try {
    await ledger.migrate();
    const enqueuePerSecond = await timedBulkInsert((count) => ledger.enqueueMany(Array.from({ length: count }, () => ({ job: noopJob }))));

    const started = performance.now();
    const summary = await ledger.work({ once: true, concurrency: CONCURRENCY });
    const drainPerSecond = summary.succeeded / ((performance.now() - started) / 1000);

    const working = ledger.work({ concurrency: CONCURRENCY });
    await sleep(200);
    const [startLatencyP50Ms, startLatencyP99Ms] = await measureStartLatency(async (sentAt) => {
      await ledger.enqueue(timed, { sentAt });
    }, latencies);
    await ledger.stop();
    await working;

    await ledger.start({ concurrency: CONCURRENCY, handleSignals: false });
    await sleep(TICKER_SECONDS * 1000);
    await ledger.stop();
    const lags = await query<{ lag_ms: number }>(
      ledger.database.db,
      sql`select (extract(epoch from created_at - scheduled_for) * 1000)::float8 as lag_ms
          from cronledger.jobs where job_name = 'bench.every-second'`,
    );
    const lagValues = lags.map((row) => row.lag_ms);
    return {
      enqueuePerSecond,
      drainPerSecond,
      startLatencyP50Ms,
      startLatencyP99Ms,
      slotToEnqueueP50Ms: percentile(lagValues, 50),
      slotToEnqueueP99Ms: percentile(lagValues, 99),
    };
  } finally {
    await ledger.close();
    await dropDatabase(name);
  }
}

const quietGraphileLogger = new GraphileLogger(() => () => {});

async function benchGraphile(): Promise<SystemFigures> {
  const name = "cronledger_bench_graphile";
  const connectionString = await freshDatabase(name);
  const probe = postgres(connectionString, { max: 1, onnotice: () => {} });
  const utils = await makeWorkerUtils({ connectionString, logger: quietGraphileLogger });
  const latencies: number[] = [];
  // Its recommended fast settings: local queue on, completions batched with no added delay.
  const preset = { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } };
  try {
    await utils.migrate();
    const enqueuePerSecond = await timedBulkInsert((count) => utils.addJobs(Array.from({ length: count }, () => ({ identifier: "noop", payload: {} }))));

    let ran = 0;
    const started = performance.now();
    const runner = await runGraphile({
      connectionString,
      concurrency: CONCURRENCY,
      noHandleSignals: true,
      pollInterval: 1_000,
      logger: quietGraphileLogger,
      preset,
      taskList: {
        noop: async () => {
          ran += 1;
        },
        timed: async (payload) => {
          latencies.push(nowMs() - (payload as { sentAt: number }).sentAt);
        },
      },
    });
    await waitFor(() => ran >= JOBS);
    await waitFor(async () => (await probe`select count(*)::int as n from graphile_worker.jobs`)[0]?.n === 0);
    const drainPerSecond = JOBS / ((performance.now() - started) / 1000);

    const [startLatencyP50Ms, startLatencyP99Ms] = await measureStartLatency(async (sentAt) => {
      await utils.addJob("timed", { sentAt });
    }, latencies);
    await runner.stop();
    return { enqueuePerSecond, drainPerSecond, startLatencyP50Ms, startLatencyP99Ms };
  } finally {
    await utils.release();
    await probe.end({ timeout: 1 });
    await dropDatabase(name);
  }
}

async function benchPgBoss(): Promise<SystemFigures> {
  const name = "cronledger_bench_pgboss";
  const connectionString = await freshDatabase(name);
  const probe = postgres(connectionString, { max: 1, onnotice: () => {} });
  const boss = new PgBoss({ connectionString, max: CONCURRENCY });
  boss.on("error", () => {});
  const latencies: number[] = [];
  try {
    await boss.start();
    await boss.createQueue("noop");
    await boss.createQueue("timed");
    const enqueuePerSecond = await timedBulkInsert((count) => boss.insert(Array.from({ length: count }, () => ({ name: "noop", data: {} }))));

    let ran = 0;
    const started = performance.now();
    // Its fast settings: several workers, each fetching a batch per poll at the shortest polling interval.
    for (let i = 0; i < CONCURRENCY; i += 1) {
      await boss.work("noop", { batchSize: 100, pollingIntervalSeconds: 0.5 }, async (jobs) => {
        ran += jobs.length;
      });
    }
    await waitFor(() => ran >= JOBS);
    await waitFor(async () => (await probe`select count(*)::int as n from pgboss.job where name = 'noop' and state = 'completed'`)[0]?.n === JOBS);
    const drainPerSecond = JOBS / ((performance.now() - started) / 1000);

    await boss.work<{ sentAt: number }>("timed", { batchSize: 10, pollingIntervalSeconds: 0.5 }, async (jobs) => {
      for (const job of jobs) latencies.push(nowMs() - job.data.sentAt);
    });
    const [startLatencyP50Ms, startLatencyP99Ms] = await measureStartLatency(async (sentAt) => {
      await boss.send("timed", { sentAt });
    }, latencies);
    return { enqueuePerSecond, drainPerSecond, startLatencyP50Ms, startLatencyP99Ms };
  } finally {
    await boss.stop({ graceful: false, wait: true }).catch(() => undefined);
    await probe.end({ timeout: 1 });
    await dropDatabase(name);
  }
}

const round = (value: number, digits = 0) => (Number.isFinite(value) ? Number(value.toFixed(digits)) : Number.NaN);
const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(2)}x` : "n/a");

/**
 * 20,000 no-op jobs at concurrency 10 in one process: enqueueMany rate, drain
 * rate, enqueue-to-start latency and the ticker's slot-to-enqueue latency,
 * then the same workload on graphile-worker and pg-boss, each in a fresh
 * database on the same server. Prints a table and returns the figures.
 */
export async function runThroughputBench(): Promise<ThroughputFigures> {
  const cronledger = await benchCronledger();
  const graphileWorker = await benchGraphile();
  const pgBoss = await benchPgBoss();
  const row = (metric: string, pick: (figures: SystemFigures) => number, digits: number, higherIsBetter: boolean) => {
    const [c, g, p] = [pick(cronledger), pick(graphileWorker), pick(pgBoss)];
    return {
      metric,
      cronledger: round(c, digits),
      "graphile-worker 0.17.3": round(g, digits),
      "pg-boss 10.4.2": round(p, digits),
      "cronledger vs graphile": higherIsBetter ? ratio(c, g) : ratio(g, c),
      "cronledger vs pg-boss": higherIsBetter ? ratio(c, p) : ratio(p, c),
    };
  };
  printTable(`Throughput: ${JOBS.toLocaleString("en")} no-op jobs, concurrency ${CONCURRENCY}, one process (ratios: >1x means cronledger is better)`, [
    row(`enqueue jobs/s (bulk calls of ${ENQUEUE_CHUNK.toLocaleString("en")})`, (f) => f.enqueuePerSecond, 0, true),
    row("drain jobs/s", (f) => f.drainPerSecond, 0, true),
    row("enqueue-to-start p50 ms", (f) => f.startLatencyP50Ms, 1, false),
    row("enqueue-to-start p99 ms", (f) => f.startLatencyP99Ms, 1, false),
  ]);
  printTable("Ticker: slot-to-enqueue latency of a 6-field every-second entry under start()", [
    { metric: "p50 ms", cronledger: round(cronledger.slotToEnqueueP50Ms, 1) },
    { metric: "p99 ms", cronledger: round(cronledger.slotToEnqueueP99Ms, 1) },
  ]);
  return { cronledger, graphileWorker, pgBoss };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  await runThroughputBench();
}

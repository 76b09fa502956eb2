// `npm run bench:growth`: the sizes users grow into. The tick over 100,000 entries, and the jobs
// table with 10 million finished rows (made by generate_series, not enqueued): claim latency and
// drain beside an empty table, in alternating rounds, then retention deleting 1 million of them.
// Both databases are dropped at the end (they take a few GB); BENCH_KEEP=1 keeps them.
import type { SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { pathToFileURL } from "node:url";
import postgres from "postgres";
import { z } from "zod";
import { createCronledger, defineJob, silentLogger, type Cronledger } from "../src/index.js";
import {
  dropDatabase,
  envList,
  envNumber,
  formatNumber,
  formatSpread,
  freshDatabase,
  machineLine,
  markdownTable,
  percentile,
  printSection,
  rotate,
  spread,
  type Spread,
} from "./support.js";
import { runTickBench } from "./tick.js";

const SETTINGS = {
  tickEntries: envNumber("BENCH_GROWTH_ENTRIES", 100_000),
  tickRounds: envNumber("BENCH_GROWTH_TICK_ROUNDS", 3),
  historyRows: envNumber("BENCH_HISTORY_ROWS", 10_000_000),
  retentionRows: envNumber("BENCH_RETENTION_ROWS", 1_000_000),
  rounds: envNumber("BENCH_GROWTH_ROUNDS", 3),
  drainJobs: envNumber("BENCH_GROWTH_DRAIN_JOBS", 20_000),
  latencySamples: envNumber("BENCH_LATENCY_SAMPLES", 200),
};
const DAY_MS = 86_400_000;
/** Retention's default: finished jobs are kept 7 days. */
const RETENTION_MS = 7 * DAY_MS;

const dialect = new PgDialect();
const nowMs = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface TimedStatement {
  readonly text: string;
  readonly statement: SQL;
  readonly ms: number;
}

/**
 * Times every statement a ledger sends, by wrapping its drizzle database's
 * execute(): the worker's claims and flushes and retention's deletes all go
 * through it. Measurement only; nothing else changes.
 */
function timeStatements(ledger: Cronledger): TimedStatement[] {
  const log: TimedStatement[] = [];
  const db = ledger.database.db;
  const execute = db.execute.bind(db);
  db.execute = (async (statement: SQL) => {
    const started = performance.now();
    try {
      return await execute(statement);
    } finally {
      log.push({ text: dialect.sqlToQuery(statement).sql.trim(), statement, ms: performance.now() - started });
    }
  }) as typeof db.execute;
  return log;
}

const isClaim = (entry: TimedStatement) => /^update "cronledger"."jobs" as j\s+set "status" = 'running'/.test(entry.text);

// ---- the history ---------------------------------------------------------------------------------

/**
 * Finished rows as the worker leaves them, oldest first, one every 50 ms
 * back from an hour ago; one in fifty failed. The oldest `retentionRows`
 * are past the 7-day retention at the instant `pruneAt` returns.
 */
async function generateHistory(url: string): Promise<{ pruneAt: Date; seconds: number }> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  const started = performance.now();
  try {
    // Indexes are built after the rows (as a restore would), which is minutes faster than row by row.
    const indexes = await sql<{ name: string; definition: string }[]>`
      select indexname as name, indexdef as definition from pg_indexes
      where schemaname = 'cronledger' and tablename = 'jobs' and indexname <> 'jobs_pkey'`;
    for (const index of indexes) await sql.unsafe(`drop index cronledger."${index.name}"`);
    await sql`set synchronous_commit = off`;
    await sql.unsafe(`
      insert into cronledger.jobs (job_name, queue, payload, status, priority, run_at, attempts, max_attempts, created_at, started_at, finished_at, last_error)
      select 'bench.history', 'default', '{}'::jsonb, case when g % 50 = 0 then 'failed' else 'succeeded' end, 0, t, 1, 5, t, t,
        t + interval '3 milliseconds', case when g % 50 = 0 then 'Error: downstream said no' end
      from generate_series(1, ${SETTINGS.historyRows}) as g,
        lateral (select now() - interval '1 hour' - (${SETTINGS.historyRows} - g) * interval '50 milliseconds' as t) as x`);
    for (const index of indexes) await sql.unsafe(index.definition);
    await sql`vacuum (analyze) cronledger.jobs`;
    const [row] = await sql<{ at: Date }[]>`
      select finished_at as at from cronledger.jobs order by id offset ${SETTINGS.retentionRows - 1} limit 1`;
    if (row === undefined) throw new Error("bench: no history rows were generated");
    return { pruneAt: new Date(row.at.getTime() + RETENTION_MS + 1), seconds: (performance.now() - started) / 1000 };
  } finally {
    await sql.end({ timeout: 1 });
  }
}

// ---- claims and drains ---------------------------------------------------------------------------

interface Round {
  readonly drainPerSecond: number;
  readonly drainClaimP50Ms: number;
  readonly drainClaimP99Ms: number;
  readonly idleClaimP50Ms: number;
  readonly idleClaimP99Ms: number;
  readonly startP50Ms: number;
  readonly startP99Ms: number;
}

/**
 * An idle worker gets single jobs 5 ms apart (enqueue-to-start, and the
 * claim statement that took each), then drains `drainJobs` no-op jobs at
 * concurrency 10 (jobs/s, and its claim statements). Producer and worker
 * are separate ledgers with default settings.
 */
async function claimRound(url: string): Promise<Round> {
  const latencies: number[] = [];
  const timed = defineJob({ name: "bench.timed", payload: z.object({ sentAt: z.number() }), run: (payload) => void latencies.push(nowMs() - payload.sentAt) });
  const noop = defineJob({ name: "bench.noop", run: () => {} });
  const jobs = [timed, noop];
  const producer = createCronledger({ database: { url, poolSize: 2 }, jobs, logger: silentLogger, chores: false });
  const worker = createCronledger({ database: url, jobs, logger: silentLogger, chores: false });
  const statements = timeStatements(worker);
  try {
    const working = worker.work({ concurrency: 10 });
    await sleep(300);
    statements.length = 0;
    for (let i = 0; i < SETTINGS.latencySamples; i += 1) {
      await producer.enqueue(timed, { sentAt: nowMs() });
      await sleep(5);
    }
    while (latencies.length < SETTINGS.latencySamples) await sleep(10);
    await worker.stop();
    await working;
    const idleClaims = statements.filter(isClaim).map((entry) => entry.ms);

    for (let done = 0; done < SETTINGS.drainJobs; done += 2_000) {
      await producer.enqueueMany(Array.from({ length: Math.min(2_000, SETTINGS.drainJobs - done) }, () => ({ job: noop })));
    }
    statements.length = 0;
    const started = performance.now();
    const summary = await worker.work({ once: true, concurrency: 10 });
    const drainPerSecond = summary.succeeded / ((performance.now() - started) / 1000);
    const drainClaims = statements.filter(isClaim).map((entry) => entry.ms);
    return {
      drainPerSecond,
      drainClaimP50Ms: percentile(drainClaims, 50),
      drainClaimP99Ms: percentile(drainClaims, 99),
      idleClaimP50Ms: percentile(idleClaims, 50),
      idleClaimP99Ms: percentile(idleClaims, 99),
      startP50Ms: percentile(latencies, 50),
      startP99Ms: percentile(latencies, 99),
    };
  } finally {
    await producer.close();
    await worker.close();
  }
}

/** EXPLAIN (ANALYZE, BUFFERS) of a captured statement, rolled back: where its time goes. */
async function explain(url: string, statement: SQL): Promise<string> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  const rollback = new Error("rollback");
  let plan: { "QUERY PLAN": string }[] = [];
  try {
    const query = dialect.sqlToQuery(statement);
    await sql
      .begin(async (tx) => {
        plan = await tx.unsafe<{ "QUERY PLAN": string }[]>(`explain (analyze, buffers) ${query.sql}`, query.params as never[]);
        throw rollback;
      })
      .catch((error: unknown) => {
        if (error !== rollback) throw error;
      });
    return plan.map((line) => line["QUERY PLAN"]).join("\n");
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/** The claim a worker makes for one ready job, explained on `url` (captured from a real worker, then rolled back). */
async function explainClaim(url: string): Promise<string> {
  const job = defineJob({ name: "bench.explain", run: () => {} });
  const ledger = createCronledger({ database: { url, poolSize: 2 }, jobs: [job], logger: silentLogger, chores: false });
  const statements = timeStatements(ledger);
  try {
    await ledger.work({ once: true, concurrency: 1 });
    const claim = statements.find(isClaim);
    await ledger.enqueue(job);
    return claim === undefined ? "(no claim captured)" : await explain(url, claim.statement);
  } finally {
    const cleanup = postgres(url, { max: 1, onnotice: () => {} });
    await cleanup`delete from cronledger.jobs where job_name = 'bench.explain'`;
    await cleanup.end({ timeout: 1 });
    await ledger.close();
  }
}

async function statusSeconds(url: string): Promise<number> {
  const ledger = createCronledger({ database: { url, poolSize: 2 }, logger: silentLogger, chores: false });
  try {
    const started = performance.now();
    await ledger.status();
    return (performance.now() - started) / 1000;
  } finally {
    await ledger.close();
  }
}

// ---- retention -----------------------------------------------------------------------------------

/** The first statement retention sends, captured by a run that stops before it reaches the database. */
async function firstRetentionStatement(url: string, pruneAt: Date): Promise<SQL | undefined> {
  const ledger = createCronledger({ database: { url, poolSize: 2 }, logger: silentLogger, chores: true });
  const db = ledger.database.db;
  const execute = db.execute.bind(db);
  let captured: SQL | undefined;
  const stop = new Error("captured");
  db.execute = (async (statement: SQL) => {
    if (!/delete from "cronledger"."jobs"/.test(dialect.sqlToQuery(statement).sql)) return execute(statement);
    captured = statement;
    throw stop;
  }) as typeof db.execute;
  try {
    await ledger.prune({ now: pruneAt }).catch((error: unknown) => {
      if (error !== stop) throw error;
    });
    return captured;
  } finally {
    await ledger.close();
  }
}

async function retention(url: string, pruneAt: Date): Promise<{ rows: number; statements: number; longestMs: number; totalS: number; plan: string }> {
  const first = await firstRetentionStatement(url, pruneAt);
  const plan = first === undefined ? "(no delete statement captured)" : await explain(url, first);
  const ledger = createCronledger({ database: { url, poolSize: 2 }, logger: silentLogger, chores: true });
  const statements = timeStatements(ledger);
  try {
    const started = performance.now();
    const removed = await ledger.prune({ now: pruneAt });
    const totalS = (performance.now() - started) / 1000;
    const deletes = statements.filter((entry) => /delete from "cronledger"."jobs"/.test(entry.text)).map((entry) => entry.ms);
    return { rows: removed.jobRows, statements: deletes.length, longestMs: Math.max(0, ...deletes), totalS, plan };
  } finally {
    await ledger.close();
  }
}

// ---- the whole bench -----------------------------------------------------------------------------

function row(label: string, empty: Spread, history: Spread, digits: number): string[] {
  const ratio = empty.median > 0 ? `${((history.median / empty.median) * 100).toFixed(0)} %` : "n/a";
  return [label, formatSpread(empty, digits), formatSpread(history, digits), ratio];
}

export async function runGrowthBench(): Promise<void> {
  const parts = envList("BENCH_GROWTH_PARTS", ["tick", "claims", "retention"]);
  if (parts.includes("tick")) await runTickBench([SETTINGS.tickEntries], SETTINGS.tickRounds);
  if (!parts.includes("claims") && !parts.includes("retention")) return;

  const names = { empty: "cronledger_bench_growth_empty", history: "cronledger_bench_growth_history" } as const;
  const urls = { empty: await freshDatabase(names.empty), history: await freshDatabase(names.history) };
  try {
    for (const url of Object.values(urls)) {
      const ledger = createCronledger({ database: { url, poolSize: 2 }, logger: silentLogger });
      await ledger.migrate();
      await ledger.close();
    }
    const generated = await generateHistory(urls.history);
    console.log(`\ngenerated ${formatNumber(SETTINGS.historyRows)} finished rows (indexes and VACUUM ANALYZE included) in ${generated.seconds.toFixed(0)} s`);
    const sizes = postgres(urls.history, { max: 1, onnotice: () => {} });
    const [size] = await sizes<{ table: string; indexes: string }[]>`
      select pg_size_pretty(pg_table_size('cronledger.jobs')) as table, pg_size_pretty(pg_indexes_size('cronledger.jobs')) as indexes`;
    await sizes.end({ timeout: 1 });

    const results = { empty: [] as Round[], history: [] as Round[] };
    for (let round = 0; round < (parts.includes("claims") ? SETTINGS.rounds : 0); round += 1) {
      for (const which of rotate(["empty", "history"] as const, round)) {
        const result = await claimRound(urls[which]);
        results[which].push(result);
        console.log(`round ${round + 1}/${SETTINGS.rounds} ${which}: drain ${formatNumber(result.drainPerSecond)} jobs/s, idle claim p50 ${result.idleClaimP50Ms.toFixed(2)} ms`);
        // The empty table starts every round empty; the history keeps the few drained rows, as a live table would.
        if (which === "empty") {
          const sql = postgres(urls.empty, { max: 1, onnotice: () => {} });
          await sql`truncate cronledger.jobs`;
          await sql.end({ timeout: 1 });
        }
      }
    }
    if (parts.includes("claims")) await claimTables(urls, results, size);
    if (parts.includes("retention")) {
      const pruned = await retention(urls.history, generated.pruneAt);
      printSection(
        `Retention deleting the ${formatNumber(SETTINGS.retentionRows)} oldest of ${formatNumber(SETTINGS.historyRows)} finished rows (batches of 1,000, the default)`,
        markdownTable(
          ["rows deleted", "statements", "longest statement", "total", "rows/s"],
          [[formatNumber(pruned.rows), formatNumber(pruned.statements), `${pruned.longestMs.toFixed(1)} ms`, `${pruned.totalS.toFixed(1)} s`, formatNumber(pruned.rows / pruned.totalS)]],
        ) + "\n\nThe first batch's plan, with the whole backlog there (EXPLAIN (ANALYZE, BUFFERS), rolled back):\n\n```\n" + pruned.plan + "\n```",
      );
    }
  } finally {
    if (!process.env.BENCH_KEEP) {
      await dropDatabase(names.empty);
      await dropDatabase(names.history);
    }
  }
}

async function claimTables(urls: { empty: string; history: string }, results: { empty: Round[]; history: Round[] }, size: { table: string; indexes: string } | undefined): Promise<void> {
  const figure = (which: "empty" | "history", pick: (round: Round) => number) => spread(results[which].map(pick));
  const rounds = `${SETTINGS.rounds} round${SETTINGS.rounds === 1 ? "" : "s"}, alternating`;
  printSection(
    `Jobs table with ${formatNumber(SETTINGS.historyRows)} finished rows (${size?.table} heap, ${size?.indexes} indexes) beside an empty one (median (min–max) of ${rounds})`,
    markdownTable(
      ["figure", "empty table", `${formatNumber(SETTINGS.historyRows)} finished rows`, "history / empty"],
      [
        row("claim statement, idle worker, p50 ms", figure("empty", (r) => r.idleClaimP50Ms), figure("history", (r) => r.idleClaimP50Ms), 2),
        row("claim statement, idle worker, p99 ms", figure("empty", (r) => r.idleClaimP99Ms), figure("history", (r) => r.idleClaimP99Ms), 2),
        row("enqueue-to-start, idle worker, p50 ms", figure("empty", (r) => r.startP50Ms), figure("history", (r) => r.startP50Ms), 1),
        row("enqueue-to-start, idle worker, p99 ms", figure("empty", (r) => r.startP99Ms), figure("history", (r) => r.startP99Ms), 1),
        row(`claim statement during a drain of ${formatNumber(SETTINGS.drainJobs)}, p50 ms`, figure("empty", (r) => r.drainClaimP50Ms), figure("history", (r) => r.drainClaimP50Ms), 2),
        row(`claim statement during a drain of ${formatNumber(SETTINGS.drainJobs)}, p99 ms`, figure("empty", (r) => r.drainClaimP99Ms), figure("history", (r) => r.drainClaimP99Ms), 2),
        row("drain jobs/s (one process, concurrency 10)", figure("empty", (r) => r.drainPerSecond), figure("history", (r) => r.drainPerSecond), 0),
      ],
    ),
  );
  printSection("The claim for one ready job, with the history (EXPLAIN (ANALYZE, BUFFERS), rolled back)", "```\n" + (await explainClaim(urls.history)) + "\n```");
  console.log(`\nstatus() (the admin status; it counts jobs by queue and status): ${(await statusSeconds(urls.empty)).toFixed(3)} s on the empty table, ${(await statusSeconds(urls.history)).toFixed(3)} s with the history`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(await machineLine("before"));
  const started = performance.now();
  await runGrowthBench();
  console.log(`\n${await machineLine("after")}; the bench took ${((performance.now() - started) / 60_000).toFixed(1)} min`);
}

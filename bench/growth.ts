// `npm run bench:growth`: the sizes users grow into. The tick over 100,000 entries, and a history
// of 10 million finished jobs, 1 million a day for 10 days (made by generate_series, not enqueued;
// 1 in 100 a run of one of 1,000 schedule entries): claim latency, drain, status() and the Schedule
// page beside an empty database, in alternating rounds, then retention of the oldest day.
// Both databases are dropped at the end (they take a few GB); BENCH_KEEP=1 keeps them. BENCH_REUSE=1
// keeps them and starts from them when they exist (migrated again; retention's dropped day is made
// again after it, the same rows). Smaller: BENCH_HISTORY_ROWS=1000000 BENCH_RETENTION_ROWS=100000
// (rows per day). Parts: BENCH_GROWTH_PARTS=tick,claims,reads,retention (reads: status() and the
// page alone). BENCH_GROWTH_DB names the databases' prefix (cronledger_bench_growth).
import type { SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { pathToFileURL } from "node:url";
import postgres from "postgres";
import { z } from "zod";
import { createAdminHandler, createCronledger, defineJob, silentLogger, type Cronledger } from "../src/index.js";
import { historyPartitions } from "../src/db/sql/partitions.js";
import { generateHistory, historySize, TRUNCATE_JOBS } from "./history.js";
import {
  dropDatabase,
  envList,
  envNumber,
  formatNumber,
  formatSpread,
  freshDatabase,
  keptDatabase,
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
  /** Rows per day of history: retention drops one such day. */
  retentionRows: envNumber("BENCH_RETENTION_ROWS", 1_000_000),
  statusEntries: envNumber("BENCH_GROWTH_STATUS_ENTRIES", 1_000),
  rounds: envNumber("BENCH_GROWTH_ROUNDS", 3),
  drainJobs: envNumber("BENCH_GROWTH_DRAIN_JOBS", 20_000),
  latencySamples: envNumber("BENCH_LATENCY_SAMPLES", 200),
  /** status() and the Schedule page, read this many times each per database. */
  reads: envNumber("BENCH_GROWTH_READS", 5),
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

const isClaim = (entry: TimedStatement) => /^update "cronledger"."job_queue" as j\s+set "status" = 'running'/.test(entry.text);

// ---- the history ---------------------------------------------------------------------------------

/** The job of the schedule entries whose runs the history holds, and their schedule (every minute, keys e0, e1, ...). */
const scheduled = defineJob({ name: "bench.scheduled", run: () => {} });
const statusSchedule = () => Array.from({ length: SETTINGS.statusEntries }, (_, index) => ({ job: scheduled, cron: "* * * * *", key: `e${index}` }));

/**
 * `retentionRows` finished rows a day for historyRows / retentionRows whole UTC days, ending at
 * the start of today; one in fifty failed, one in a hundred a run of one of the status entries.
 * Returns the instant at which retention's 7 days make the oldest day, and only it, droppable.
 */
async function fillHistory(url: string, ledgerKeys: readonly string[]): Promise<{ pruneAt: Date; seconds: number }> {
  const today = Math.floor(Date.now() / DAY_MS) * DAY_MS;
  const days = Math.ceil(SETTINGS.historyRows / SETTINGS.retentionRows);
  const seconds = await generateHistory(url, {
    rows: SETTINGS.historyRows,
    end: new Date(today),
    spacingMs: DAY_MS / SETTINGS.retentionRows,
    scheduleKeys: ledgerKeys,
    scheduledEvery: 100,
  });
  return { pruneAt: new Date(today - (days - 1) * DAY_MS + RETENTION_MS + 3_600_000), seconds };
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
 * are separate ledgers with default settings. The queue table is vacuumed
 * first in both databases: the history database's queue otherwise carried
 * the dead rows of the previous rounds' drains (the empty one is truncated
 * between rounds), and the claim's index scan paid for them, which is the
 * queue's churn (autovacuum's business), not the history's size.
 */
async function claimRound(url: string): Promise<Round> {
  const maintenance = postgres(url, { max: 1, onnotice: () => {} });
  await maintenance.unsafe("vacuum (analyze) cronledger.job_queue");
  await maintenance.end({ timeout: 1 });
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
    await cleanup`delete from cronledger.job_queue where job_name = 'bench.explain'`;
    await cleanup.end({ timeout: 1 });
    await ledger.close();
  }
}

/** status() and the Schedule page with the status entries, `rounds` times each (ms). */
async function statusAndPage(url: string): Promise<{ status: number[]; page: number[] }> {
  const ledger = createCronledger({ database: { url, poolSize: 2 }, jobs: [scheduled], schedule: statusSchedule(), logger: silentLogger, chores: false });
  const handler = createAdminHandler(ledger, { token: "bench-token-0123456789" });
  const timings = { status: [] as number[], page: [] as number[] };
  try {
    for (let round = 0; round < SETTINGS.reads; round += 1) {
      let started = performance.now();
      await ledger.status();
      timings.status.push(performance.now() - started);
      started = performance.now();
      const page = await handler(new Request("http://127.0.0.1/admin/scheduler", { headers: { authorization: "Bearer bench-token-0123456789" } }));
      if (page.status !== 200) throw new Error(`bench: the page answered ${page.status}`);
      await page.text();
      timings.page.push(performance.now() - started);
    }
    return timings;
  } finally {
    await ledger.close();
  }
}

// ---- retention -----------------------------------------------------------------------------------

/** Retention at `pruneAt` (the oldest day past 7 days): every statement it sends, timed. */
async function retention(url: string, pruneAt: Date): Promise<{ rows: number; statements: number; longestMs: number; longest: string; totalS: number; top: string }> {
  const ledger = createCronledger({ database: { url, poolSize: 2 }, logger: silentLogger, chores: true });
  const statements = timeStatements(ledger);
  try {
    const started = performance.now();
    const removed = await ledger.prune({ now: pruneAt });
    const totalS = (performance.now() - started) / 1000;
    const longest = statements.reduce((max, entry) => (entry.ms > max.ms ? entry : max), { text: "", ms: 0 } as Pick<TimedStatement, "text" | "ms">);
    // The history's own statements (keys, counters, detach and drops), apart from the chore's other tables (workers, schedule versions, the ledger).
    const history = statements.filter((entry) => /job_history|job_keys|job_counts|pg_inherits|pg_partition_tree/.test(entry.text));
    const top = [...history]
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 5)
      .map((entry) => `${entry.ms.toFixed(1)} ms \`${entry.text.replace(/\s+/g, " ").replace(/^do \$cronledger\$ begin perform set_config\('lock_timeout', '50', true\); /, "").slice(0, 110)}\``)
      .join("\n- ");
    const historyMs = history.reduce((sum, entry) => sum + entry.ms, 0);
    return {
      rows: removed.jobRows,
      statements: statements.length,
      longestMs: longest.ms,
      longest: longest.text.replace(/\s+/g, " ").slice(0, 120),
      totalS,
      top: `${history.length} of them on the history, ${historyMs.toFixed(0)} ms in all; its longest five:\n- ${top}`,
    };
  } finally {
    await ledger.close();
  }
}

// ---- the whole bench -----------------------------------------------------------------------------

function row(label: string, empty: Spread, history: Spread, digits: number): string[] {
  const ratio = empty.median > 0 ? `${((history.median / empty.median) * 100).toFixed(0)} %` : "n/a";
  return [label, formatSpread(empty, digits), formatSpread(history, digits), ratio];
}

/** The UTC day (ms) of the history's oldest day that holds rows (by job_counts), or undefined. */
async function oldestDay(url: string): Promise<number | undefined> {
  const ledger = createCronledger({ database: { url, poolSize: 2 }, logger: silentLogger, chores: false });
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const days = new Set((await historyPartitions(ledger.database.db)).filter((partition) => partition.kind === "day").map((partition) => partition.day));
    const counted = await sql<{ day: string }[]>`select distinct to_char(day, 'YYYYMMDD') as day from cronledger.job_counts where n > 0 order by 1`;
    const day = counted.map((row) => row.day).find((candidate) => days.has(candidate));
    return day === undefined ? undefined : Date.parse(`${day.slice(0, 4)}-${day.slice(4, 6)}-${day.slice(6, 8)}T00:00:00Z`);
  } finally {
    await sql.end({ timeout: 1 });
    await ledger.close();
  }
}

/** BENCH_REUSE: the databases of an earlier run, if both exist and the history holds rows; else undefined. */
async function reusedDatabases(names: { empty: string; history: string }): Promise<{ urls: { empty: string; history: string }; pruneAt: Date; oldest: number } | undefined> {
  if (process.env.BENCH_REUSE !== "1") return undefined;
  const empty = await keptDatabase(names.empty);
  const history = await keptDatabase(names.history);
  if (!empty.existed || !history.existed) return undefined;
  // A fill that stopped half-way (its indexes dropped) is not reused: the databases are made again.
  const check = postgres(history.url, { max: 1, onnotice: () => {} });
  const [complete] = await check<{ ok: boolean }[]>`select to_regclass('cronledger.job_history_runs_idx') is not null as ok`.finally(() => check.end({ timeout: 1 }));
  const oldest = complete?.ok ? await oldestDay(history.url).catch(() => undefined) : undefined;
  if (oldest === undefined) return undefined;
  // Migrated again (a branch may add migrations); the history's oldest day, and only it, is past 7 days at pruneAt.
  for (const url of [empty.url, history.url]) {
    const ledger = createCronledger({ database: { url, poolSize: 2 }, jobs: [scheduled], schedule: statusSchedule(), logger: silentLogger, chores: false });
    await ledger.migrate();
    await ledger.close();
  }
  return { urls: { empty: empty.url, history: history.url }, pruneAt: new Date(oldest + DAY_MS + RETENTION_MS + 3_600_000), oldest };
}

/** BENCH_REUSE: the day retention dropped, made again with the same rows (ids, keys, slots) as the first fill made it. */
async function refillDay(url: string, day: number, ledgerKeys: readonly string[]): Promise<number> {
  const spacingMs = DAY_MS / SETTINGS.retentionRows;
  // One row fewer than a day: the fill's row at the day's end finishes 3 ms into the next day, which was kept.
  return generateHistory(url, { rows: SETTINGS.retentionRows - 1, end: new Date(day + DAY_MS - spacingMs), spacingMs, scheduleKeys: ledgerKeys, scheduledEvery: 100, addToExisting: true });
}

export async function runGrowthBench(): Promise<void> {
  const parts = envList("BENCH_GROWTH_PARTS", ["tick", "claims", "retention"]);
  if (parts.includes("tick")) await runTickBench([SETTINGS.tickEntries], SETTINGS.tickRounds);
  if (!parts.some((part) => ["claims", "reads", "retention"].includes(part))) return;

  const prefix = process.env.BENCH_GROWTH_DB ?? "cronledger_bench_growth";
  const names = { empty: `${prefix}_empty`, history: `${prefix}_history` } as const;
  const reused = await reusedDatabases(names);
  const keep = process.env.BENCH_KEEP !== undefined || process.env.BENCH_REUSE === "1";
  const urls = reused?.urls ?? { empty: await freshDatabase(names.empty), history: await freshDatabase(names.history) };
  try {
    const keysOf = createCronledger({ database: { url: urls.empty, poolSize: 2 }, jobs: [scheduled], schedule: statusSchedule(), logger: silentLogger, chores: false });
    const ledgerKeys = keysOf.entries.map((entry) => entry.ledgerKey);
    await keysOf.close();
    let generated: { pruneAt: Date } = reused ?? { pruneAt: new Date(0) };
    if (reused === undefined) {
      for (const url of Object.values(urls)) {
        // Migrated, and the status entries' ledger rows made by a pass.
        const ledger = createCronledger({ database: { url, poolSize: 2 }, jobs: [scheduled], schedule: statusSchedule(), logger: silentLogger, chores: false });
        await ledger.migrate();
        await ledger.tick();
        await ledger.close();
      }
      const filled = await fillHistory(urls.history, ledgerKeys);
      generated = filled;
      console.log(`\ngenerated ${formatNumber(SETTINGS.historyRows)} finished rows (indexes and VACUUM ANALYZE included) in ${filled.seconds.toFixed(0)} s`);
    } else {
      console.log(`\nreusing ${names.history} (BENCH_REUSE=1)`);
    }
    const size = await historySize(urls.history);

    const results = { empty: [] as Round[], history: [] as Round[] };
    for (let round = 0; round < (parts.includes("claims") ? SETTINGS.rounds : 0); round += 1) {
      for (const which of rotate(["empty", "history"] as const, round)) {
        const result = await claimRound(urls[which]);
        results[which].push(result);
        console.log(`round ${round + 1}/${SETTINGS.rounds} ${which}: drain ${formatNumber(result.drainPerSecond)} jobs/s, idle claim p50 ${result.idleClaimP50Ms.toFixed(2)} ms`);
        // The empty table starts every round empty; the history keeps the few drained rows, as a live table would.
        if (which === "empty") {
          const sql = postgres(urls.empty, { max: 1, onnotice: () => {} });
          await sql.unsafe(TRUNCATE_JOBS);
          await sql.end({ timeout: 1 });
        }
      }
    }
    if (parts.includes("claims")) await claimTables(urls, results, size);
    if (parts.includes("reads")) await readsTable(urls);
    if (parts.includes("retention")) {
      const oldest = await oldestDay(urls.history);
      const pruned = await retention(urls.history, generated.pruneAt);
      printSection(
        `Retention of the oldest day (${formatNumber(SETTINGS.retentionRows)} rows) of ${formatNumber(SETTINGS.historyRows)} finished rows: the whole prune chore's job part`,
        markdownTable(
          ["rows removed", "statements", "longest statement", "total"],
          [[formatNumber(pruned.rows), formatNumber(pruned.statements), `${pruned.longestMs.toFixed(1)} ms`, `${(pruned.totalS * 1000).toFixed(0)} ms`]],
        ) + `\n\n${pruned.top}`,
      );
      if (process.env.BENCH_REUSE === "1" && oldest !== undefined) console.log(`\nmade the dropped day again in ${(await refillDay(urls.history, oldest, ledgerKeys)).toFixed(0)} s`);
    }
  } finally {
    if (!keep) {
      await dropDatabase(names.empty);
      await dropDatabase(names.history);
    }
  }
}

async function claimTables(urls: { empty: string; history: string }, results: { empty: Round[]; history: Round[] }, size: { table: string; indexes: string } | undefined): Promise<void> {
  const figure = (which: "empty" | "history", pick: (round: Round) => number) => spread(results[which].map(pick));
  const rounds = `${SETTINGS.rounds} round${SETTINGS.rounds === 1 ? "" : "s"}, alternating`;
  printSection(
    `History of ${formatNumber(SETTINGS.historyRows)} finished jobs (${size?.table} heap, ${size?.indexes} indexes) beside an empty one (median (min–max) of ${rounds})`,
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
  await readsTable(urls);
}

/** status() and the Schedule page on both databases. */
async function readsTable(urls: { empty: string; history: string }): Promise<void> {
  const reads = { empty: await statusAndPage(urls.empty), history: await statusAndPage(urls.history) };
  printSection(
    `status() and the Schedule page, ${formatNumber(SETTINGS.statusEntries)} entries (median (min–max) of ${SETTINGS.reads}, ms)`,
    markdownTable(
      ["figure", "empty database", `${formatNumber(SETTINGS.historyRows)} finished rows`, "history / empty"],
      [
        row("status()", spread(reads.empty.status), spread(reads.history.status), 1),
        row("Schedule page", spread(reads.empty.page), spread(reads.history.page), 1),
      ],
    ),
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(await machineLine("before"));
  const started = performance.now();
  await runGrowthBench();
  console.log(`\n${await machineLine("after")}; the bench took ${((performance.now() - started) / 60_000).toFixed(1)} min`);
}

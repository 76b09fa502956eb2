// The scheduler tick over N hourly entries: creating the ledger rows, idle passes, a fresh
// process's first (cold) pass, an all-due pass, and the heap and RSS that holding the entries costs.
import { pathToFileURL } from "node:url";
import postgres from "postgres";
import { createCronledger, defineJob, silentLogger, type ScheduleEntry } from "../src/index.js";
import { dropDatabase, envList, envNumber, formatNumber, formatSpread, freshDatabase, markdownTable, median, printSection, spread } from "./support.js";
import { TRUNCATE_JOBS } from "./history.js";

const job = defineJob({ name: "bench.tick", run: () => {} });
const HOUR = 3_600_000;
const START = Date.parse("2026-06-01T00:00:00.000Z");
const IDLE_PASSES = 20;
const MB = 1024 * 1024;

export interface TickRound {
  readonly loadMs: number;
  readonly createPassMs: number;
  readonly idlePassMs: number;
  readonly idleStatements: number;
  readonly coldPassMs: number;
  readonly duePassMs: number;
  readonly dueStatements: number;
  readonly enqueued: number;
  readonly heapMb: number;
  readonly rssMb: number;
  /** The prune chore's ledger statement (the grace check against the running schedules' reports), every row kept. */
  readonly pruneMs: number;
  /** A process's first report of its schedule (its N keys); later reports only move a timestamp. */
  readonly reportMs: number;
}

const collect = globalThis.gc as (() => void) | undefined;

/** Heap and RSS after a full collection (run node with --expose-gc; without it the figures include garbage). */
function memory(): { heap: number; rss: number } {
  collect?.();
  collect?.();
  const usage = process.memoryUsage();
  return { heap: usage.heapUsed, rss: usage.rss };
}

async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const result = await work();
  return [result, performance.now() - started];
}

async function tickRound(url: string, size: number): Promise<TickRound> {
  const probe = postgres(url, { max: 1, onnotice: () => {} });
  await probe.unsafe(`${TRUNCATE_JOBS}, cronledger.schedule_state, cronledger.schedule_versions`);
  await probe.end({ timeout: 1 });
  const before = memory();
  const loadStarted = performance.now();
  const schedule: ScheduleEntry[] = Array.from({ length: size }, (_, index) => ({ job, cron: "0 * * * *", key: `e${index}` }));
  const ledger = createCronledger({ database: { url, poolSize: 4 }, jobs: [job], schedule, logger: silentLogger, metrics: false, passTimeout: "5m" });
  const loadMs = performance.now() - loadStarted;
  try {
    const [, createPassMs] = await timed(() => ledger.tick({ now: new Date(START + 1_000) }));
    const idleTimes: number[] = [];
    let idleStatements = 0;
    for (let pass = 0; pass < IDLE_PASSES; pass += 1) {
      const [report, ms] = await timed(() => ledger.tick({ now: new Date(START + 60_000 * (pass + 1)) }));
      idleTimes.push(ms);
      idleStatements = report.statements;
    }
    // Holding the entries: the schedule as loaded plus what the passes remember of each entry.
    const held = memory();
    const [due, duePassMs] = await timed(() => ledger.tick({ now: new Date(START + HOUR + 1_000) }));
    // A process that just started has no memo: its first pass reads every ledger row.
    const cold = createCronledger({ database: { url, poolSize: 2 }, jobs: [job], schedule, logger: silentLogger, metrics: false });
    const [, coldPassMs] = await timed(() => cold.tick({ now: new Date(START + HOUR + 60_000) }));
    await cold.close();
    const [, reportMs] = await timed(() => ledger.scheduler.reportSchedule());
    const [, pruneMs] = await timed(() => ledger.pruneLedger());
    return {
      loadMs,
      createPassMs,
      idlePassMs: median(idleTimes),
      idleStatements,
      coldPassMs,
      duePassMs,
      dueStatements: due.statements,
      enqueued: due.enqueued.length,
      heapMb: (held.heap - before.heap) / MB,
      rssMb: (held.rss - before.rss) / MB,
      pruneMs,
      reportMs,
    };
  } finally {
    await ledger.close();
  }
}

/**
 * Every size in every round (sizes from BENCH_TICK_SIZES, rounds from
 * BENCH_TICK_ROUNDS); prints a markdown table of medians and ranges.
 */
export async function runTickBench(
  sizes: readonly number[] = envList("BENCH_TICK_SIZES", ["1000", "10000", "50000"]).map(Number),
  rounds = envNumber("BENCH_TICK_ROUNDS", 3),
): Promise<Map<number, TickRound[]>> {
  const name = "cronledger_bench_tick";
  const url = await freshDatabase(name);
  const results = new Map<number, TickRound[]>();
  try {
    const setup = createCronledger({ database: { url, poolSize: 2 }, logger: silentLogger, metrics: false });
    await setup.migrate();
    await setup.close();
    for (let round = 0; round < rounds; round += 1) {
      for (const size of sizes) results.set(size, [...(results.get(size) ?? []), await tickRound(url, size)]);
    }
  } finally {
    await dropDatabase(name);
  }
  const column = (size: number, pick: (round: TickRound) => number, digits: number) => formatSpread(spread((results.get(size) ?? []).map(pick)), digits);
  printSection(
    `Scheduler tick over N hourly entries (median (min–max) of ${rounds} round${rounds === 1 ? "" : "s"}${collect ? "" : "; memory without --expose-gc includes garbage"})`,
    markdownTable(
      ["entries", "load schedule", "first pass (creates rows)", "idle pass", "idle statements", "cold idle pass", "all-due pass", "all-due statements", "heap held", "RSS growth", "ledger prune", "schedule report"],
      sizes.map((size) => [
        formatNumber(size),
        `${column(size, (r) => r.loadMs, 0)} ms`,
        `${column(size, (r) => r.createPassMs, 0)} ms`,
        `${column(size, (r) => r.idlePassMs, 1)} ms`,
        column(size, (r) => r.idleStatements, 0),
        `${column(size, (r) => r.coldPassMs, 0)} ms`,
        `${column(size, (r) => r.duePassMs, 0)} ms`,
        column(size, (r) => r.dueStatements, 0),
        `${column(size, (r) => r.heapMb, 1)} MB`,
        `${column(size, (r) => r.rssMb, 1)} MB`,
        `${column(size, (r) => r.pruneMs, 1)} ms`,
        `${column(size, (r) => r.reportMs, 1)} ms`,
      ]),
    ),
  );
  return results;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const sizes = process.argv.slice(2).map(Number).filter((size) => size > 0);
  await runTickBench(sizes.length > 0 ? sizes : undefined);
}

// Schedules as data (ledger.schedules) at N stored entries, side by side in one run: the bulk load, the idle pass (an index
// probe, whatever is stored), 10,000 entries due at one instant fired by one replica and by two, the status's counts and
// the first page, and the heap of a replica. Sizes from BENCH_DYNAMIC_SIZES (default 1,000, 10,000 and 1,000,000: at
// 10,000 and at 1,000,000 the same 10,000 are due, so the two show what the number stored adds to a due pass), rounds from
// BENCH_DYNAMIC_ROUNDS. pg-boss's schedule() (1-minute resolution, every schedule read each interval) is not run here yet.
import { loadavg } from "node:os";
import { pathToFileURL } from "node:url";
import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { createCronledger, defineJob, silentLogger } from "../src/index.js";
import { dropDatabase, envList, envNumber, formatNumber, formatSpread, freshDatabase, machineLine, markdownTable, printSection, spread } from "./support.js";

const job = defineJob({ name: "bench.dynamic", run: () => {} });
const START = Date.parse("2027-01-04T00:00:00.000Z");
const BATCH = 100_000;
const DUE = envNumber("BENCH_DYNAMIC_DUE", 10_000);
const IDLE_PASSES = 20;
const collect = globalThis.gc as (() => void) | undefined;
const heapMb = () => (collect?.(), collect?.(), process.memoryUsage().heapUsed / 1024 / 1024);

interface DynamicRound {
  readonly loadMs: number;
  readonly analyzeMs: number;
  readonly idleMs: number;
  readonly dueOneMs: number;
  /** The process's CPU (user + system) over dueOneMs: what a change to the pass's own work saves, less blurred by the load. */
  readonly dueOneCpuMs: number;
  readonly dueTwoMs: number;
  readonly dueTwoFired: number;
  readonly countsMs: number;
  readonly pageMs: number;
  readonly heapMb: number;
  /** The 1-minute load average when the round began (the machine is shared). */
  readonly load: number;
}

async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  return [await work(), performance.now() - started];
}

async function round(url: string, size: number): Promise<DynamicRound> {
  const load = loadavg()[0] ?? 0;
  const client = postgres(url, { max: 2, onnotice: () => {} });
  await client.unsafe("truncate cronledger.dynamic_schedules, cronledger.dynamic_schedule_counts, cronledger.schedule_state, cronledger.job_queue, cronledger.job_keys");
  const open = () => createCronledger({ database: { url, poolSize: 4 }, jobs: [job], logger: silentLogger, metrics: false, chores: false, passTimeout: "5m" });
  const [a, b] = [open(), open()];
  const app = drizzle(client);
  // Yearly entries (03:00 on 1 January); the first DUE of them daily at 00:30 instead, so they come due together.
  const entry = (index: number) => ({ key: `tenant:${String(index).padStart(8, "0")}:digest`, job, cron: index < DUE ? "30 0 * * *" : "0 3 1 1 *" });
  let loadMs = 0;
  for (let from = 0; from < size; from += BATCH) {
    const entries = Array.from({ length: Math.min(BATCH, size - from) }, (_, i) => entry(from + i));
    const [, ms] = await timed(() => app.transaction((tx) => a.schedules.upsertMany(entries, { db: tx, now: new Date(START) })));
    loadMs += ms;
  }
  // Statistics of the loaded tables, as autovacuum gathers them within a minute of a bulk load: without them the planner
  // takes a million rows for a few and a page or a pass joins every ledger row (tens of seconds; docs/benchmarks.md).
  const [, analyzeMs] = await timed(() => client.unsafe("analyze cronledger.dynamic_schedules, cronledger.schedule_state"));
  const heapBefore = heapMb();
  const idle: number[] = [];
  for (let i = 0; i < IDLE_PASSES; i += 1) idle.push((await timed(() => a.tick({ now: new Date(START + 60_000 + i * 1_000) })))[1]);
  const cpuBefore = process.cpuUsage();
  const [, dueOneMs] = await timed(async () => {
    for (let report = await a.tick({ now: new Date(START + 1_800_000) }); report.nextFireAt !== null && report.nextFireAt.getTime() <= START + 1_800_000; ) {
      report = await a.tick({ now: new Date(START + 1_800_000) });
    }
  });
  const cpu = process.cpuUsage(cpuBefore);
  const dueOneCpuMs = (cpu.user + cpu.system) / 1_000;
  // The next day's slot of the same entries, by two replicas ticking together until neither takes more.
  const next = START + 86_400_000 + 1_800_000;
  let dueTwoFired = 0;
  const [, dueTwoMs] = await timed(async () => {
    for (;;) {
      const reports = await Promise.all([a.tick({ now: new Date(next) }), b.tick({ now: new Date(next) })]);
      dueTwoFired += reports.reduce((sum, report) => sum + report.enqueued.length, 0);
      if (reports.every((report) => report.nextFireAt === null || report.nextFireAt.getTime() > next)) break;
    }
  });
  const [, countsMs] = await timed(() => a.schedules.counts());
  const [, pageMs] = await timed(() => a.schedules.list({ limit: 100 }));
  const held = heapMb() - heapBefore;
  await Promise.all([a.close(), b.close(), client.end({ timeout: 1 })]);
  idle.sort((x, y) => x - y);
  return { loadMs, analyzeMs, idleMs: idle[Math.floor(idle.length / 2)]!, dueOneMs, dueOneCpuMs, dueTwoMs, dueTwoFired, countsMs, pageMs, heapMb: held, load };
}

export async function runDynamicBench(
  sizes: readonly number[] = envList("BENCH_DYNAMIC_SIZES", ["1000", "10000", "1000000"]).map(Number),
  rounds = envNumber("BENCH_DYNAMIC_ROUNDS", 3),
): Promise<void> {
  const name = "cronledger_bench_dynamic";
  const url = await freshDatabase(name);
  const results = new Map<number, DynamicRound[]>();
  try {
    const setup = createCronledger({ database: { url, poolSize: 2 }, logger: silentLogger, metrics: false });
    await setup.migrate();
    await setup.close();
    for (let r = 0; r < rounds; r += 1) for (const size of sizes) results.set(size, [...(results.get(size) ?? []), await round(url, size)]);
  } finally {
    await dropDatabase(name);
  }
  const column = (size: number, pick: (round: DynamicRound) => number, digits: number) => formatSpread(spread((results.get(size) ?? []).map(pick)), digits);
  printSection(
    `Schedules as data: N stored dynamic entries, ${formatNumber(DUE)} due at one instant (median (min–max) of ${rounds} round${rounds === 1 ? "" : "s"})`,
    markdownTable(
      ["stored", "upsertMany (batches of 100,000, one transaction each)", "analyze", "idle pass", `due (${formatNumber(DUE)} or all stored), one replica`, "its process CPU", "the same, two replicas", "fired by two", "counts", "first page", "heap held", "load"],
      sizes.map((size) => [
        formatNumber(size),
        `${column(size, (r) => r.loadMs, 0)} ms`,
        `${column(size, (r) => r.analyzeMs, 0)} ms`,
        `${column(size, (r) => r.idleMs, 1)} ms`,
        `${column(size, (r) => r.dueOneMs, 0)} ms`,
        `${column(size, (r) => r.dueOneCpuMs, 0)} ms`,
        `${column(size, (r) => r.dueTwoMs, 0)} ms`,
        column(size, (r) => r.dueTwoFired, 0),
        `${column(size, (r) => r.countsMs, 1)} ms`,
        `${column(size, (r) => r.pageMs, 1)} ms`,
        `${column(size, (r) => r.heapMb, 1)} MB`,
        column(size, (r) => r.load, 1),
      ]),
    ),
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const sizes = process.argv.slice(2).map(Number).filter((size) => size > 0);
  console.log(await machineLine("before"));
  await runDynamicBench(sizes.length > 0 ? sizes : undefined);
  console.log(await machineLine("after"));
}

// pg-boss 10.4.2's schedules at N stored, beside bench/dynamic.ts: what its cron monitor does every interval (30 s by
// default, 1-45 s), on this machine. The one instance that wins `UPDATE pgboss.version SET cron_on = now()` for the
// interval reads every schedule (`SELECT * FROM pgboss.schedule`, which is `boss.getSchedules()`) and asks cron-parser
// 4 of each whether its previous fire time is within the last minute (timekeeper.js, cron() and shouldSendIt),
// whatever is due. One schedule per queue name (its primary key; a schedule references its queue), so N queue rows are
// inserted by SQL beside the N schedules: createQueue would make a partition each.
//
// cron-parser 4's `parseExpression(cron, { tz }).prev()` costs milliseconds per call here (about 4 ms of CPU for a daily
// cron and 23 ms for a yearly one, on the shared 2-core VM on 2026-12-06): the whole of it at 1,000,000 schedules would
// take hours. Up to BENCH_PGBOSS_EVALUATE_ALL stored (10,000 by default) every schedule is evaluated;
// above it, the first BENCH_PGBOSS_SAMPLE schedules of each distinct cron are, and the interval's cron-parser time is
// that per-call cost times the number of schedules with that cron, marked as extrapolated. The read of every row is
// always measured whole. Sizes from BENCH_PGBOSS_SIZES or the command line.
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import PgBoss from "pg-boss";
import postgres from "postgres";
import { dropDatabase, envList, envNumber, formatNumber, formatSpread, freshDatabase, markdownTable, printSection, spread } from "./support.js";

// pg-boss's own cron-parser (4.x, nested under it), not the 5.x cronledger depends on.
const bossRequire = createRequire(createRequire(import.meta.url).resolve("pg-boss"));
const cronParser = bossRequire("cron-parser") as { parseExpression(cron: string, options: { tz: string }): { prev(): { getTime(): number } } };
const collect = globalThis.gc as (() => void) | undefined;
const heapMb = () => (collect?.(), collect?.(), process.memoryUsage().heapUsed / 1024 / 1024);

/** The schedules bench/dynamic.ts stores: yearly, except the first 10,000, daily ones due together. */
const DAILY = "30 0 * * *";
const YEARLY = "0 3 1 1 *";
const DAILY_COUNT = 10_000;

interface BossRound {
  readonly readMs: number;
  /** cron-parser over every schedule: measured, or extrapolated from a sample (`sampled`). */
  readonly evaluateMs: number;
  /** The same in CPU time of this process (user and system): what the load of other processes does not inflate. */
  readonly evaluateCpuMs: number;
  readonly sampled: boolean;
  /** Median milliseconds of one shouldSendIt call, by cron. */
  readonly perCallMs: ReadonlyMap<string, number>;
  readonly heapMb: number;
}

/** timekeeper.js shouldSendIt: did the previous fire time fall within the last minute? */
function shouldSendIt(cron: string, tz: string): boolean {
  const previous = cronParser.parseExpression(cron, { tz }).prev();
  return (Date.now() - previous.getTime()) / 1000 < 60;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

async function load(url: string, size: number): Promise<number> {
  const client = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await client.unsafe("truncate pgboss.schedule, pgboss.queue cascade");
    const started = performance.now();
    await client.unsafe(`insert into pgboss.queue (name, policy) select 'tenant-' || i, 'standard' from generate_series(1, ${size}) i`);
    await client.unsafe(`insert into pgboss.schedule (name, cron, timezone, data, options)
      select 'tenant-' || i, case when i <= ${DAILY_COUNT} then '${DAILY}' else '${YEARLY}' end, 'UTC', '{}'::jsonb, '{}'::jsonb from generate_series(1, ${size}) i`);
    await client.unsafe("analyze pgboss.schedule");
    return performance.now() - started;
  } finally {
    await client.end({ timeout: 1 });
  }
}

async function round(boss: PgBoss, evaluateAll: number, sample: number): Promise<BossRound> {
  const before = heapMb();
  const readStart = performance.now();
  const schedules = (await boss.getSchedules()) as unknown as { cron: string; timezone: string }[];
  const readMs = performance.now() - readStart;
  const held = heapMb() - before;
  const sampled = schedules.length > evaluateAll;
  const calls = new Map<string, number[]>();
  const cpu = new Map<string, number[]>();
  const stored = new Map<string, number>();
  for (const schedule of schedules) stored.set(schedule.cron, (stored.get(schedule.cron) ?? 0) + 1);
  let due = 0;
  const evaluateStart = performance.now();
  for (const schedule of schedules) {
    const times = calls.get(schedule.cron) ?? [];
    if (sampled && times.length >= sample) continue;
    const started = performance.now();
    const cpuStarted = process.cpuUsage();
    if (shouldSendIt(schedule.cron, schedule.timezone)) due += 1;
    const used = process.cpuUsage(cpuStarted);
    times.push(performance.now() - started);
    calls.set(schedule.cron, times);
    cpu.set(schedule.cron, [...(cpu.get(schedule.cron) ?? []), (used.user + used.system) / 1000]);
  }
  const measuredMs = performance.now() - evaluateStart;
  if (due < 0) throw new Error("unreachable");
  const perCallMs = new Map([...calls].map(([cron, times]) => [cron, median(times)]));
  // Extrapolated: each cron's mean cost per call (the total the sample took, over its calls) times its schedules.
  const extrapolated = (by: Map<string, number[]>) => [...by].reduce((sum, [cron, times]) => sum + (times.reduce((a, b) => a + b, 0) / times.length) * (stored.get(cron) ?? 0), 0);
  const evaluateMs = sampled ? extrapolated(calls) : measuredMs;
  return { readMs, evaluateMs, evaluateCpuMs: extrapolated(cpu), sampled, perCallMs, heapMb: held };
}

export async function runPgBossSchedulesBench(
  sizes: readonly number[] = envList("BENCH_PGBOSS_SIZES", ["1000", "10000", "1000000"]).map(Number),
  rounds = envNumber("BENCH_PGBOSS_ROUNDS", 3),
): Promise<void> {
  const evaluateAll = envNumber("BENCH_PGBOSS_EVALUATE_ALL", 10_000);
  const sample = envNumber("BENCH_PGBOSS_SAMPLE", 200);
  const name = `cronledger_bench_pgboss_schedules_${process.pid}`;
  const url = await freshDatabase(name);
  const results = new Map<number, { loadMs: number; rounds: BossRound[] }>();
  try {
    const setup = new PgBoss({ connectionString: url, max: 2 });
    setup.on("error", () => {});
    await setup.start();
    await setup.stop({ graceful: false, wait: true });
    for (const size of sizes) {
      const loadMs = await load(url, size);
      const boss = new PgBoss({ connectionString: url, max: 2, supervise: false, schedule: false, migrate: false });
      boss.on("error", () => {});
      await boss.start();
      const measured: BossRound[] = [];
      try {
        for (let r = 0; r < rounds; r += 1) measured.push(await round(boss, evaluateAll, sample));
      } finally {
        await boss.stop({ graceful: false, wait: true });
      }
      results.set(size, { loadMs, rounds: measured });
      process.stderr.write(`pg-boss schedules: ${formatNumber(size)} stored done\n`);
    }
  } finally {
    await dropDatabase(name);
  }
  const column = (size: number, pick: (round: BossRound) => number, digits: number) => formatSpread(spread((results.get(size)?.rounds ?? []).map(pick)), digits);
  const perCall = (size: number, cron: string) => {
    const figures = (results.get(size)?.rounds ?? []).map((r) => r.perCallMs.get(cron)).filter((value): value is number => value !== undefined);
    return figures.length === 0 ? "-" : `${formatSpread(spread(figures), 1)} ms`;
  };
  printSection(
    `pg-boss 10.4.2 schedules: what its cron monitor does each interval at N stored (median (min–max) of ${rounds} round${rounds === 1 ? "" : "s"}; ` +
      `above ${formatNumber(evaluateAll)} stored, cron-parser ran on the first ${formatNumber(sample)} schedules of each cron and its time is extrapolated (*))`,
    markdownTable(
      ["stored", "load (SQL, once)", "read every schedule", "cron-parser per call, daily", "per call, yearly", "cron-parser on each", "its CPU time", "one interval's work", "heap of the rows read"],
      sizes.map((size) => {
        const star = results.get(size)?.rounds.some((r) => r.sampled) === true ? " *" : "";
        return [
          formatNumber(size),
          `${formatNumber(results.get(size)?.loadMs ?? Number.NaN)} ms`,
          `${column(size, (r) => r.readMs, 0)} ms`,
          perCall(size, DAILY),
          perCall(size, YEARLY),
          `${column(size, (r) => r.evaluateMs, 0)} ms${star}`,
          `${column(size, (r) => r.evaluateCpuMs, 0)} ms${star}`,
          `${column(size, (r) => r.readMs + r.evaluateMs, 0)} ms${star}`,
          `${column(size, (r) => r.heapMb, 1)} MB`,
        ];
      }),
    ),
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const sizes = process.argv.slice(2).map(Number).filter((size) => size > 0);
  await runPgBossSchedulesBench(sizes.length > 0 ? sizes : undefined);
  // pg-boss's stopped instances leave a handle open (the process stayed up after the table printed): leave explicitly.
  process.exit(0);
}

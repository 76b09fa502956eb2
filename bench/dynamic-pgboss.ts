// pg-boss 10.4.2's schedules at N stored, beside bench/dynamic.ts: what its cron monitor does every interval (30 s by
// default, at most every second), on this machine. It reads every schedule (`SELECT * FROM pgboss.schedule`, which is
// `boss.getSchedules()`) and asks cron-parser of each whether it fired in the last minute (timekeeper.js, shouldSendIt),
// whatever is due. One schedule per queue name (its primary key; a schedule references its queue), so N queue rows are
// inserted by SQL beside the N schedules: createQueue would make a partition each. Sizes from BENCH_PGBOSS_SIZES.
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

interface BossRound {
  readonly loadMs: number;
  readonly readMs: number;
  readonly evaluateMs: number;
  readonly heapMb: number;
}

async function round(url: string, size: number): Promise<BossRound> {
  const client = postgres(url, { max: 1, onnotice: () => {} });
  await client.unsafe("truncate pgboss.schedule, pgboss.queue cascade");
  const started = performance.now();
  await client.unsafe(`insert into pgboss.queue (name, policy) select 'tenant-' || i, 'standard' from generate_series(1, ${size}) i`);
  await client.unsafe(`insert into pgboss.schedule (name, cron, timezone, data, options)
    select 'tenant-' || i, case when i <= 10000 then '30 0 * * *' else '0 3 1 1 *' end, 'UTC', '{}'::jsonb, '{}'::jsonb from generate_series(1, ${size}) i`);
  await client.unsafe("analyze pgboss.schedule");
  const loadMs = performance.now() - started;
  const boss = new PgBoss({ connectionString: url, max: 2, supervise: false, schedule: false, migrate: false });
  boss.on("error", () => {});
  await boss.start();
  const before = heapMb();
  const readStart = performance.now();
  const schedules = await boss.getSchedules();
  const readMs = performance.now() - readStart;
  const held = heapMb() - before;
  // timekeeper.js shouldSendIt, for each schedule: did its previous fire time fall within the last minute?
  const evaluateStart = performance.now();
  let due = 0;
  for (const schedule of schedules as unknown as { cron: string; timezone: string }[]) {
    const previous = cronParser.parseExpression(schedule.cron, { tz: schedule.timezone }).prev();
    if ((Date.now() - previous.getTime()) / 1000 < 60) due += 1;
  }
  const evaluateMs = performance.now() - evaluateStart;
  if (due < 0) throw new Error("unreachable");
  await boss.stop({ graceful: false, wait: true });
  await client.end({ timeout: 1 });
  return { loadMs, readMs, evaluateMs, heapMb: held };
}

export async function runPgBossSchedulesBench(
  sizes: readonly number[] = envList("BENCH_PGBOSS_SIZES", ["1000", "100000", "1000000"]).map(Number),
  rounds = envNumber("BENCH_PGBOSS_ROUNDS", 1),
): Promise<void> {
  const name = `cronledger_bench_pgboss_schedules_${process.pid}`;
  const url = await freshDatabase(name);
  const results = new Map<number, BossRound[]>();
  try {
    const setup = new PgBoss({ connectionString: url, max: 2 });
    setup.on("error", () => {});
    await setup.start();
    await setup.stop({ graceful: false, wait: true });
    for (let r = 0; r < rounds; r += 1) for (const size of sizes) results.set(size, [...(results.get(size) ?? []), await round(url, size)]);
  } finally {
    await dropDatabase(name);
  }
  const column = (size: number, pick: (round: BossRound) => number, digits: number) => formatSpread(spread((results.get(size) ?? []).map(pick)), digits);
  printSection(
    `pg-boss 10.4.2 schedules: what its cron monitor does each interval at N stored (median (min–max) of ${rounds} round${rounds === 1 ? "" : "s"})`,
    markdownTable(
      ["stored", "load (SQL, queues and schedules)", "read every schedule", "cron-parser on each", "one interval's work", "heap of the rows read"],
      sizes.map((size) => [
        formatNumber(size),
        `${column(size, (r) => r.loadMs, 0)} ms`,
        `${column(size, (r) => r.readMs, 0)} ms`,
        `${column(size, (r) => r.evaluateMs, 0)} ms`,
        `${column(size, (r) => r.readMs + r.evaluateMs, 0)} ms`,
        `${column(size, (r) => r.heapMb, 1)} MB`,
      ]),
    ),
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const sizes = process.argv.slice(2).map(Number).filter((size) => size > 0);
  await runPgBossSchedulesBench(sizes.length > 0 ? sizes : undefined);
}

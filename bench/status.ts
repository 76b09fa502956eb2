import { sql } from "drizzle-orm";
import { pathToFileURL } from "node:url";
import { Registry } from "prom-client";
import { createAdminHandler } from "../src/admin/handler.js";
import { createCronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import type { ScheduleEntry } from "../src/schedule/define-schedule.js";
import { generateHistory, TRUNCATE_JOBS } from "./history.js";
import { dropDatabase, freshDatabase, median, printTable } from "./support.js";

const job = defineJob({ name: "bench.status", run: () => {} });
const TOKEN = "bench-status-token-0123456789";

export type StatusBenchRow = {
  entries: number;
  "job rows": number;
  "status ms": string;
  "page ms": string;
  "page KB": number;
  "metrics scrape ms": string;
};

const spread = (values: readonly number[]) => `${median(values).toFixed(0)} (${Math.min(...values).toFixed(0)}-${Math.max(...values).toFixed(0)})`;

/**
 * What an auto-refreshing Schedule page and a Prometheus scrape cost at
 * scale: N every-minute entries, each with `runs` jobs in its history
 * (interleaved by slot, as a real table is), plus unscheduled jobs. The
 * three reads run in interleaved rounds; medians with min-max in ms.
 */
export async function runStatusBench(sizes: readonly number[] = [1_000, 10_000], runs = 25, rounds = 5): Promise<StatusBenchRow[]> {
  const name = "cronledger_bench_status";
  const url = await freshDatabase(name);
  const results: StatusBenchRow[] = [];
  try {
    for (const size of sizes) {
      const schedule: ScheduleEntry[] = Array.from({ length: size }, (_, index) => ({ job, cron: "* * * * *", key: `e${index}` }));
      const registry = new Registry();
      const ledger = createCronledger({ database: { url, poolSize: 4 }, jobs: [job], schedule, logger: silentLogger, metrics: { registry } });
      try {
        await ledger.migrate();
        await query(ledger.database.db, sql.raw(`${TRUNCATE_JOBS}, cronledger.schedule_state`));
        await ledger.tick();
        const keys = ledger.entries.map((entry) => entry.ledgerKey);
        // Each entry's history, slot by slot across all entries (so one entry's rows are spread over the days' partitions),
        // 1 in 17 failed, among five times as many unscheduled jobs: `runs` slots of every entry over the last `runs` minutes.
        const rows = size * runs * 6;
        await generateHistory(url, { rows, end: new Date(), spacingMs: (runs * 60_000) / rows, scheduleKeys: keys, scheduledEvery: 6, failedEvery: 17 });
        const [count] = await query<{ n: number }>(ledger.database.db, sql`select count(*)::int as n from cronledger.jobs`);
        const handler = createAdminHandler(ledger, { token: TOKEN });
        const page = () => handler(new Request("http://127.0.0.1/admin/scheduler", { headers: { authorization: `Bearer ${TOKEN}` } })).then((response) => response.text());
        const timings = { status: [] as number[], page: [] as number[], metrics: [] as number[] };
        let pageBytes = 0;
        for (let round = 0; round < rounds; round++) {
          let started = performance.now();
          await ledger.status();
          timings.status.push(performance.now() - started);
          started = performance.now();
          pageBytes = (await page()).length;
          timings.page.push(performance.now() - started);
          started = performance.now();
          await registry.metrics();
          timings.metrics.push(performance.now() - started);
        }
        results.push({
          entries: size,
          "job rows": count?.n ?? 0,
          "status ms": spread(timings.status),
          "page ms": spread(timings.page),
          "page KB": Math.round(pageBytes / 1024),
          "metrics scrape ms": spread(timings.metrics),
        });
      } finally {
        await ledger.close();
      }
    }
  } finally {
    await dropDatabase(name);
  }
  printTable("Status, Schedule page (first 100 entries, 20 runs each) and /metrics at scale", results);
  return results;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const sizes = (process.env.BENCH_STATUS_SIZES ?? "1000,10000").split(",").map(Number);
  await runStatusBench(sizes);
}

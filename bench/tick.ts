import { sql } from "drizzle-orm";
import { pathToFileURL } from "node:url";
import { createCronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import type { ScheduleEntry } from "../src/schedule/define-schedule.js";
import { dropDatabase, freshDatabase, median, printTable } from "./support.js";

const job = defineJob({ name: "bench.tick", run: () => {} });
const HOUR = 3_600_000;
const START = Date.parse("2026-06-01T00:00:00.000Z");
const IDLE_PASSES = 20;

export type TickBenchRow = {
  entries: number;
  "idle pass ms": number;
  "idle statements": number;
  "cold idle pass ms": number;
  "all-due pass ms": number;
  "all-due statements": number;
  "jobs enqueued": number;
  /** The prune chore's ledger statement (grace check against the running schedules' reports), every row kept. */
  "ledger prune ms": number;
  /** A process's first report of its schedule (its N keys); later reports only move a timestamp. */
  "schedule report ms": number;
};

/**
 * One pass over N hourly entries on the local PostgreSQL: idle (nothing
 * due, steady state), cold idle (a fresh process's first pass, which reads
 * every ledger row), and all due.
 */
export async function runTickBench(sizes: readonly number[] = [1_000, 10_000, 50_000]): Promise<TickBenchRow[]> {
  const name = "cronledger_bench_tick";
  const url = await freshDatabase(name);
  const results: TickBenchRow[] = [];
  try {
    for (const size of sizes) {
      const schedule: ScheduleEntry[] = Array.from({ length: size }, (_, index) => ({ job, cron: "0 * * * *", key: `e${index}` }));
      const ledger = createCronledger({ database: { url, poolSize: 4 }, jobs: [job], schedule, logger: silentLogger });
      try {
        await ledger.migrate();
        await query(ledger.database.db, sql`truncate cronledger.jobs, cronledger.schedule_state, cronledger.schedule_versions`);
        await ledger.tick({ now: new Date(START + 1_000) });
        const idleTimes: number[] = [];
        let idleStatements = 0;
        for (let pass = 0; pass < IDLE_PASSES; pass += 1) {
          const started = performance.now();
          const report = await ledger.tick({ now: new Date(START + 60_000 * (pass + 1)) });
          idleTimes.push(performance.now() - started);
          idleStatements = report.statements;
        }
        const started = performance.now();
        const due = await ledger.tick({ now: new Date(START + HOUR + 1_000) });
        const dueMs = performance.now() - started;
        // A process that just started has no memo: its first pass reads every ledger row.
        const cold = createCronledger({ database: { url, poolSize: 2 }, jobs: [job], schedule, logger: silentLogger });
        const coldStarted = performance.now();
        await cold.tick({ now: new Date(START + HOUR + 60_000) });
        const coldMs = performance.now() - coldStarted;
        await cold.close();
        const reportStarted = performance.now();
        await ledger.scheduler.reportSchedule();
        const reportMs = performance.now() - reportStarted;
        const pruneTimes: number[] = [];
        for (let pass = 0; pass < 5; pass += 1) {
          const pruneStarted = performance.now();
          await ledger.pruneLedger();
          pruneTimes.push(performance.now() - pruneStarted);
        }
        results.push({
          entries: size,
          "idle pass ms": Number(median(idleTimes).toFixed(1)),
          "idle statements": idleStatements,
          "cold idle pass ms": Number(coldMs.toFixed(1)),
          "all-due pass ms": Number(dueMs.toFixed(1)),
          "all-due statements": due.statements,
          "jobs enqueued": due.enqueued.length,
          "ledger prune ms": Number(median(pruneTimes).toFixed(1)),
          "schedule report ms": Number(reportMs.toFixed(1)),
        });
      } finally {
        await ledger.close();
      }
    }
  } finally {
    await dropDatabase(name);
  }
  printTable("tick: one pass over N entries (local PostgreSQL)", results);
  return results;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const sizes = process.argv.slice(2).map(Number).filter((size) => size > 0);
  await runTickBench(sizes.length > 0 ? sizes : undefined);
}

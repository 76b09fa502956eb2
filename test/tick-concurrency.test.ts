import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { silentLogger } from "../src/log.js";
import { watch } from "./support/child.js";
import { throughPgBouncer, useTestDatabase } from "./support/database.js";
import { concurrencyJob, minuteEntries, SLOT_MS, START } from "./fixtures/tick-schedule.js";

const ENTRIES = 50;
const SLOTS = 200;
const FIXTURE = new URL("./fixtures/tick-process.ts", import.meta.url).pathname;

async function runProcess(args: string[], env: Record<string, string>): Promise<{ lostRace: number }> {
  const finished = await watch(process.execPath, ["--import", "tsx", FIXTURE, ...args], { env: { ...process.env, ...env } }).exited;
  if (finished.code !== 0) throw new Error(`tick process exited ${finished.code}: ${finished.stderr}`);
  return JSON.parse(finished.stdout.trim()) as { lostRace: number };
}

async function assertOneJobPerEntryAndSlot(ledger: Cronledger): Promise<void> {
  const [totals] = await query<{ jobs: number; distinct_slots: number; min_ms: number; max_ms: number }>(
    ledger.database.db,
    sql`select count(*)::int as jobs, count(distinct (schedule_key, scheduled_for))::int as distinct_slots,
               (extract(epoch from min(scheduled_for)) * 1000)::float8 as min_ms, (extract(epoch from max(scheduled_for)) * 1000)::float8 as max_ms
        from cronledger.jobs where job_name = ${concurrencyJob.name}`,
  );
  expect(totals).toEqual({
    jobs: ENTRIES * SLOTS,
    distinct_slots: ENTRIES * SLOTS,
    min_ms: START + SLOT_MS,
    max_ms: START + SLOTS * SLOT_MS,
  });
}

describe("exactly once per slot under concurrency", () => {
  const database = useTestDatabase(import.meta.url);

  it("8 concurrent connections ticking the same instants enqueue one job per (entry, slot)", async () => {
    const ledgers = Array.from({ length: 8 }, () =>
      createCronledger({ database: { url: database.url, poolSize: 2 }, jobs: [concurrencyJob], schedule: minuteEntries(ENTRIES), logger: silentLogger }),
    );
    try {
      await Promise.all(ledgers.map((ledger) => ledger.migrate()));
      let lostRaces = 0;
      for (let slot = 0; slot <= SLOTS; slot += 1) {
        const now = new Date(START + slot * SLOT_MS + 500);
        const reports = await Promise.all(ledgers.map((ledger) => ledger.tick({ now })));
        lostRaces += reports.reduce((sum, report) => sum + report.lostRace.length, 0);
        expect(reports.reduce((sum, report) => sum + report.enqueued.length, 0)).toBe(slot === 0 ? 0 : ENTRIES);
      }
      // The passes really raced: some replicas read the same ledger value and lost the claim.
      expect(lostRaces).toBeGreaterThan(0);
      await assertOneJobPerEntryAndSlot(ledgers[0]!);
      await query(ledgers[0]!.database.db, sql`truncate cronledger.job_queue, cronledger.job_history, cronledger.job_keys, cronledger.job_counts, cronledger.schedule_last_runs, cronledger.schedule_state`);
    } finally {
      await Promise.all(ledgers.map((ledger) => ledger.close()));
    }
  });

  /** Four tick processes in lockstep over SLOTS slots, reaching the database at `url` with `env`; returns their lost races. */
  async function tickInFourProcesses(env: Record<string, string>): Promise<number> {
    const ledger = createCronledger({ database: { url: database.url, poolSize: 2 }, jobs: [concurrencyJob], schedule: [], logger: silentLogger });
    try {
      await ledger.migrate();
      await query(ledger.database.db, sql`truncate cronledger.job_queue, cronledger.job_history, cronledger.job_keys, cronledger.job_counts, cronledger.schedule_last_runs, cronledger.schedule_state`);
      await query(ledger.database.db, sql`create table if not exists tick_progress (worker int primary key, slot int not null)`);
      await query(ledger.database.db, sql`truncate tick_progress`);
      await query(ledger.database.db, sql`insert into tick_progress select g, -1 from generate_series(0, 3) g`);
      const base = { DATABASE_URL: database.url, ENTRIES: String(ENTRIES), SLOTS: String(SLOTS), ...env };
      const results = await Promise.all([0, 1, 2, 3].map((worker) => runProcess(["lockstep"], { ...base, WORKER: String(worker) })));
      await assertOneJobPerEntryAndSlot(ledger);
      return results.reduce((sum, result) => sum + result.lostRace, 0);
    } finally {
      await ledger.close();
    }
  }

  it("4 separate OS processes ticking concurrently enqueue one job per (entry, slot)", async () => {
    expect(await tickInFourProcesses({})).toBeGreaterThan(0);
  });

  it("4 separate OS processes ticking through PgBouncer in transaction mode enqueue one job per (entry, slot)", async () => {
    expect(await tickInFourProcesses({ DATABASE_URL: throughPgBouncer(database.url), POOLER: "pgbouncer" })).toBeGreaterThan(0);
  });
});

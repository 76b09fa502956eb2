import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import type { ScheduleEntry } from "../src/schedule/define-schedule.js";
import { useTestDatabase } from "./support/database.js";

const job = defineJob({ name: "scale.probe", run: () => {} });
const HOUR = 3_600_000;
const START = Date.parse("2026-06-01T00:00:00.000Z");

function hourlyEntries(count: number): ScheduleEntry[] {
  return Array.from({ length: count }, (_, index) => ({ job, cron: "0 * * * *", key: `e${index}` }));
}

/** Statements per pass for a schedule of `size` entries: first pass, idle pass, all-due pass. */
async function statementsPerPass(url: string, size: number): Promise<{ first: number; idle: number; due: number; enqueued: number }> {
  const ledger: Cronledger = createCronledger({ database: { url, poolSize: 2 }, jobs: [job], schedule: hourlyEntries(size), logger: silentLogger });
  try {
    await ledger.migrate();
    await query(ledger.database.db, sql`truncate cronledger.job_queue, cronledger.job_history, cronledger.job_keys, cronledger.job_counts, cronledger.schedule_last_runs, cronledger.schedule_state`);
    const first = await ledger.tick({ now: new Date(START + 1_000) });
    const idle = await ledger.tick({ now: new Date(START + HOUR / 2) });
    const due = await ledger.tick({ now: new Date(START + HOUR + 1_000) });
    return { first: first.statements, idle: idle.statements, due: due.statements, enqueued: due.enqueued.length };
  } finally {
    await ledger.close();
  }
}

describe("a pass costs a constant number of statements", () => {
  const database = useTestDatabase(import.meta.url);

  it("issues the same statements for 10 and 10,000 entries, whether none or all are due", async () => {
    const small = await statementsPerPass(database.url, 10);
    const large = await statementsPerPass(database.url, 10_000);
    expect(large.enqueued).toBe(10_000);
    expect(small.enqueued).toBe(10);
    // Every pass is the one statement that reads, creates, claims and enqueues, whatever is due.
    expect(large).toEqual({ ...small, enqueued: 10_000 });
    expect(large).toEqual({ first: 1, idle: 1, due: 1, enqueued: 10_000 });
  });
});

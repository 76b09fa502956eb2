import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { silentLogger } from "../src/log.js";
import { createTestDatabase } from "./support/database.js";
import { parseExposition } from "./support/prometheus.js";

const NOW = new Date("2026-06-01T12:00:00Z");
const DAY = 86_400_000;

let ledger: Cronledger;
let drop: () => Promise<void>;

const rows = <T>(statement: ReturnType<typeof sql>) => query<T>(ledger.database.db, statement);

beforeAll(async () => {
  const database = await createTestDatabase(import.meta.url);
  drop = database.drop;
  ledger = createCronledger({
    database: { url: database.url, poolSize: 2 },
    logger: silentLogger,
    chores: { retention: { succeeded: "7d", failed: "30d", batchSize: 2 } },
  });
  await ledger.migrate();
  // Every DELETE statement on jobs records how many rows it removed: the batches, seen from the database.
  await query(
    ledger.database.db,
    sql.raw(`create table public.deletes (n int not null);
      create function public.count_deletes() returns trigger language plpgsql as $$
        begin insert into public.deletes select count(*) from gone; return null; end $$;
      create trigger count_deletes after delete on cronledger.jobs referencing old table as gone
        for each statement execute function public.count_deletes()`),
  );
});

afterAll(async () => {
  await ledger?.close();
  await drop?.();
});

async function insertJob(label: string, status: string, finishedDaysAgo: number | null): Promise<void> {
  const finished = finishedDaysAgo === null ? null : new Date(NOW.getTime() - finishedDaysAgo * DAY).toISOString();
  await rows(
    sql`insert into cronledger.jobs (job_name, status, finished_at, created_at)
        values (${label}, ${status}, ${finished}::timestamptz, ${new Date(NOW.getTime() - 90 * DAY).toISOString()}::timestamptz)`,
  );
}

describe("retention", () => {
  it("deletes only finished jobs older than their period, in bounded batches, and counts them in the metric", async () => {
    for (let i = 0; i < 5; i += 1) await insertJob("old.succeeded", "succeeded", 8);
    await insertJob("old.cancelled", "cancelled", 10);
    await insertJob("young.succeeded", "succeeded", 6);
    await insertJob("young.succeeded", "succeeded", 6.9);
    await insertJob("kept.failed", "failed", 8);
    await insertJob("old.failed", "failed", 31);
    await insertJob("old.queued", "queued", null);
    await insertJob("old.running", "running", null);

    const result = await ledger.prune({ now: NOW });
    expect(result.jobRows).toBe(7);
    const left = await rows<{ job_name: string; n: number }>(
      sql`select job_name, count(*)::int as n from cronledger.jobs group by job_name order by job_name`,
    );
    expect(left).toEqual([
      { job_name: "kept.failed", n: 1 },
      { job_name: "old.queued", n: 1 },
      { job_name: "old.running", n: 1 },
      { job_name: "young.succeeded", n: 2 },
    ]);
    const batches = await rows<{ n: number }>(sql`select n from public.deletes where n > 0`);
    expect(Math.max(...batches.map((batch) => batch.n))).toBeLessThanOrEqual(2);
    expect(batches.reduce((sum, batch) => sum + batch.n, 0)).toBe(7);
    expect(batches.length).toBeGreaterThanOrEqual(4);

    const metrics = parseExposition((await ledger.metrics?.registry.metrics()) ?? "");
    expect(metrics.value("cronledger_prune_rows_removed_total", { table: "jobs" })).toBe(7);

    expect((await ledger.prune({ now: NOW })).jobRows).toBe(0);
    expect(parseExposition((await ledger.metrics?.registry.metrics()) ?? "").value("cronledger_prune_rows_removed_total", { table: "jobs" })).toBe(7);
  });
});

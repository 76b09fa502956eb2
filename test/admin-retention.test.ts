import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { createTestDatabase } from "./support/database.js";
import { insertFinishedJobs } from "./support/history.js";
import { parseExposition } from "./support/prometheus.js";

const NOW = new Date("2026-06-01T12:00:00Z");
const DAY = 86_400_000;
const keyed = defineJob({ name: "keyed.job", payload: z.object({}), run: () => {} });

let ledger: Cronledger;
let drop: () => Promise<void>;

const rows = <T>(statement: ReturnType<typeof sql>) => query<T>(ledger.database.db, statement);

beforeAll(async () => {
  const database = await createTestDatabase(import.meta.url);
  drop = database.drop;
  ledger = createCronledger({
    database: { url: database.url, poolSize: 2 },
    jobs: [keyed],
    logger: silentLogger,
    chores: { retention: { succeeded: "7d", failed: "30d", batchSize: 2 } },
  });
  await ledger.migrate();
  // Every DELETE statement on the history records how many rows it removed: retention should send none.
  await query(
    ledger.database.db,
    sql.raw(`create table public.deletes (n int not null);
      create function public.count_deletes() returns trigger language plpgsql as $$
        begin insert into public.deletes select count(*) from gone; return null; end $$;
      create trigger count_deletes after delete on cronledger.job_history referencing old table as gone
        for each statement execute function public.count_deletes()`),
  );
});

afterAll(async () => {
  await ledger?.close();
  await drop?.();
});

const finished = (jobName: string, status: "succeeded" | "failed" | "cancelled", daysAgo: number, idempotencyKey?: string) => ({
  jobName,
  status,
  finishedAt: new Date(NOW.getTime() - daysAgo * DAY),
  createdAt: new Date(NOW.getTime() - 90 * DAY),
  idempotencyKey: idempotencyKey ?? null,
});

describe("retention", () => {
  it("drops whole days of finished jobs once the day is past its period, with their keys, and counts them in the metric", async () => {
    await insertFinishedJobs(ledger.database.db, [
      ...Array.from({ length: 5 }, () => finished("old.succeeded", "succeeded", 8)),
      finished("old.cancelled", "cancelled", 10),
      finished("young.succeeded", "succeeded", 6),
      // Past its 7 days, but its day (2026-05-25) is not wholly past them: kept until that day is.
      finished("young.succeeded", "succeeded", 7.2),
      finished("kept.failed", "failed", 8),
      finished("old.failed", "failed", 31),
      // Keyed: the old keys go with their days (more than one batch of 2), the young one holds.
      finished(keyed.name, "succeeded", 9, "old-1"),
      finished(keyed.name, "succeeded", 9, "old-2"),
      finished(keyed.name, "succeeded", 9, "old-3"),
      finished(keyed.name, "succeeded", 1, "young-1"),
    ]);
    await rows(sql`insert into cronledger.job_queue (job_name, status) values ('old.queued', 'queued'), ('old.running', 'running')`);

    const result = await ledger.prune({ now: NOW });
    expect(result.jobRows).toBe(10);
    const left = await rows<{ job_name: string; n: number }>(
      sql`select job_name, count(*)::int as n from cronledger.jobs group by job_name order by job_name`,
    );
    expect(left).toEqual([
      { job_name: "kept.failed", n: 1 },
      { job_name: "keyed.job", n: 1 },
      { job_name: "old.queued", n: 1 },
      { job_name: "old.running", n: 1 },
      { job_name: "young.succeeded", n: 2 },
    ]);
    expect(await rows(sql`select n from public.deletes where n > 0`)).toEqual([]);
    // 05-01 is past both periods: gone whole. 05-22 to 05-24 keep their failed leaves (30 days) without their done ones (7 days).
    const partitions = await rows<{ name: string }>(
      sql`select c.relname::text as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
          where i.inhparent in (select 'cronledger.job_history'::regclass union all select inhrelid from pg_inherits where inhparent = 'cronledger.job_history'::regclass)
          order by 1`,
    );
    const names = partitions.map((row) => row.name);
    expect(names).toEqual(expect.arrayContaining(["job_history_p20260524", "job_history_p20260524_failed", "job_history_p20260525", "job_history_p20260531"]));
    expect(names).not.toContain("job_history_p20260524_done");
    expect(names.filter((name) => /^job_history_p202605(01|22_done|23_done)/.test(name))).toEqual([]);
    // Detached, then dropped leaf by leaf: no table of a dropped day is left outside the history.
    expect(await rows(sql`select relname from pg_class where relname like 'job\_history\_p202605%' and not relispartition`)).toEqual([]);
    expect(await rows(sql`select idempotency_key from cronledger.job_keys order by 1`)).toEqual([{ idempotency_key: "young-1" }]);
    expect((await ledger.enqueue(keyed, {}, { idempotencyKey: "old-1" })).created).toBe(true);
    expect((await ledger.enqueue(keyed, {}, { idempotencyKey: "young-1" })).created).toBe(false);

    const metrics = parseExposition((await ledger.metrics?.registry.metrics()) ?? "");
    expect(metrics.value("cronledger_prune_rows_removed_total", { table: "jobs" })).toBe(10);
    const status = await ledger.status();
    expect(status.totals).toMatchObject({ succeeded: 3, failed: 1, cancelled: 0, queued: 2, running: 1 });

    // A pass stopped after a detach (its counters gone with it) leaves the detached tables: the next pass drops them.
    await rows(sql`create table cronledger.job_history_p20260401 (like cronledger.job_history) partition by list (status)`);
    await rows(sql`create table cronledger.job_history_p20260401_failed partition of cronledger.job_history_p20260401 for values in ('failed')`);
    await rows(sql`create table cronledger.job_history_p20260401_done_2 (like cronledger.job_history)`);
    expect((await ledger.prune({ now: NOW })).jobRows).toBe(0);
    expect(await rows(sql`select relname from pg_class where relname like 'job\_history\_p20260401%'`)).toEqual([]);
    expect(parseExposition((await ledger.metrics?.registry.metrics()) ?? "").value("cronledger_prune_rows_removed_total", { table: "jobs" })).toBe(10);
  });
});

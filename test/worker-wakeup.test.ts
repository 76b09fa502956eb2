import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createCronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { sleepingBackends, slowClaimsOf, useTestDatabase } from "./support/database.js";
import { until } from "./support/worker-processes.js";

describe("a wake-up that arrives while a claim is in flight", () => {
  const database = useTestDatabase(import.meta.url);

  it("is not lost when that claim comes back short: the job it announced runs without waiting for the poll", async () => {
    const started: string[] = [];
    const job = defineJob({ name: "wake.probe", run: (_payload, ctx) => void started.push(String(ctx.jobId)) });
    const ledger = createCronledger({ database: { url: database.url, poolSize: 4 }, jobs: [job], logger: silentLogger, metrics: false });
    try {
      await ledger.migrate();
      // Claiming the first job sleeps inside the claim statement, after its snapshot was taken.
      await slowClaimsOf(ledger.database.db, "slow", 1);
      // No poll within the test: only NOTIFY can wake the worker.
      const working = ledger.work({ pollInterval: "1h" });
      await until("the worker listens", async () => {
        const [row] = await query<{ n: number }>(
          ledger.database.db,
          sql`select count(*)::int as n from pg_stat_activity where datname = current_database() and query ilike 'listen%'`,
        );
        return row?.n === 1;
      });
      const first = await ledger.enqueue(job, { slow: true });
      await until("the first claim is in its sleep", async () => (await sleepingBackends(ledger.database.db)) === 1);
      // Committed after the sleeping claim's snapshot; its NOTIFY reaches the worker while that claim runs.
      const second = await ledger.enqueue(job, {});
      await until("both jobs started", () => started.length === 2, 20_000);
      expect(started.sort()).toEqual([String(first.id), String(second.id)].sort());
      await ledger.stop();
      await working;
    } finally {
      await ledger.close();
    }
  });
});

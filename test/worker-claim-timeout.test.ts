import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createCronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger, type Logger } from "../src/log.js";
import { sleepingBackends, slowClaimsOf, useTestDatabase } from "./support/database.js";
import { until } from "./support/worker-processes.js";

describe("a claim that does not answer", () => {
  const database = useTestDatabase(import.meta.url);

  it("does not stop the worker: after claimTimeout it claims again, and the late claim's job still runs, once", async () => {
    const started: number[] = [];
    const warnings: string[] = [];
    const logger: Logger = { ...silentLogger, warn: (message) => void warnings.push(message) };
    const job = defineJob({ name: "claim.probe", run: (_payload, ctx) => void started.push(ctx.jobId) });
    const ledger = createCronledger({ database: { url: database.url, poolSize: 4 }, jobs: [job], logger, metrics: false });
    try {
      await ledger.migrate();
      // The claim of the job marked `stuck` sleeps 3 s inside its statement: a claim that does not answer.
      await slowClaimsOf(ledger.database.db, "stuck", 3);
      const stuck = await ledger.enqueue(job, { stuck: true });
      const working = ledger.work({ claimTimeout: 300, pollInterval: 100 });
      await until("the claim is in its sleep", async () => (await sleepingBackends(ledger.database.db)) === 1);
      // Enqueued while the stuck claim holds the worker's only claim: it runs long before that claim answers.
      const next = await ledger.enqueue(job, {});
      await until("the next job started", () => started.includes(next.id), 2_500);
      expect(started).not.toContain(stuck.id);
      expect(warnings).toContain("a claim has not answered; claiming again without waiting for it");
      // The late claim answers after its 3 s and its job runs, once.
      await until("the stuck job started", () => started.includes(stuck.id), 10_000);
      await ledger.stop();
      await working;
      expect(started.filter((id) => id === stuck.id)).toHaveLength(1);
      const rows = await query<{ id: number; status: string; attempts: number }>(
        ledger.database.db,
        sql`select id::float8 as id, status, attempts from cronledger.jobs where job_name = 'claim.probe' order by id`,
      );
      expect(rows).toEqual([
        { id: stuck.id, status: "succeeded", attempts: 1 },
        { id: next.id, status: "succeeded", attempts: 1 },
      ]);
    } finally {
      await ledger.close();
    }
  });
});

import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/executor.js";
import { DatabaseHealth } from "../src/db/health.js";
import { heartbeatJobs, type HeldAttempt } from "../src/db/sql/jobs.js";
import { Heartbeats } from "../src/jobs/heartbeats.js";
import { silentLogger } from "../src/log.js";
import { useTestDatabase } from "./support/database.js";

// A beat reports what it lost by job and attempt: while it was out, the worker may have claimed the job's next
// attempt itself (attempt 1 failed and was retried at once), and the beat's answer for attempt 1 must not abort it.
describe("heartbeats report lost attempts, not lost jobs", () => {
  const database = useTestDatabase("heartbeat-attempts");
  let ledger: Cronledger;
  const worker = { id: "soak-host:1:beat", namespace: "default", jobNames: ["beat.job"], queues: ["default"], leaseMs: 3_000 };

  beforeAll(async () => {
    ledger = createCronledger({ database: { url: database.url, poolSize: 2 }, chores: false, logger: silentLogger, metrics: false });
    await ledger.migrate();
  });
  afterAll(async () => ledger?.close());

  /** A running job held by this worker at attempt `attempts`. */
  async function runningJob(attempts: number): Promise<number> {
    const [row] = await query<{ id: number }>(
      ledger.database.db,
      sql`insert into cronledger.job_queue (job_name, status, attempts, max_attempts, locked_by, heartbeat_at, started_at)
          values ('beat.job', 'running', ${attempts}, 3, ${worker.id}, now(), now()) returning id::float8 as id`,
    );
    return row?.id as number;
  }

  /** One beat of `held`, as the worker's timer sends it; resolves with what it reported lost. */
  async function beat(held: readonly HeldAttempt[]): Promise<HeldAttempt[]> {
    const lost: HeldAttempt[] = [];
    const heartbeats = new Heartbeats(
      {
        held: () => [...held],
        beat: (attempts) => heartbeatJobs(ledger.database.db, worker, attempts),
        lost: (attempts) => void lost.push(...attempts),
        stopRequested: () => undefined,
        health: new DatabaseHealth(silentLogger, "test"),
        logger: silentLogger,
      },
      worker.leaseMs,
    );
    expect(await heartbeats.beatNow()).toBe(true);
    return lost;
  }

  it("names the superseded attempt of a job this worker claimed again (attempt 2 runs here, the beat was for attempt 1)", async () => {
    const id = await runningJob(2);
    expect(await beat([{ id, attempt: 1 }])).toEqual([{ id, attempt: 1 }]);
  });

  it("reports nothing for the attempt the worker holds", async () => {
    const id = await runningJob(2);
    expect(await beat([{ id, attempt: 2 }])).toEqual([]);
  });
});

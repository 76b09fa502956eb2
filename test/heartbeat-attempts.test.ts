import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/executor.js";
import { DatabaseHealth } from "../src/db/health.js";
import { heartbeatJobs, type HeldAttempt } from "../src/db/sql/jobs.js";
import { defineJob } from "../src/jobs/define-job.js";
import { Heartbeats } from "../src/jobs/heartbeats.js";
import { resolveWorkOptions } from "../src/jobs/work-options.js";
import { Worker } from "../src/jobs/worker.js";
import type { WorkerDependencies } from "../src/jobs/worker-deps.js";
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

  it("leaves running the retry this worker claimed while a beat for the failed attempt was out", async () => {
    let jobId = 0;
    let beatOut!: () => void;
    const beatIsOut = new Promise<void>((resolve) => (beatOut = resolve));
    let releaseBeat!: () => void;
    const beatReleased = new Promise<void>((resolve) => (releaseBeat = resolve));
    let secondStarted!: () => void;
    const secondRuns = new Promise<void>((resolve) => (secondStarted = resolve));
    let finishSecond!: () => void;
    const secondMayEnd = new Promise<void>((resolve) => (finishSecond = resolve));
    let secondAborted = false;
    const job = defineJob({
      name: "beat.retry",
      retry: { maxAttempts: 2, baseMs: 0, capMs: 0, jitter: 0 },
      run: async (_payload, ctx) => {
        // Attempt 1 fails once a beat that holds it is on its way; attempt 2 runs until the test lets it end.
        if (ctx.attempt === 1) {
          await beatIsOut;
          throw new Error("first attempt fails");
        }
        ctx.signal.addEventListener("abort", () => (secondAborted = true));
        secondStarted();
        await secondMayEnd;
      },
    });
    const own = createCronledger({ database: { url: database.url, poolSize: 4 }, jobs: [job], chores: false, logger: silentLogger, metrics: false });
    // The worker's own parts, with its heartbeat held back while it carries attempt 1 of the job: the beat is "out".
    const parts = (own as unknown as { workerParts: WorkerDependencies }).workerParts;
    const worker = new Worker(
      {
        ...parts,
        store: {
          ...parts.store,
          heartbeat: async (registration, held) => {
            if (held.some((attempt) => attempt.id === jobId && attempt.attempt === 1)) {
              beatOut();
              await beatReleased;
            }
            return parts.store.heartbeat(registration, held);
          },
        },
      },
      { ...resolveWorkOptions({ concurrency: 1 }), once: false, queues: ["default"], leaseMs: 1_500, namespace: "default" },
    );
    try {
      jobId = (await own.enqueue(job)).id;
      const running = worker.run();
      await secondRuns;
      // The beat for attempt 1 answers now: attempt 1 is no longer held anywhere, attempt 2 runs here.
      releaseBeat();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(secondAborted).toBe(false);
      finishSecond();
      await worker.stop();
      await running;
      const [row] = await query<{ status: string; attempts: number }>(own.database.db, sql`select status, attempts from cronledger.jobs where id = ${jobId}`);
      expect(row).toEqual({ status: "succeeded", attempts: 2 });
    } finally {
      finishSecond();
      releaseBeat();
      await own.close();
    }
  }, 30_000);
});

import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger, type Logger } from "../src/log.js";
import { startPrivateCluster, type PrivateCluster } from "./support/private-cluster.js";
import { until } from "./support/worker-processes.js";

describe("PostgreSQL restarted under load", () => {
  let cluster: PrivateCluster;
  let url: string;
  let ledger: Cronledger | undefined;
  let probe: postgres.Sql;

  beforeAll(async () => {
    cluster = await startPrivateCluster();
    url = cluster.url;
    probe = postgres(url, { max: 1, onnotice: () => {} });
  });

  afterAll(async () => {
    await ledger?.close().catch(() => undefined);
    await probe?.end({ timeout: 1 }).catch(() => undefined);
    await cluster?.destroy();
  });

  /** A count through a connection that rides out the restart: -1 while the server is away. */
  async function probeCount(strings: TemplateStringsArray, ...values: postgres.ParameterOrFragment<never>[]): Promise<number> {
    try {
      const [row] = await probe<{ n: number }[]>(strings, ...values);
      return row?.n ?? 0;
    } catch {
      return -1;
    }
  }

  it("completes every job and keeps the ticker firing after `pg_ctl restart`, with no operator action", async () => {
    const work = defineJob({ name: "load.work", run: () => new Promise<void>((resolve) => setTimeout(resolve, 5)) });
    const heartbeat = defineJob({ name: "load.every-second", run: () => {} });
    const problems: string[] = [];
    const logger: Logger = { ...silentLogger, warn: (message) => problems.push(message), error: (message) => problems.push(message) };
    ledger = createCronledger({
      database: { url, poolSize: 4 },
      jobs: [work, heartbeat],
      schedule: [{ job: heartbeat, cron: "* * * * * *" }],
      logger,
      metrics: false,
      lease: 3_000,
      // A claim whose reply was lost in the restart sits as running until reaped: reap often here.
      chores: { reapCron: "*/2 * * * * *" },
    });
    await ledger.migrate();
    const total = 4_000;
    await ledger.enqueueMany(Array.from({ length: total }, () => ({ job: work })));
    await ledger.start({ concurrency: 10, handleSignals: false, pollInterval: 200 });

    await until("some jobs are done", async () => (await probeCount`select count(*)::int as n from cronledger.jobs where job_name = 'load.work' and status = 'succeeded'`) >= 300);
    const before = await probeCount`select count(*)::int as n from cronledger.jobs where job_name = 'load.work' and status = 'succeeded'`;
    expect(before).toBeLessThan(total);
    await cluster.pgCtl("-m", "fast", "restart");
    const restartedAt = Date.now();

    await until(
      "every job succeeded",
      async () => (await probeCount`select count(*)::int as n from cronledger.jobs where job_name = 'load.work' and status = 'succeeded'`) === total,
      40_000,
    ).catch(async (error: unknown) => {
      // What was left, and what the process logged: a stuck claim, a wedged worker and a dead ticker look different here.
      const left = await probe`select status, count(*)::int as n, min(heartbeat_at) as oldest_heartbeat from cronledger.jobs where job_name = 'load.work' group by status`.catch(
        (cause: unknown) => [{ error: String(cause) }],
      );
      const chores = await probe`select job_name, status, count(*)::int as n from cronledger.jobs where job_name <> 'load.work' group by 1, 2`.catch(() => []);
      throw new Error(`${(error as Error).message}; jobs by status ${JSON.stringify(left)}; other jobs ${JSON.stringify(chores)}; logged ${JSON.stringify(problems.slice(0, 20))}`);
    });
    await until(
      "the ticker fired a slot after the restart",
      async () =>
        (await probeCount`select count(*)::int as n from cronledger.jobs where job_name = 'load.every-second' and status = 'succeeded'
           and scheduled_for > ${new Date(restartedAt)}`) >= 2,
      20_000,
    );
    expect(await probeCount`select count(*)::int as n from cronledger.jobs where job_name = 'load.work' and status <> 'succeeded'`).toBe(0);
    // The restart was felt (failed statements were logged and retried), not slipped through between statements.
    expect(problems.length).toBeGreaterThan(0);
    await ledger.stop();
  });
});

import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fileURLToPath } from "node:url";
import { createCronledger } from "../src/cronledger.js";
import { silentLogger } from "../src/log.js";
import { watch, type Watched } from "./support/child.js";
import { startPrivateCluster, type PrivateCluster } from "./support/private-cluster.js";
import { until } from "./support/worker-processes.js";

const FIXTURE = fileURLToPath(new URL("./fixtures/outage-replica.ts", import.meta.url));
const OUTAGE_MS = 5_000;
const OUTAGES = 3;
const BACK_WITHIN_MS = 5_000;

describe("a replica through PostgreSQL outages", () => {
  let cluster: PrivateCluster;
  let probe: postgres.Sql;
  let replica: Watched | undefined;

  beforeAll(async () => {
    cluster = await startPrivateCluster();
    probe = postgres(cluster.url, { max: 1, onnotice: () => {} });
    const migrator = createCronledger({ database: { url: cluster.url, poolSize: 2 }, logger: silentLogger, metrics: false });
    await migrator.migrate();
    await migrator.close();
  });

  afterAll(async () => {
    replica?.child.kill("SIGKILL");
    await probe?.end({ timeout: 1 }).catch(() => undefined);
    await cluster?.destroy();
  });

  /** A query through a connection that rides out the outages; undefined while the server is away. */
  async function ask<T extends object>(run: () => Promise<T[]>): Promise<T | undefined> {
    try {
      return (await run())[0];
    } catch {
      return undefined;
    }
  }

  it("claims and ticks within 5 s of each return, logs each outage once either way, and never reaps its own running jobs", async () => {
    replica = watch(process.execPath, ["--import", "tsx", FIXTURE], { env: { ...process.env, DATABASE_URL: cluster.url } });
    await replica.waitFor(/^ready$/m, 60_000);
    await probe`insert into cronledger.job_queue (job_name, max_attempts) select 'outage.long', 5 from generate_series(1, 4)`;
    await until("the long jobs run", async () => (await ask(() => probe<{ n: number }[]>`select count(*)::int as n from cronledger.jobs where job_name = 'outage.long' and status = 'running'`))?.n === 4, 30_000);

    const lags: { claimMs: number; tickMs: number }[] = [];
    // On a failure, the replica's own log says what it was doing.
    const onFailure = (error: unknown) => {
      process.stderr.write(`replica log (last 6,000 characters):\n${replica?.output().slice(-6_000) ?? ""}\n`);
      throw error;
    };
    for (let outage = 0; outage < OUTAGES; outage += 1) {
      await cluster.stop("fast");
      await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
      await cluster.start();
      // The server's return: the postmaster's start. A job enqueued now must be claimed, and a slot fired, soon after it.
      const inserted = await ask(
        () => probe<{ id: number }[]>`insert into cronledger.job_queue (job_name) values ('outage.probe') returning id::float8 as id`,
      );
      expect(inserted).toBeDefined();
      await until(
        "the probe job is claimed",
        async () => (await ask(() => probe<{ started: boolean }[]>`select started_at is not null as started from cronledger.jobs where id = ${inserted!.id}`))?.started === true,
        30_000,
      ).catch(onFailure);
      await until(
        "a slot fires after the return",
        async () =>
          ((await ask(() => probe<{ n: number }[]>`select count(*)::int as n from cronledger.jobs where job_name = 'outage.every-second' and created_at > pg_postmaster_start_time()`))
            ?.n ?? 0) > 0,
        30_000,
      );
      const lag = await ask(
        () => probe<{ claim_ms: number; tick_ms: number }[]>`
          select (extract(epoch from (select started_at from cronledger.jobs where id = ${inserted!.id}) - pg_postmaster_start_time()) * 1000)::float8 as claim_ms,
                 (extract(epoch from (select min(created_at) from cronledger.jobs where job_name = 'outage.every-second' and created_at > pg_postmaster_start_time())
                   - pg_postmaster_start_time()) * 1000)::float8 as tick_ms`,
      );
      lags.push({ claimMs: Math.round(lag!.claim_ms), tickMs: Math.round(lag!.tick_ms) });
    }
    process.stderr.write(`after each return (ms from the server's start): ${JSON.stringify(lags)}\n`);
    for (const lag of lags) {
      expect(lag.claimMs).toBeLessThanOrEqual(BACK_WITHIN_MS);
      expect(lag.tickMs).toBeLessThanOrEqual(BACK_WITHIN_MS);
    }

    // The long jobs ran through every outage on their first attempt: none was taken back and run again.
    await until("the long jobs finish", async () => (await ask(() => probe<{ n: number }[]>`select count(*)::int as n from cronledger.jobs where job_name = 'outage.long' and status = 'succeeded'`))?.n === 4, 90_000);
    // A job the outage made fail and retry (a chore whose statement met the outage) is no reaping; a job taken
    // back by the reaper has a last_error that is a LeaseExpiredError (a reap chore's own failed statement quotes
    // that text among its parameters, so a substring match took it for one), and a long job run twice would have a
    // second attempt.
    const reaped = await probe<{ id: string; job_name: string; attempts: number; error: string | null }[]>`
      select id, job_name, attempts, left(last_error, 300) as error from cronledger.jobs
      where (job_name = 'outage.long' and attempts > 1) or last_error like 'LeaseExpiredError%'`;
    expect(reaped).toEqual([]);

    const output = replica.output();
    try {
      expect(output.match(/lost the database/g)).toHaveLength(OUTAGES);
      expect(output.match(/database is back/g)).toHaveLength(OUTAGES);
      expect(output).not.toMatch(/claiming jobs failed|heartbeat failed|scheduler tick failed/);
    } catch (error) {
      onFailure(error);
    }
  }, 240_000);
});

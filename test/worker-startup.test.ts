import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger } from "../src/cronledger.js";
import { MigrationRequiredError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { useTestDatabase } from "./support/database.js";
import { until } from "./support/worker-processes.js";

// A worker opens its LISTEN connection while the schema is checked (src/jobs/worker.ts, listen()). Whatever
// becomes of that check, or of a stop() that comes during it, nothing it opened is left behind.
describe("a worker's start-up", () => {
  const database = useTestDatabase(import.meta.url);
  const job = defineJob({ name: "startup.probe", run: () => {} });
  let observer: postgres.Sql;

  beforeAll(() => {
    observer = postgres(database.url, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await observer.end({ timeout: 1 });
  });

  /** Sessions of the test's database whose last statement was a LISTEN: a LISTEN still held. */
  const listening = async () => {
    const [row] = await observer<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where datname = current_database() and query ilike 'listen%'`;
    return row?.n ?? -1;
  };

  const open = () => createCronledger({ database: { url: database.url, poolSize: 4 }, jobs: [job], logger: silentLogger, metrics: false });

  it("work() on a database that was never migrated says which migration to run and leaves no LISTEN behind", async () => {
    const ledger = open();
    try {
      await expect(ledger.work({ pollInterval: "1h" })).rejects.toBeInstanceOf(MigrationRequiredError);
      expect(await listening()).toBe(0);
    } finally {
      await ledger.close();
    }
  });

  it("start() on that database throws the same and leaves no LISTEN behind", async () => {
    const ledger = open();
    try {
      await expect(ledger.start({ handleSignals: false })).rejects.toBeInstanceOf(MigrationRequiredError);
      expect(await listening()).toBe(0);
    } finally {
      await ledger.close();
    }
  });

  it("a stop() while work() is still checking the schema ends that call, with no LISTEN and no registry row left", async () => {
    const setup = open();
    await setup.migrate();
    await setup.close();
    const ledger = open();
    try {
      const working = ledger.work({ pollInterval: "1h" });
      // The schema check is one round trip away at least: this stop() comes before the worker runs.
      const stopped = ledger.stop();
      await Promise.all([working, stopped]);
      expect(await listening()).toBe(0);
      const [row] = await observer<{ n: number }[]>`select count(*)::int as n from cronledger.workers`;
      expect(row?.n).toBe(0);
    } finally {
      await ledger.close();
    }
  });

  it("a started worker holds one LISTEN, claims, and lets it go on stop()", async () => {
    const ledger = open();
    const ran: number[] = [];
    try {
      const probe = defineJob({ name: "startup.probe", run: (_payload, ctx) => void ran.push(ctx.jobId) });
      const worker = createCronledger({ database: { url: database.url, poolSize: 4 }, jobs: [probe], logger: silentLogger, metrics: false });
      const working = worker.work({ pollInterval: "1h" });
      const { id } = await ledger.enqueue(job, undefined);
      await until("the job ran", () => ran.length > 0);
      expect(ran).toEqual([id]);
      expect(await listening()).toBe(1);
      await worker.stop();
      await working;
      await worker.close();
      expect(await listening()).toBe(0);
    } finally {
      await ledger.close();
    }
  });
});

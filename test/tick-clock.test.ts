import { sql } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { useTestDatabase } from "./support/database.js";

const HOUR = 3_600_000;
const job = defineJob({ name: "clock.probe", run: () => {} });

/**
 * A pass on the database clock plans its candidate slots from this host's
 * estimate of that clock. When the estimate is off by more than the planning
 * margin (the host's clock is wrong, and the process has not yet measured
 * the offset), the pass must still fire exactly the latest due slot: it
 * plans again at the clock the statement read. PostgreSQL server only:
 * embedded PGlite reads this host's clock, so the two cannot disagree.
 */
describe("a pass whose host clock is wrong", () => {
  const database = useTestDatabase(import.meta.url);
  const realNow = Date.now;
  const ledgers: Cronledger[] = [];
  afterEach(async () => {
    Date.now = realNow;
    await Promise.all(ledgers.splice(0).map((ledger) => ledger.close()));
  });

  const open = () => {
    const ledger = createCronledger({ database: { url: database.url, poolSize: 2 }, jobs: [job], schedule: [{ job, cron: "* * * * *" }], logger: silentLogger });
    ledgers.push(ledger);
    return ledger;
  };

  it.each([
    ["an hour fast", HOUR],
    ["an hour slow", -HOUR],
  ])("fires only the latest due slot when this host's clock is %s, then plans right on the next pass", async (_, skewMs) => {
    const setup = open();
    await setup.migrate();
    await query(setup.database.db, sql`truncate cronledger.job_queue, cronledger.job_history, cronledger.job_keys, cronledger.job_counts, cronledger.schedule_last_runs, cronledger.schedule_state`);
    await setup.tick();
    // Three hours of downtime, inside the 24 h catch-up window: only the latest minute may fire.
    await query(setup.database.db, sql`update cronledger.schedule_state set last_enqueued_slot = date_trunc('minute', now()) - interval '3 hours'`);

    const databaseNow = async () =>
      (await query<{ ms: number }>(setup.database.db, sql`select (extract(epoch from clock_timestamp()) * 1000)::float8 as ms`))[0]?.ms ?? Number.NaN;
    const minuteOf = (ms: number) => Math.floor(ms / 60_000) * 60_000;

    const skewed = open();
    Date.now = () => realNow() + skewMs;
    const before = await databaseNow();
    const first = await skewed.tick();
    const after = await databaseNow();
    expect(first.statements).toBe(2);
    // `now` is the database clock, and the one slot fired is its latest minute, not the host's.
    expect(first.now.getTime()).toBeGreaterThanOrEqual(Math.floor(before));
    expect(first.now.getTime()).toBeLessThanOrEqual(Math.ceil(after));
    expect(first.enqueued).toHaveLength(1);
    expect([minuteOf(before), minuteOf(after)]).toContain(first.enqueued[0]?.slot.getTime());

    const second = await skewed.tick();
    expect(second.statements).toBe(1);
    const jobs = await query<{ n: number }>(setup.database.db, sql`select count(*)::int as n from cronledger.jobs`);
    expect(jobs[0]?.n).toBe(1 + second.enqueued.length);
  });
});

import { sql } from "drizzle-orm";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { TickError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import type { Logger } from "../src/log.js";
import { silentLogger } from "../src/log.js";
import { LOCKED_RETRY_MS } from "../src/schedule/deferrals.js";
import { useTestDatabase } from "./support/database.js";

const job = defineJob({ name: "contention.probe", run: () => {} });
const MINUTE = 60_000;

/**
 * Another session holding a lock for as long as the test says: `release()`
 * commits its transaction. Its `held` resolves once the lock is taken.
 */
function holdLock(client: postgres.Sql, statement: string): { held: Promise<void>; release: () => Promise<void> } {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let held!: () => void;
  const taken = new Promise<void>((resolve) => (held = resolve));
  const transaction = client.begin(async (tx) => {
    await tx.unsafe(statement);
    held();
    await released;
  });
  return {
    held: taken,
    release: async () => {
      release();
      await transaction;
    },
  };
}

describe("a pass under contention", () => {
  const database = useTestDatabase(import.meta.url);
  let other: postgres.Sql;
  let ledger: Cronledger | undefined;
  const warnings: { message: string; fields: Record<string, unknown> | undefined }[] = [];
  const logger: Logger = { ...silentLogger, warn: (message, fields) => warnings.push({ message, fields }) };

  beforeAll(async () => {
    other = postgres(database.url, { max: 1, onnotice: () => {} });
  });

  afterAll(async () => {
    await ledger?.close();
    await other?.end({ timeout: 1 });
  });

  const jobsOf = async (key: string) =>
    (await query<{ n: number }>(ledger!.database.db, sql`select count(*)::int as n from cronledger.jobs where schedule_key = ${key}`))[0]?.n ?? 0;

  it("fires the other 99 entries while one ledger row is held by an open transaction, reports and logs that one, and fires it once after the lock goes", async () => {
    ledger = createCronledger({
      database: { url: database.url, poolSize: 4 },
      jobs: [job],
      schedule: Array.from({ length: 100 }, (_, index) => ({ job, cron: "* * * * *", key: `e${index}` })),
      logger,
      metrics: false,
    });
    await ledger.migrate();
    const start = Math.ceil(Date.now() / MINUTE) * MINUTE + 10 * MINUTE;
    await ledger.tick({ now: new Date(start + 1_000) });
    const locked = ledger.entries[42]!;

    const lock = holdLock(other, `select 1 from cronledger.schedule_state where key = '${locked.ledgerKey.replace(/'/g, "''")}' for update`);
    await lock.held;
    let report;
    try {
      // Returns while the lock is still held: the pass never waits on it for longer than its short lock wait.
      report = await ledger.tick({ now: new Date(start + MINUTE + 1_000) });
    } finally {
      await lock.release();
    }
    expect(report.enqueued).toHaveLength(99);
    expect(report.enqueued.map((outcome) => outcome.key)).not.toContain(locked.ledgerKey);
    expect(report.locked.map((outcome) => outcome.key)).toEqual([locked.ledgerKey]);
    expect(report.locked[0]?.slot).toEqual(new Date(start + MINUTE));
    expect(await jobsOf(locked.ledgerKey)).toBe(0);
    expect(warnings.find((warning) => warning.message.includes("held locked by another session"))?.fields).toMatchObject({ identity: locked.identity });

    // The lock is gone: the next pass fires the entry's due slot, once.
    const next = await ledger.tick({ now: new Date(start + MINUTE + 1_000 + LOCKED_RETRY_MS) });
    expect(next.enqueued.map((outcome) => [outcome.key, outcome.slot])).toEqual([[locked.ledgerKey, new Date(start + MINUTE)]]);
    expect(next.locked).toEqual([]);
    const again = await ledger.tick({ now: new Date(start + MINUTE + 30_000) });
    expect(again.enqueued).toEqual([]);
    expect(await jobsOf(locked.ledgerKey)).toBe(1);
  });

  it("cancels a pass that waits past passTimeout on a table lock, as a TickError naming the phase, and the next pass fires", async () => {
    await ledger?.close();
    ledger = createCronledger({
      database: { url: database.url, poolSize: 4 },
      jobs: [job],
      schedule: [{ job, cron: "* * * * *", key: "timeout" }],
      logger: silentLogger,
      metrics: false,
      passTimeout: "300ms",
    });
    const lock = holdLock(other, "lock table cronledger.schedule_state in access exclusive mode");
    await lock.held;
    let failure: unknown;
    try {
      await ledger.tick();
    } catch (error) {
      failure = error;
    } finally {
      await lock.release();
    }
    expect(failure).toBeInstanceOf(TickError);
    expect(failure).toMatchObject({ code: "tick_failed", phase: "pass" });
    expect(String((failure as Error).message)).toMatch(/passTimeout, 300 ms/);
    // Nothing holds the table any more: the same Cronledger's next pass goes through.
    const report = await ledger.tick();
    expect(report.created).toBe(1);
  });
});

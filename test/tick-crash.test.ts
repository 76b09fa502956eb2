import { spawn } from "node:child_process";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { silentLogger } from "../src/log.js";
import { slotIdempotencyKey } from "../src/schedule/identity.js";
import { createTestDatabase } from "./support/database.js";
import { concurrencyJob, minuteEntries, SLOT_MS, START } from "./fixtures/tick-schedule.js";

const FIXTURE = new URL("./fixtures/tick-process.ts", import.meta.url).pathname;
const ENTRIES = 3;

/**
 * A tick whose connection dies between the claim and the commit. The test
 * inserts, in a transaction it keeps open, job rows with the idempotency
 * keys of the slots the pass will enqueue: the pass claims its ledger rows,
 * then its job insert waits for that transaction to decide whether those
 * keys exist. That is where its connection is cut.
 */
describe("a tick that dies between claim and commit", () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let ledger: Cronledger;
  let locker: postgres.Sql;

  beforeAll(async () => {
    database = await createTestDatabase(import.meta.url);
    ledger = createCronledger({ database: { url: database.url, poolSize: 2 }, jobs: [concurrencyJob], schedule: minuteEntries(ENTRIES), logger: silentLogger });
    await ledger.migrate();
    locker = postgres(database.url, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await locker.end({ timeout: 1 });
    await ledger.close();
    await database.drop();
  });

  async function ledgerValues(): Promise<number[]> {
    const rows = await query<{ ms: number }>(
      ledger.database.db,
      sql`select (extract(epoch from last_enqueued_slot) * 1000)::float8 as ms from cronledger.schedule_state order by key`,
    );
    return rows.map((row) => row.ms);
  }

  /** Opens the blocking transaction: uncommitted rows holding the idempotency keys of `slotMs`'s jobs. */
  async function holdSlotKeys(slotMs: number): Promise<postgres.ReservedSql> {
    const blocker = await locker.reserve();
    await blocker`begin`;
    for (const entry of ledger.entries) {
      await blocker`insert into cronledger.job_keys (job_name, idempotency_key, job_id) values (${entry.jobName}, ${slotIdempotencyKey(ledger.namespace, entry.identity, slotMs)}, 0)`;
    }
    return blocker;
  }

  /**
   * The backend of the pass once it waits on the blocker, after its claim: the ledger rows its statement claimed are
   * locked by then (all of them, or, once a wait past the pass's lock bound split the pass, those of the part that waits).
   */
  async function blockedTickPid(blocker: postgres.ReservedSql): Promise<number> {
    for (let attempt = 0; attempt < 500; attempt += 1) {
      // Statistics views are snapshotted once per transaction unless cleared.
      await blocker`select pg_stat_clear_snapshot()`;
      const [row] = await blocker<{ pid: number }[]>`
        select pid from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and wait_event = 'transactionid'`;
      if (row) {
        const free = await blocker<{ key: string }[]>`select key from cronledger.schedule_state for update skip locked`;
        expect(free.length).toBeLessThan(ENTRIES);
        return row.pid;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    throw new Error("no tick blocked on the job insert");
  }

  async function waitGone(pid: number): Promise<void> {
    for (let attempt = 0; attempt < 500; attempt += 1) {
      const rows = await query(ledger.database.db, sql`select 1 from pg_stat_activity where pid = ${pid}`);
      if (rows.length === 0) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    throw new Error(`backend ${pid} did not go away`);
  }

  it("leaves neither a ledger advance nor a job when the process is SIGKILLed, and the slot fires on the next pass", async () => {
    const t0 = START;
    await ledger.tick({ now: new Date(t0) });
    const before = await ledgerValues();
    expect(before).toEqual([t0, t0, t0]);

    const blocker = await holdSlotKeys(t0 + SLOT_MS);
    const child = spawn(process.execPath, ["--import", "tsx", FIXTURE, "once"], {
      env: { ...process.env, DATABASE_URL: database.url, ENTRIES: String(ENTRIES), NOW_MS: String(t0 + SLOT_MS + 100) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on("exit", (_code, signal) => resolve(signal)));
    const pid = await blockedTickPid(blocker);
    child.kill("SIGKILL");
    expect(await exited).toBe("SIGKILL");
    // The server notices its client is gone while the statement still waits, and rolls it back;
    // only then does the blocker step aside, so nothing could complete after the kill.
    await waitGone(pid);
    await blocker`rollback`;
    blocker.release();

    expect(await ledgerValues()).toEqual(before);
    expect(await query(ledger.database.db, sql`select 1 from cronledger.jobs`)).toHaveLength(0);

    const next = await ledger.tick({ now: new Date(t0 + SLOT_MS + 200) });
    expect(next.enqueued).toHaveLength(ENTRIES);
    expect(next.enqueued.every((outcome) => outcome.slot.getTime() === t0 + SLOT_MS)).toBe(true);
  });

  it("rolls back a pass whose backend is terminated and fires the slot once on the retry", async () => {
    const t1 = START + 10 * SLOT_MS;
    await ledger.tick({ now: new Date(t1 - SLOT_MS + 1) });
    const before = await ledgerValues();
    const jobsBefore = await query<{ n: number }>(ledger.database.db, sql`select count(*)::int as n from cronledger.jobs`);

    const blocker = await holdSlotKeys(t1);
    const pass = ledger.tick({ now: new Date(t1 + 100) });
    const pid = await blockedTickPid(blocker);
    await blocker`select pg_terminate_backend(${pid})`;
    const observed = await ledgerValues();
    // The keys go at once: the retry (after its backoff) claims and enqueues. Were it left waiting on them, the pass's
    // bound on a job insert's lock wait (src/schedule/deferrals.ts) would set the entries aside instead.
    await blocker`rollback`;
    blocker.release();
    const result = await pass;
    expect(observed).toEqual(before);
    expect(result.attempts).toBeGreaterThan(1);
    expect(result.enqueued).toHaveLength(ENTRIES);
    const [after] = await query<{ n: number }>(ledger.database.db, sql`select count(*)::int as n from cronledger.jobs`);
    expect(after!.n - jobsBefore[0]!.n).toBe(ENTRIES);
    expect(await ledgerValues()).toEqual([t1, t1, t1]);
  });
});

import { sql } from "drizzle-orm";
import postgres from "postgres";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { TickError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger, type Logger } from "../src/log.js";
import { OTHER_LOCK_WAIT_MS, SET_ASIDE_RETRIES } from "../src/schedule/deferrals.js";
import { useTestDatabase } from "./support/database.js";
import { until } from "./support/worker-processes.js";

/**
 * Entry isolation for the failures a retry could fix (src/schedule/tick.ts,
 * src/schedule/deferrals.ts): an entry whose job insert raises a
 * serialization failure every time, and one whose insert waits on a row lock
 * another session holds, are set aside, retried alone and quarantined with
 * their names in the reason, while a third entry fires every slot on time.
 */
const conflict = defineJob({ name: "iso.conflict", run: () => {} });
const waits = defineJob({ name: "iso.waits", run: () => {} });
const steady = defineJob({ name: "iso.steady", run: () => {} });
const EVERY_3S = "*/3 * * * * *";
/** The span the ticker runs for: 12 slots of the steady entry (shortened from the 2 minutes). */
const SPAN_MS = 36_000;

describe("an entry whose insert keeps failing or waiting", () => {
  const database = useTestDatabase(import.meta.url);
  let holder: postgres.Sql;
  let releaseLock: (() => void) | undefined;
  let lockTransaction: Promise<unknown> | undefined;
  let ledger: Cronledger | undefined;

  const setUp = async (target: Cronledger) => {
    const run = (text: string) => query(target.database.db, sql.raw(text));
    await target.migrate();
    await run(`create table if not exists public.app_rows (id int primary key)`);
    await run(`insert into public.app_rows values (1) on conflict do nothing`);
    await run(`create or replace function public.conflict_always() returns trigger language plpgsql as $$
      begin raise exception 'could not serialize access due to concurrent update (application trigger)' using errcode = '40001'; end $$`);
    await run(`create or replace function public.wait_for_row() returns trigger language plpgsql as $$
      begin perform 1 from public.app_rows where id = 1 for update; return new; end $$`);
    await run(`drop trigger if exists conflict_always on cronledger.job_queue`);
    await run(`create trigger conflict_always before insert on cronledger.job_queue for each row when (new.job_name = 'iso.conflict') execute function public.conflict_always()`);
    await run(`drop trigger if exists wait_for_row on cronledger.job_queue`);
    await run(`create trigger wait_for_row before insert on cronledger.job_queue for each row when (new.job_name = 'iso.waits') execute function public.wait_for_row()`);
  };

  /** Another session takes the application row's lock and keeps its transaction open until releaseLock(). */
  const holdRowLock = async () => {
    await unlock();
    let held!: () => void;
    const taken = new Promise<void>((resolve) => (held = resolve));
    const released = new Promise<void>((resolve) => (releaseLock = resolve));
    lockTransaction = holder.begin(async (tx) => {
      await tx`select 1 from public.app_rows where id = 1 for update`;
      held();
      await released;
    });
    await taken;
  };

  const unlock = async () => {
    releaseLock?.();
    releaseLock = undefined;
    await lockTransaction?.catch(() => {});
  };

  beforeAll(() => {
    holder = postgres(database.url, { max: 1, onnotice: () => {} });
  });

  afterAll(async () => {
    await unlock();
    await ledger?.stop();
    await ledger?.close();
    await holder?.end({ timeout: 1 });
  });

  it("sets the two aside, retries them alone with a backoff, then quarantines them by name; the others fire in every pass, one statement when all is well", async () => {
    const at = (ms: number) => new Date(Date.UTC(2026, 5, 1, 12, 0, 0) + ms);
    ledger = createCronledger({
      database: { url: database.url, poolSize: 3 },
      jobs: [conflict, waits, steady],
      schedule: [
        { job: conflict, cron: EVERY_3S, key: "c" },
        { job: waits, cron: EVERY_3S, key: "w" },
        { job: steady, cron: EVERY_3S, key: "s" },
      ],
      logger: silentLogger,
      metrics: false,
      chores: false,
    });
    await setUp(ledger);
    await holdRowLock();
    const [badConflict, badWait, good] = ledger.entries;
    const first = await ledger.tick({ now: at(0) });
    expect(first.created).toBe(3);
    expect(first.statements).toBe(1);

    // The slot at 3 s: the statement fails (the serialization failure, or the lock wait past its bound), its entries are tried apart.
    const failing = await ledger.tick({ now: at(3_000) });
    expect(failing.enqueued.map((slot) => slot.key)).toEqual([good!.ledgerKey]);
    expect(failing.setAside.map((slot) => [slot.key, slot.failures]).sort()).toEqual([[badConflict!.ledgerKey, 1], [badWait!.ledgerKey, 1]].sort());
    expect(failing.setAside.find((slot) => slot.key === badConflict!.ledgerKey)?.error).toMatch(/could not serialize/);
    expect(failing.setAside.find((slot) => slot.key === badWait!.ledgerKey)?.error).toMatch(/lock/);
    expect(failing.setAside.every((slot) => slot.retryAt.getTime() === at(4_000).getTime())).toBe(true);
    expect(failing.quarantined).toEqual([]);

    // Retried alone after 1, 3 and 9 s: each its own statement, after the others' one statement.
    let retryAt = 4_000;
    for (let failures = 2; failures <= SET_ASIDE_RETRIES; failures += 1) {
      const retry = await ledger.tick({ now: at(retryAt) });
      expect(retry.setAside.map((slot) => slot.failures)).toEqual([failures, failures]);
      // Each of the two alone, and the steady entry's statement when one of its slots is due, which also asks whether
      // dynamic entries are due; when it is not, that question is a statement of its own (the two failed ones' asked it).
      expect(retry.statements).toBe(3);
      retryAt += 1_000 * 3 ** (failures - 1);
    }
    const fourth = await ledger.tick({ now: at(retryAt) });
    expect(fourth.setAside).toEqual([]);
    expect(fourth.quarantined.map((slot) => slot.key).sort()).toEqual([badConflict!.ledgerKey, badWait!.ledgerKey].sort());
    // The steady entry fired at every pass it was due in (a pass fires an entry's latest due slot).
    const steadySlots = await query<{ ms: number }>(ledger.database.db, sql`select (extract(epoch from scheduled_for) * 1000)::float8 as ms from cronledger.jobs where job_name = 'iso.steady' order by 1`);
    expect(steadySlots.map((row) => row.ms)).toEqual([at(3_000), at(6_000), at(15_000)].map((date) => date.getTime()));
    const reasons = await query<{ key: string; reason: string }>(ledger.database.db, sql`select key, quarantine_reason as reason from cronledger.schedule_state where quarantine_reason is not null`);
    expect(reasons.find((row) => row.key === badConflict!.ledgerKey)?.reason).toContain(`entry ${badConflict!.identity}:`);
    expect(reasons.find((row) => row.key === badWait!.ledgerKey)?.reason).toContain(`entry ${badWait!.identity}:`);
    // A pass in which nothing fails is still one statement.
    const quiet = await ledger.tick({ now: at(retryAt + 3_000) });
    expect(quiet.enqueued.map((slot) => slot.key)).toEqual([good!.ledgerKey]);
    expect(quiet.statements).toBe(1);
    await unlock();
    await ledger.close();
    ledger = undefined;
  });

  it("sets aside an entry whose insert runs past passTimeout while the others fire; alone in its pass, the TickError names it", async () => {
    const at = (ms: number) => new Date(Date.UTC(2026, 5, 2, 12, 0, 0) + ms);
    const slow = defineJob({ name: "iso.slow", run: () => {} });
    const open = (withSteady: boolean) =>
      createCronledger({
        database: { url: database.url, poolSize: 3 },
        jobs: [slow, steady],
        schedule: [{ job: slow, cron: EVERY_3S, key: "slow" }, ...(withSteady ? [{ job: steady, cron: EVERY_3S, key: "with-slow" }] : [])],
        logger: silentLogger,
        metrics: false,
        chores: false,
        passTimeout: "1s",
      });
    ledger = open(true);
    await setUp(ledger);
    await query(ledger.database.db, sql.raw(`create or replace function public.sleep_long() returns trigger language plpgsql as $$ begin perform pg_sleep(5); return new; end $$`));
    await query(ledger.database.db, sql.raw(`create or replace trigger sleep_long before insert on cronledger.job_queue for each row when (new.job_name = 'iso.slow') execute function public.sleep_long()`));
    const [slowEntry, good] = ledger.entries;
    await ledger.tick({ now: at(0) });
    const report = await ledger.tick({ now: at(3_000) });
    expect(report.enqueued.map((slot) => slot.key)).toEqual([good!.ledgerKey]);
    expect(report.setAside.map((slot) => slot.key)).toEqual([slowEntry!.ledgerKey]);
    await ledger.close();

    // Alone in its pass, a time-out could be anyone's (a table lock, a slow server): the pass fails, naming the entry.
    ledger = open(false);
    let failure: unknown;
    await ledger.tick({ now: at(6_000) }).catch((error: unknown) => (failure = error));
    expect(failure).toBeInstanceOf(TickError);
    expect(failure).toMatchObject({ phase: "pass", entry: slowEntry!.identity });
    expect(String((failure as Error).message)).toContain(`for entry ${slowEntry!.identity}`);
  });

  afterEach(async () => {
    await unlock();
    await ledger?.stop();
    await ledger?.close();
    ledger = undefined;
  });

  it(`under start(): the third entry fires every slot on time for ${SPAN_MS / 1000} s while the other two are set aside and quarantined by name`, async () => {
    const problems: string[] = [];
    const logger: Logger = { ...silentLogger, error: (message, fields) => problems.push(`${message} ${JSON.stringify(fields ?? {})}`) };
    ledger = createCronledger({
      database: { url: database.url, poolSize: 3 },
      jobs: [conflict, waits, steady],
      schedule: [
        { job: conflict, cron: EVERY_3S, key: "live-c" },
        { job: waits, cron: EVERY_3S, key: "live-w" },
        { job: steady, cron: EVERY_3S, key: "live-s" },
      ],
      logger,
      metrics: false,
      chores: false,
    });
    await setUp(ledger);
    await holdRowLock();
    const [badConflict, badWait, good] = ledger.entries;
    const db = ledger.database.db;
    const clock = async () => (await query<{ ms: number }>(db, sql`select (extract(epoch from now()) * 1000)::float8 as ms`))[0]!.ms;
    const startedMs = await clock();
    await ledger.start({ workers: false, handleSignals: false });
    await until("the span has passed on the database clock", async () => (await clock()) >= startedMs + SPAN_MS, SPAN_MS + 60_000);
    await ledger.stop();
    await unlock();

    const jobs = await query<{ slot_ms: number; late_ms: number }>(
      db,
      sql`select (extract(epoch from scheduled_for) * 1000)::float8 as slot_ms, (extract(epoch from created_at - scheduled_for) * 1000)::float8 as late_ms
          from cronledger.jobs where schedule_key = ${good!.ledgerKey} order by scheduled_for`,
    );
    const slots = jobs.map((job) => job.slot_ms);
    // Every slot from the first to the last, each once: a pass late by a period would have skipped one.
    expect(slots.length).toBeGreaterThanOrEqual(Math.floor(SPAN_MS / 3_000) - 2);
    expect(new Set(slots).size).toBe(slots.length);
    for (let index = 1; index < slots.length; index += 1) expect(slots[index]! - slots[index - 1]!).toBe(3_000);
    const lateness = jobs.map((job) => job.late_ms);
    console.log(`steady entry: ${jobs.length} slots in ${SPAN_MS / 1000} s, lateness ms max ${Math.max(...lateness).toFixed(0)}, median ${[...lateness].sort((a, b) => a - b)[Math.floor(lateness.length / 2)]!.toFixed(0)}`);
    // On time: each slot enqueued within the lock wait bound plus a pass or two of a busy machine.
    expect(Math.max(...lateness)).toBeLessThan(OTHER_LOCK_WAIT_MS * 2 + 1_500);

    const rows = await query<{ key: string; reason: string | null; count: number }>(
      db,
      sql`select key, quarantine_reason as reason, quarantine_count as count from cronledger.schedule_state where key in (${badConflict!.ledgerKey}, ${badWait!.ledgerKey})`,
    );
    const reasonOf = (key: string) => rows.find((row) => row.key === key)?.reason ?? "";
    expect(reasonOf(badConflict!.ledgerKey)).toContain(`entry ${badConflict!.identity}:`);
    expect(reasonOf(badConflict!.ledgerKey)).toMatch(/could not serialize/);
    expect(reasonOf(badWait!.ledgerKey)).toContain(`entry ${badWait!.identity}:`);
    expect(reasonOf(badWait!.ledgerKey)).toMatch(/lock/);
    const badJobs = await query<{ n: number }>(db, sql`select count(*)::int as n from cronledger.jobs where job_name in ('iso.conflict', 'iso.waits')`);
    expect(badJobs[0]?.n).toBe(0);
    // No pass failed as a whole.
    expect(problems.filter((line) => line.includes("tick failed"))).toEqual([]);
  }, SPAN_MS + 120_000);
});

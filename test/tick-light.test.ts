import { sql, type SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import postgres from "postgres";
import { afterEach, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { openDatabase, resolveDatabaseSetting, query, type Database } from "../src/db/connection.js";
import type { Executor } from "../src/db/executor.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import type { ScheduleEntry } from "../src/schedule/define-schedule.js";
import { useTestDatabase } from "./support/database.js";

/**
 * The pass's light statement (src/db/sql/ledger.ts, runPass): without the
 * pause's and overlap policy's CTEs while no entry of the statement has a
 * policy and none is known to be paused. A pause written straight into the
 * ledger row, as another replica or an operator does, must still hold from
 * the next pass on.
 */

const MINUTE = 60_000;
const T0 = Date.parse("2026-05-04T09:00:00.000Z");
const at = (minutes: number, seconds = 1) => new Date(T0 + minutes * MINUTE + seconds * 1000);

const rollup = defineJob({ name: "light.rollup", run: () => {} });
const digest = defineJob({ name: "light.digest", run: () => {} });
const broken = defineJob({ name: "light.broken", run: () => {} });

const dialect = new PgDialect();

/** A database whose pass statements are recorded as "light" or "full" (the full one carries the policy's `slot_candidates`). */
function recordingDatabase(url: string): { database: Database; passes: string[] } {
  const database = openDatabase(resolveDatabaseSetting({ url, poolSize: 2 }));
  const passes: string[] = [];
  const watch = (executor: Executor): Executor =>
    new Proxy(executor, {
      get(target, property, receiver) {
        if (property !== "execute") return Reflect.get(target, property, receiver) as unknown;
        return (statement: SQL) => {
          const text = dialect.sqlToQuery(statement).sql;
          if (text.includes("claimed as (")) passes.push(text.includes("slot_candidates") ? "full" : "light");
          return target.execute(statement);
        };
      },
    });
  return { database: { ...database, withStatementTimeout: (timeoutMs) => watch(database.withStatementTimeout(timeoutMs)) }, passes };
}

interface RunRow {
  status: string;
  outcome: string | null;
  minute: number;
  last_error: string | null;
}

describe("the pass's light statement", () => {
  const database = useTestDatabase(import.meta.url);
  const opened: { ledger: Cronledger; database: Database }[] = [];
  const others: postgres.Sql[] = [];
  afterEach(async () => {
    for (const { ledger, database: db } of opened.splice(0)) {
      await ledger.close();
      await db.close();
    }
    for (const other of others.splice(0)) await other.end({ timeout: 1 });
  });

  const open = async (schedule: ScheduleEntry[]) => {
    const recorded = recordingDatabase(database.url);
    const ledger = createCronledger({ database: recorded.database, jobs: [rollup, digest, broken], schedule, logger: silentLogger, metrics: false, chores: false });
    opened.push({ ledger, database: recorded.database });
    await ledger.migrate();
    await query(
      ledger.database.db,
      sql`truncate cronledger.job_queue, cronledger.job_history, cronledger.job_keys, cronledger.job_counts, cronledger.schedule_last_runs, cronledger.schedule_state`,
    );
    // Another replica's (or an operator's) own connection to the ledger.
    const other = postgres(database.url, { max: 1, onnotice: () => {} });
    others.push(other);
    /** One tick, with the statements it sent and which variant each pass statement was. */
    const tick = async (now: Date) => {
      const from = recorded.passes.length;
      const report = await ledger.tick({ now });
      return { report, statements: report.statements, passes: recorded.passes.slice(from) };
    };
    const runs = (job: string) =>
      query<RunRow>(
        ledger.database.db,
        sql`select status, outcome, ((extract(epoch from scheduled_for) * 1000)::float8 - ${T0}::float8) / ${MINUTE}::float8 as minute, last_error
            from cronledger.jobs where job_name = ${job} order by scheduled_for`,
      );
    return { ledger, other, tick, runs };
  };

  it("never fires a slot of an entry paused in its ledger row by another connection, and goes back to light once it is resumed", async () => {
    const { other, tick, runs } = await open([
      { job: rollup, cron: "* * * * *", key: "minutely" },
      { job: digest, cron: "* * * * *" },
    ]);
    expect((await tick(at(0))).passes).toEqual(["light"]);
    const running = await tick(at(1));
    expect(running.report.enqueued.map((slot) => slot.jobName).sort()).toEqual([digest.name, rollup.name]);
    expect([running.statements, running.passes]).toEqual([1, ["light"]]);

    // Another replica's operator pauses the entry: this process learns of it only from the ledger row.
    await other`update cronledger.schedule_state set paused_at = now(), paused_by = 'replica-b', paused_note = 'held by hand' where job_name = ${rollup.name}`;

    // The light statement leaves the paused row alone and says so; the full statement records the slot as skipped.
    const firstPaused = await tick(at(2));
    expect(firstPaused.report.enqueued.map((slot) => slot.jobName)).toEqual([digest.name]);
    expect(firstPaused.report.skipped).toEqual([
      expect.objectContaining({ jobName: rollup.name, reason: "paused", slot: new Date(T0 + 2 * MINUTE), detail: "paused by replica-b: held by hand" }),
    ]);
    expect(firstPaused.report.lostRace).toEqual([]);
    expect([firstPaused.statements, firstPaused.passes]).toEqual([2, ["light", "full"]]);

    // Known to be paused: the pass is the one full statement from the start.
    const stillPaused = await tick(at(3));
    expect(stillPaused.report.enqueued.map((slot) => slot.jobName)).toEqual([digest.name]);
    expect(stillPaused.report.skipped.map((slot) => [slot.jobName, slot.reason])).toEqual([[rollup.name, "paused"]]);
    expect([stillPaused.statements, stillPaused.passes]).toEqual([1, ["full"]]);

    // Resumed at 3:30 by the other connection; no pass in minute 4: the pass at 5:01 fires slot 5 alone, in the full
    // statement that finds the entry resumed; the next pass is light again.
    await other`update cronledger.schedule_state set paused_at = null, paused_by = null, paused_note = null where job_name = ${rollup.name}`;
    const resumed = await tick(at(5));
    expect(resumed.report.enqueued.map((slot) => [slot.jobName, slot.slot.getTime()]).sort()).toEqual([
      [digest.name, T0 + 5 * MINUTE],
      [rollup.name, T0 + 5 * MINUTE],
    ]);
    expect(resumed.report.skipped).toEqual([]);
    expect([resumed.statements, resumed.passes]).toEqual([1, ["full"]]);
    const light = await tick(at(6));
    expect(light.report.enqueued).toHaveLength(2);
    expect([light.statements, light.passes]).toEqual([1, ["light"]]);

    // Every slot accounted for once: fired, or recorded as skipped (paused); no job of a paused slot was ever enqueued.
    expect(await runs(rollup.name)).toEqual([
      { status: "queued", outcome: null, minute: 1, last_error: null },
      { status: "skipped", outcome: "paused", minute: 2, last_error: "paused by replica-b: held by hand" },
      { status: "skipped", outcome: "paused", minute: 3, last_error: "paused by replica-b: held by hand" },
      { status: "queued", outcome: null, minute: 5, last_error: null },
      { status: "queued", outcome: null, minute: 6, last_error: null },
    ]);
    expect((await runs(digest.name)).map((run) => [run.status, run.minute])).toEqual([1, 2, 3, 5, 6].map((minute) => ["queued", minute]));
  });

  it("is full only for statements holding an entry with an overlap policy, and a pause found by a light pass holds there too", async () => {
    const { other, tick, runs } = await open([
      { job: rollup, cron: "*/2 * * * *", key: "even", overlap: "skip" },
      { job: digest, cron: "* * * * *" },
    ]);
    // Minute 0 plans both entries (the rows are created): full. Odd minutes plan the digest alone: light.
    expect((await tick(at(0))).passes).toEqual(["full"]);
    expect((await tick(at(1))).passes).toEqual(["light"]);
    const even = await tick(at(2));
    expect(even.report.enqueued.map((slot) => slot.jobName).sort()).toEqual([digest.name, rollup.name]);
    expect(even.passes).toEqual(["full"]);
    // The skip policy still holds back the next slot while the first job waits.
    const held = await tick(at(4));
    expect(held.report.skipped.map((slot) => [slot.jobName, slot.reason])).toEqual([[rollup.name, "overlap"]]);

    // The digest paused by hand while only its own light passes run: its slot is recorded as skipped, never enqueued.
    await other`update cronledger.schedule_state set paused_at = now(), paused_by = 'replica-b' where job_name = ${digest.name}`;
    const paused = await tick(at(5));
    expect(paused.report.enqueued).toEqual([]);
    expect(paused.report.skipped.map((slot) => [slot.jobName, slot.reason])).toEqual([[digest.name, "paused"]]);
    expect(paused.passes).toEqual(["light", "full"]);
    expect((await runs(digest.name)).map((run) => [run.status, run.outcome, run.minute])).toEqual([
      ["queued", null, 1],
      ["queued", null, 2],
      ["queued", null, 4],
      ["skipped", "paused", 5],
    ]);
  });

  it("splits a failed light statement into parts as before: the bad entry is quarantined, the paused one recorded as skipped, the rest fire", async () => {
    const { ledger, other, tick, runs } = await open([
      { job: rollup, cron: "* * * * *", key: "minutely" },
      { job: digest, cron: "* * * * *" },
      { job: broken, cron: "* * * * *" },
    ]);
    await query(
      ledger.database.db,
      sql.raw(`create or replace function public.light_reject() returns trigger language plpgsql as $$
        begin raise exception 'rejected by the application' using errcode = '22023'; end $$`),
    );
    await query(ledger.database.db, sql.raw(`drop trigger if exists light_reject on cronledger.job_queue`));
    await query(
      ledger.database.db,
      sql.raw(`create trigger light_reject before insert on cronledger.job_queue for each row when (new.job_name = 'light.broken') execute function public.light_reject()`),
    );
    try {
      await tick(at(0));
      await other`update cronledger.schedule_state set paused_at = now(), paused_by = 'replica-b' where job_name = ${rollup.name}`;
      const failed = await tick(at(1));
      expect(failed.report.enqueued.map((slot) => slot.jobName)).toEqual([digest.name]);
      expect(failed.report.skipped.map((slot) => [slot.jobName, slot.reason])).toEqual([[rollup.name, "paused"]]);
      expect(failed.report.quarantined.map((slot) => slot.jobName)).toEqual([broken.name]);
      // The failed light statement, its parts (light: the pause is not known yet), then the paused entry's full statement.
      expect(failed.passes[0]).toBe("light");
      expect(failed.passes.at(-1)).toBe("full");
      expect(failed.passes.filter((pass) => pass === "full")).toHaveLength(1);
      expect((await runs(rollup.name)).map((run) => [run.status, run.outcome, run.minute])).toEqual([["skipped", "paused", 1]]);
      expect(await runs(broken.name)).toEqual([]);
    } finally {
      await query(ledger.database.db, sql.raw(`drop trigger if exists light_reject on cronledger.job_queue`));
    }
  });
});

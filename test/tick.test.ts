import { sql } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Cronledger } from "../src/cronledger.js";
import type { Duration } from "../src/duration.js";
import { ScheduleValidationError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import type { Logger } from "../src/log.js";
import { defineSchedule, type ScheduleEntry } from "../src/schedule/define-schedule.js";
import { BACKENDS, createTestStore, jobCount, rows, type TestStore } from "./support/ledger.js";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const T0 = new Date("2026-03-02T10:00:00.000Z");
const at = (offsetMs: number) => new Date(T0.getTime() + offsetMs);

const rollup = defineJob({ name: "reports.rollup", run: () => {} });
const digest = defineJob({ name: "email.send-digest", payload: z.object({ list: z.string() }), run: () => {} });
const JOBS = [rollup, digest];

interface ScheduledJobRow {
  job_name: string;
  scheduled_for_ms: number;
  schedule_key: string;
  payload: unknown;
}

async function scheduledJobs(ledger: Cronledger): Promise<ScheduledJobRow[]> {
  return rows<ScheduledJobRow>(
    ledger,
    sql`select job_name, (extract(epoch from scheduled_for) * 1000)::float8 as scheduled_for_ms, schedule_key, payload
        from cronledger.jobs order by scheduled_for, id`,
  );
}

async function ledgerSlot(ledger: Cronledger, key: string): Promise<number | undefined> {
  const [row] = await rows<{ ms: number }>(
    ledger,
    sql`select (extract(epoch from last_enqueued_slot) * 1000)::float8 as ms from cronledger.schedule_state where key = ${key}`,
  );
  return row?.ms;
}

describe.each(BACKENDS)("tick on %s", (backend) => {
  let store: TestStore;
  const open = async (schedule: readonly ScheduleEntry[], extra: { logger?: Logger; catchUpWindow?: Duration } = {}) => {
    store ??= await createTestStore(backend, `tick_${backend}`);
    return store.open({ jobs: JOBS, schedule, ...extra });
  };

  afterEach(async () => {
    await store?.dispose();
    store = undefined as unknown as TestStore;
  });

  it("creates the ledger row on the first pass without firing, fires a due slot once, and a fresh instance adds nothing", async () => {
    const schedule = defineSchedule([{ job: rollup, cron: "*/15 * * * *" }]);
    const ledger = await open(schedule);

    const first = await ledger.tick({ now: at(5 * MINUTE) });
    expect(first.created).toBe(1);
    expect(first.enqueued).toHaveLength(0);
    expect(await jobCount(ledger)).toBe(0);
    expect(first.nextFireAt?.toISOString()).toBe("2026-03-02T10:15:00.000Z");

    const notYet = await ledger.tick({ now: at(14 * MINUTE + 59_000) });
    expect(notYet.enqueued).toHaveLength(0);

    const due = await ledger.tick({ now: at(15 * MINUTE + 200) });
    expect(due.enqueued).toHaveLength(1);
    const jobs = await scheduledJobs(ledger);
    expect(jobs).toHaveLength(1);
    expect(new Date(jobs[0]!.scheduled_for_ms).toISOString()).toBe("2026-03-02T10:15:00.000Z");
    expect(due.enqueued[0]?.jobId).toEqual(expect.any(Number));

    const fresh = await store.open({ jobs: JOBS, schedule });
    const again = await fresh.tick({ now: at(15 * MINUTE + 400) });
    expect(again.enqueued).toHaveLength(0);
    expect(again.created).toBe(0);
    expect(await jobCount(ledger)).toBe(1);
  });

  it("fires only the most recent slot after downtime inside the catch-up window", async () => {
    const ledger = await open(defineSchedule([{ job: rollup, cron: "* * * * *" }]));
    await ledger.tick({ now: at(0) });
    const report = await ledger.tick({ now: at(30 * MINUTE + 10_000) });
    expect(report.enqueued).toHaveLength(1);
    const jobs = await scheduledJobs(ledger);
    expect(jobs.map((job) => new Date(job.scheduled_for_ms).toISOString())).toEqual(["2026-03-02T10:30:00.000Z"]);
  });

  it("skips a slot older than the catch-up window and moves the ledger forward", async () => {
    const schedule = defineSchedule([{ job: rollup, cron: "0 * * * *", catchUpWindow: "30m" }]);
    const ledger = await open(schedule);
    await ledger.tick({ now: at(0) });
    const key = ledger.entries[0]!.ledgerKey;

    const late = await ledger.tick({ now: at(5 * HOUR + 45 * MINUTE) });
    expect(late.enqueued).toHaveLength(0);
    expect(late.skippedStale.map((outcome) => outcome.slot.toISOString())).toEqual(["2026-03-02T15:00:00.000Z"]);
    expect(await ledgerSlot(ledger, key)).toBe(Date.parse("2026-03-02T15:00:00.000Z"));
    expect(await jobCount(ledger)).toBe(0);

    const next = await ledger.tick({ now: at(6 * HOUR + 1_000) });
    expect(next.enqueued.map((outcome) => outcome.slot.toISOString())).toEqual(["2026-03-02T16:00:00.000Z"]);
  });

  it("takes createCronledger's catchUpWindow for every entry that sets none, while an entry's own wins", async () => {
    const schedule = defineSchedule([
      { job: rollup, cron: "0 * * * *" },
      { job: rollup, cron: "0 * * * *", key: "own", catchUpWindow: "1h" },
    ]);
    const ledger = await open(schedule, { catchUpWindow: "30m" });
    expect(ledger.entries.map((entry) => entry.catchUpWindowMs)).toEqual([30 * MINUTE, HOUR]);
    await ledger.tick({ now: at(0) });
    // The 15:00 slot is 45 minutes late: past the default window, inside the entry's own.
    const late = await ledger.tick({ now: at(5 * HOUR + 45 * MINUTE) });
    expect(late.skippedStale.map((outcome) => outcome.key)).toEqual([ledger.entries[0]!.ledgerKey]);
    expect(late.enqueued.map((outcome) => outcome.key)).toEqual([ledger.entries[1]!.ledgerKey]);
  });

  it("floors the catch-up window at two minutes so ordinary lateness never drops a slot", async () => {
    const ledger = await open(defineSchedule([{ job: rollup, cron: "* * * * *", catchUpWindow: "1s" }]));
    await ledger.tick({ now: at(0) });
    const report = await ledger.tick({ now: at(MINUTE + 90_000) });
    expect(report.skippedStale).toHaveLength(0);
    expect(report.enqueued.map((outcome) => outcome.slot.toISOString())).toEqual(["2026-03-02T10:02:00.000Z"]);
  });

  it("does not fire a long-gone slot for an entry removed and re-added 48 hours later", async () => {
    // Weekly on Mondays at 10:00; T0 is such a Monday.
    const schedule = defineSchedule([{ job: rollup, cron: "0 10 * * 1" }]);
    const ledger = await open(schedule);
    await ledger.tick({ now: at(0) });

    const without = await store.open({ jobs: JOBS, schedule: [] });
    await without.tick({ now: at(7 * 24 * HOUR + MINUTE) });

    const readded = await store.open({ jobs: JOBS, schedule });
    const report = await readded.tick({ now: at(9 * 24 * HOUR) });
    expect(report.enqueued).toHaveLength(0);
    expect(report.skippedStale.map((outcome) => outcome.slot.toISOString())).toEqual(["2026-03-09T10:00:00.000Z"]);
    expect(await jobCount(ledger)).toBe(0);
    const next = await readded.tick({ now: at(14 * 24 * HOUR + 1_000) });
    expect(next.enqueued.map((outcome) => outcome.slot.toISOString())).toEqual(["2026-03-16T10:00:00.000Z"]);
  });

  it("stops a removed entry with nothing pending, and the prune chore deletes its ledger row after the grace", async () => {
    const ledger = await open(defineSchedule([{ job: rollup, cron: "*/5 * * * *" }, { job: rollup, cron: "0 * * * *" }]));
    await ledger.tick({ now: at(0) });
    const [kept, removed] = ledger.entries.map((entry) => entry.ledgerKey);

    const reduced = await store.open({ jobs: JOBS, schedule: defineSchedule([{ job: rollup, cron: "*/5 * * * *" }]) });
    const report = await reduced.tick({ now: at(HOUR + 1_000) });
    expect(report.enqueued.map((outcome) => outcome.key)).toEqual([kept]);
    expect(await rows(ledger, sql`select 1 from cronledger.jobs where schedule_key = ${removed!}`)).toHaveLength(0);

    // Within the grace (7 days by default) the row stays: another version of the app may still run the entry.
    expect(await reduced.pruneLedger()).toBe(0);
    expect(await ledgerSlot(ledger, removed!)).toBeDefined();
    expect(await reduced.pruneLedger({ now: new Date(Date.now() + 7 * 24 * HOUR + MINUTE) })).toBe(1);
    expect(await ledgerSlot(ledger, removed!)).toBeUndefined();
    expect(await ledgerSlot(ledger, kept!)).toBeDefined();
  });

  it("never fires the old overdue slot of an entry whose timing changed", async () => {
    const before = await open(defineSchedule([{ job: rollup, cron: "0 * * * *" }]));
    await before.tick({ now: at(0) });

    const after = await store.open({ jobs: JOBS, schedule: defineSchedule([{ job: rollup, cron: "30 * * * *" }]) });
    const report = await after.tick({ now: at(HOUR + 5 * MINUTE) });
    expect(report.enqueued).toHaveLength(0);
    expect(report.created).toBe(1);
    expect(await jobCount(before)).toBe(0);
    const next = await after.tick({ now: at(HOUR + 30 * MINUTE) });
    expect(next.enqueued.map((outcome) => outcome.slot.toISOString())).toEqual(["2026-03-02T11:30:00.000Z"]);
  });

  it("treats equivalent spellings as one identity that keeps its ledger row", async () => {
    const daily = await open(defineSchedule([{ job: rollup, cron: "@daily" }]));
    await daily.tick({ now: at(0) });
    const spelled = await store.open({ jobs: JOBS, schedule: defineSchedule([{ job: rollup, cron: "0  0 * * *" }]) });
    expect(spelled.entries[0]?.ledgerKey).toBe(daily.entries[0]?.ledgerKey);
    const report = await spelled.tick({ now: new Date("2026-03-03T00:00:01.000Z") });
    expect(report.created).toBe(0);
    expect(report.enqueued).toHaveLength(1);
  });

  it("puts each entry's own payload on its job", async () => {
    const ledger = await open(
      defineSchedule([
        { job: digest, cron: "0 8 * * *", payload: { list: "daily" } },
        { job: digest, cron: "0 8 * * *", payload: { list: "vip" }, key: "vip" },
      ]),
    );
    await ledger.tick({ now: at(0) });
    await ledger.tick({ now: new Date("2026-03-03T08:00:00.000Z") });
    const payloads = (await scheduledJobs(ledger)).map((job) => job.payload);
    expect(payloads).toEqual(expect.arrayContaining([{ list: "daily" }, { list: "vip" }]));
  });

  it("fires a jittered slot at a deterministic instant no earlier than the slot", async () => {
    const schedule = defineSchedule([{ job: rollup, cron: "0 * * * *", jitter: "10m" }]);
    const ledger = await open(schedule);
    await ledger.tick({ now: at(0) });
    // Walk the hour minute by minute: the slot fires at one fixed minute inside its jitter.
    let firedAt: number | undefined;
    for (let minute = 0; minute <= 11 && firedAt === undefined; minute += 1) {
      const report = await ledger.tick({ now: at(HOUR + minute * MINUTE) });
      if (report.enqueued.length > 0) firedAt = minute;
    }
    expect(firedAt).toBeDefined();
    expect(firedAt!).toBeLessThanOrEqual(10);
    const offset = firedAt!;

    const replay = await createTestStore(backend, `tick_${backend}_replay`);
    try {
      const other = await replay.open({ jobs: JOBS, schedule });
      await other.tick({ now: at(0) });
      const early = offset === 0 ? undefined : await other.tick({ now: at(HOUR + (offset - 1) * MINUTE) });
      expect(early?.enqueued ?? []).toHaveLength(0);
      const onTime = await other.tick({ now: at(HOUR + offset * MINUTE) });
      expect(onTime.enqueued).toHaveLength(1);
    } finally {
      await replay.dispose();
    }
  });

  it("quarantines the one entry whose job insert fails while the others fire", async () => {
    const errors: { message: string; fields?: Record<string, unknown> }[] = [];
    const logger: Logger = {
      debug: () => {},
      info: () => {},
      warn: () => {},
      error: (message, fields) => errors.push({ message, ...(fields ? { fields } : {}) }),
    };
    const ledger = await open(
      defineSchedule([
        { job: digest, cron: "* * * * *", payload: { list: "a" }, key: "a" },
        // PostgreSQL rejects \u0000 inside jsonb: this entry's insert fails on the server.
        { job: digest, cron: "* * * * *", payload: { list: "bad\u0000" }, key: "bad" },
        { job: digest, cron: "* * * * *", payload: { list: "c" }, key: "c" },
      ]),
      { logger },
    );
    await ledger.tick({ now: at(0) });
    const report = await ledger.tick({ now: at(MINUTE) });
    expect(report.enqueued.map((outcome) => outcome.identity).sort()).toEqual(
      [ledger.entries[0]!.identity, ledger.entries[2]!.identity].sort(),
    );
    expect(report.quarantined).toHaveLength(1);
    expect(report.quarantined[0]).toMatchObject({ identity: ledger.entries[1]!.identity, jobName: "email.send-digest", phase: "enqueue" });
    expect(await jobCount(ledger)).toBe(2);
    expect(await ledgerSlot(ledger, ledger.entries[1]!.ledgerKey)).toBe(T0.getTime());
    expect(errors.some((error) => error.fields?.identity === ledger.entries[1]!.identity && error.fields?.phase === "enqueue")).toBe(true);
  });

  it("repairs a ledger value set to year 9999 and fires the entry at its next slot", async () => {
    const warnings: string[] = [];
    const logger: Logger = { debug: () => {}, info: () => {}, warn: (message) => warnings.push(message), error: () => {} };
    const ledger = await open(defineSchedule([{ job: rollup, cron: "*/10 * * * *" }]), { logger });
    await ledger.tick({ now: at(0) });
    const key = ledger.entries[0]!.ledgerKey;
    await rows(ledger, sql`update cronledger.schedule_state set last_enqueued_slot = '9999-01-01T00:00:00Z' where key = ${key}`);

    // A running process reads an entry's row when its next slot comes due; a fresh one reads every row at once.
    const fresh = await store.open({ jobs: JOBS, schedule: defineSchedule([{ job: rollup, cron: "*/10 * * * *" }]), logger });
    const repair = await fresh.tick({ now: at(3 * MINUTE) });
    expect(repair.repaired).toHaveLength(1);
    expect(repair.repaired[0]?.from.getUTCFullYear()).toBe(9999);
    expect(warnings.some((message) => message.includes("future"))).toBe(true);
    expect(await ledgerSlot(ledger, key)).toBe(at(3 * MINUTE).getTime());

    const next = await ledger.tick({ now: at(10 * MINUTE) });
    expect(next.enqueued.map((outcome) => outcome.slot.toISOString())).toEqual(["2026-03-02T10:10:00.000Z"]);
  });

  it("rejects bad entries with one error naming each of them and writes nothing", async () => {
    const bad = [
      { job: rollup, cron: "0 * * * *", timezone: "Mars/Olympus_Mons" },
      { job: rollup, cron: "", key: "empty" },
      { job: rollup, cron: "* * * *", key: "four" },
      { job: rollup, cron: "61 * * * *", key: "minute" },
      { job: digest, cron: "0 * * * *", payload: { list: 42 } },
    ];
    const probe = await open([]);
    let thrown: unknown;
    try {
      await store.open({ jobs: JOBS, schedule: bad as unknown as ScheduleEntry[], invalidEntries: "fail" });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ScheduleValidationError);
    const problems = (thrown as ScheduleValidationError).problems;
    expect(problems.map((problem) => [problem.index, problem.code])).toEqual([
      [0, "invalid_timezone"],
      [1, "invalid_cron"],
      [2, "invalid_cron"],
      [3, "invalid_cron"],
      [4, "invalid_payload"],
    ]);
    expect((thrown as Error).message).toContain("Mars/Olympus_Mons");
    expect((thrown as Error).message).toContain("schedule[4] (email.send-digest)");
    expect(await rows(probe, sql`select 1 from cronledger.schedule_state`)).toHaveLength(0);
    expect(await jobCount(probe)).toBe(0);
  });

  it("by default runs the valid entries and leaves each invalid one out, listed with its problems", async () => {
    const schedule = [
      { job: rollup, cron: "*/15 * * * *" },
      { job: rollup, cron: "61 * * * *", key: "minute" },
      { job: "email.sned", cron: "0 * * * *" },
      { job: digest, cron: "0 * * * *", payload: { list: 42 } },
      { job: rollup, cron: "*/15 * * * *" },
    ];
    const logged: string[] = [];
    const logger: Logger = { debug: () => {}, info: () => {}, warn: () => {}, error: (message, fields) => logged.push(`${message} ${JSON.stringify(fields)}`) };
    const ledger = await open(schedule as unknown as ScheduleEntry[], { logger });
    expect(ledger.entries.map((entry) => entry.index)).toEqual([0]);
    expect(ledger.scheduler.invalid.map((entry) => [entry.index, entry.problems.map((problem) => problem.code)])).toEqual([
      [1, ["invalid_cron"]],
      [2, ["unregistered_job"]],
      [3, ["invalid_payload"]],
      [4, ["duplicate_entry"]],
    ]);
    expect(logged.filter((line) => line.startsWith("schedule entry is invalid"))).toHaveLength(4);

    await ledger.tick({ now: at(5 * MINUTE) });
    const report = await ledger.tick({ now: at(15 * MINUTE) });
    expect(report.enqueued.map((outcome) => outcome.jobName)).toEqual(["reports.rollup"]);
    expect(await jobCount(ledger)).toBe(1);

    const status = await ledger.status();
    expect(status.invalid.map((entry) => entry.invalidIndex)).toEqual([1, 2, 3, 4]);
    expect(status.broken.filter((entry) => entry.invalidIndex !== null)).toHaveLength(4);
    expect(status.invalid[1]?.problems[0]).toMatchObject({ code: "unregistered_job", severity: "error" });
    expect(status.invalid[1]?.problems[0]?.message).toContain("email.sned");
  });

  it("rejects two entries of one job and schedule without distinct keys", async () => {
    await open([]);
    await expect(
      store.open({
        jobs: JOBS,
        invalidEntries: "fail",
        schedule: defineSchedule([
          { job: digest, cron: "@daily", payload: { list: "a" } },
          { job: digest, cron: "0 0 * * *", payload: { list: "b" } },
        ]),
      }),
    ).rejects.toMatchObject({ problems: [expect.objectContaining({ code: "duplicate_entry", index: 1 })] });
  });
});

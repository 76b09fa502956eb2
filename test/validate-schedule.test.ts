import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ScheduleValidationError, type ScheduleProblem } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import { loadSchedule, resolveSchedule, validateSchedule } from "../src/schedule/validate.js";

const rollup = defineJob({ name: "reports.rollup", run: () => {} });
const digest = defineJob({ name: "email.send-digest", payload: z.object({ list: z.string() }), run: () => {} });
const JOBS = [rollup, digest];
const NOW = new Date("2026-03-02T10:00:00.000Z");

const check = (entries: readonly unknown[]) => validateSchedule(entries, JOBS, { now: NOW });
const only = (entries: readonly unknown[]): ScheduleProblem => {
  const problems = check(entries);
  expect(problems).toHaveLength(1);
  return problems[0] as ScheduleProblem;
};

describe("validateSchedule", () => {
  it("accepts a good schedule with no problems", () => {
    expect(
      check([
        { job: rollup, cron: "*/15 * * * *", jitter: "30s" },
        { job: digest, cron: "0 8 * * 1-5", timezone: "Europe/Berlin", payload: { list: "daily" } },
        { job: "reports.rollup", cron: "@daily", key: "nightly", queue: "reports", priority: 5, catchUpWindow: "1h" },
        { job: rollup, cron: "*/10 * * * * *", key: "fast" },
      ]),
    ).toEqual([]);
  });

  it("invalid_entry: shapes and types, with a hint for a misspelt field", () => {
    const problems = check([null, "0 * * * *", { cron: "* * * * *" }, { job: rollup, cron: 5 }, { job: rollup, cron: "* * * * *", key: "a|b" }]);
    expect(problems.map((problem) => [problem.index, problem.code])).toEqual([0, 1, 2, 3, 4].map((index) => [index, "invalid_entry"]));
    expect(problems[0]?.message).toBe("schedule[0]: each entry must be an object like { job, cron }.");
    expect(problems[2]?.message).toContain("job: job must be a defineJob() result or the name of a registered job");
    expect(problems[3]?.message).toBe('schedule[3] (reports.rollup): cron: cron must be a string such as "*/15 * * * *".');
    expect(problems[4]?.message).toContain("key must not contain '|'");

    const misspelt = only([{ job: rollup, cron: "0 0 * * *", timeZone: "Europe/Berlin" }]);
    expect(misspelt).toMatchObject({ code: "invalid_entry", severity: "error", index: 0, jobName: "reports.rollup" });
    expect(misspelt.message).toContain('unknown field "timeZone" (did you mean "timezone"?)');
  });

  it("invalid_cron: empty, wrong field count, out of range, unknown alias", () => {
    const problems = check([
      { job: rollup, cron: "" },
      { job: rollup, cron: "* * * *", key: "4" },
      { job: rollup, cron: "0 0 0 * * * *", key: "7" },
      { job: rollup, cron: "61 * * * *", key: "61" },
      { job: rollup, cron: "@fortnightly", key: "alias" },
    ]);
    expect(problems.map((problem) => problem.code)).toEqual(Array(5).fill("invalid_cron"));
    expect(problems[0]?.message).toContain("it is empty; write 5 fields");
    expect(problems[1]?.message).toContain("it has 4 fields");
    expect(problems[2]?.message).toContain("it has 7 fields");
    expect(problems[3]?.message).toContain('the minute field "61" has 61, outside 0-59');
    expect(problems[4]?.message).toContain('unknown alias "@fortnightly"');
  });

  it("invalid_timezone: unknown and empty names", () => {
    const problems = check([
      { job: rollup, cron: "0 3 * * *", timezone: "Mars/Olympus_Mons" },
      { job: rollup, cron: "0 4 * * *", timezone: "" },
    ]);
    expect(problems.map((problem) => [problem.index, problem.code])).toEqual([
      [0, "invalid_timezone"],
      [1, "invalid_timezone"],
    ]);
    expect(problems[0]?.message).toContain('use an IANA name such as "UTC", "Europe/Berlin"');
  });

  it("unregistered_job: by name, or a definition missing from jobs", () => {
    const stray = defineJob({ name: "billing.charge", run: () => {} });
    const problems = check([
      { job: "billing.refund", cron: "0 * * * *" },
      { job: stray, cron: "0 * * * *" },
    ]);
    expect(problems.map((problem) => [problem.index, problem.code, problem.jobName])).toEqual([
      [0, "unregistered_job", "billing.refund"],
      [1, "unregistered_job", "billing.charge"],
    ]);
    expect(problems[0]?.message).toContain("add its defineJob() result to `jobs`");
    // The cron and timezone are fine, so the problem names the identity the entry would have.
    expect(problems[0]?.identity).toBe("billing.refund||0 * * * *|UTC");
  });

  it("invalid_payload: fails the job's zod schema, naming the field", () => {
    const problem = only([{ job: digest, cron: "0 8 * * *", payload: { list: 42 } }]);
    expect(problem).toMatchObject({ code: "invalid_payload", index: 0, jobName: "email.send-digest", identity: "email.send-digest||0 8 * * *|UTC" });
    expect(problem.message).toContain("list: Invalid input: expected string, received number");
    expect(only([{ job: digest, cron: "0 8 * * *" }]).code).toBe("invalid_payload");
  });

  it("invalid_payload: a payload that only validates before it is stored as JSON", () => {
    const dated = defineJob({ name: "reports.dated", payload: z.object({ since: z.date() }), run: () => {} });
    const problems = validateSchedule([{ job: dated, cron: "0 0 * * *", payload: { since: new Date(0) } }], [dated], { now: NOW });
    expect(problems).toMatchObject([{ code: "invalid_payload", index: 0 }]);
    expect(problems[0]?.message).toContain("after the JSON round trip");
  });

  it("duplicate_entry: the same identity after canonicalisation, naming both entries", () => {
    const problem = only([
      { job: rollup, cron: "@daily" },
      { job: rollup, cron: "0 0 * * *", payload: { other: true } },
    ]);
    expect(problem).toMatchObject({ code: "duplicate_entry", index: 1, identity: "reports.rollup||0 0 * * *|UTC" });
    expect(problem.message).toMatch(/^schedule\[1\] \(reports\.rollup\): same job and timing as schedule\[0\]/);
    expect(problem.message).toContain("distinct `key`");

    expect(
      check([
        { job: rollup, cron: "0 0 * * *" },
        { job: rollup, cron: "0 0 * * *", key: "second" },
        { job: rollup, cron: "0 0 * * *", timezone: "Europe/Berlin" },
      ]),
    ).toEqual([]);
  });

  it("duplicate_entry: two spellings of one zone are one timing; a timezone's letter case does not change the identity", () => {
    const caseOnly = only([
      { job: rollup, cron: "0 8 * * *", timezone: "Europe/Berlin" },
      { job: rollup, cron: "0 8 * * *", timezone: "europe/berlin" },
    ]);
    expect(caseOnly).toMatchObject({ code: "duplicate_entry", index: 1, identity: "reports.rollup||0 8 * * *|Europe/Berlin" });

    const alias = only([
      { job: rollup, cron: "0 8 * * *", timezone: "America/New_York" },
      { job: rollup, cron: "0 8 * * *", timezone: "US/Eastern" },
    ]);
    expect(alias).toMatchObject({ code: "duplicate_entry", index: 1, identity: "reports.rollup||0 8 * * *|US/Eastern" });
    expect(alias.message).toContain('("America/New_York" and "US/Eastern" are the same zone)');

    const utc = only([{ job: rollup, cron: "0 8 * * *" }, { job: rollup, cron: "0 8 * * *", timezone: "utc" }]);
    expect(utc).toMatchObject({ code: "duplicate_entry", identity: "reports.rollup||0 8 * * *|UTC" });

    const { entries } = resolveSchedule([{ job: rollup, cron: "0 8 * * *", timezone: "ASIA/TOKYO" }], JOBS, { now: NOW });
    expect(entries.map((entry) => [entry.timezone, entry.identity])).toEqual([["Asia/Tokyo", "reports.rollup||0 8 * * *|Asia/Tokyo"]]);
  });

  it("invalid_jitter: unparseable, or not shorter than the gap between slots", () => {
    const problems = check([
      { job: rollup, cron: "0 * * * *", jitter: "soon" },
      { job: rollup, cron: "* * * * *", jitter: "1m", key: "minutely" },
      { job: rollup, cron: "*/10 * * * * *", jitter: 15_000, key: "fast" },
    ]);
    expect(problems.map((problem) => [problem.index, problem.code])).toEqual([
      [0, "invalid_jitter"],
      [1, "invalid_jitter"],
      [2, "invalid_jitter"],
    ]);
    expect(problems[0]?.message).toContain('Invalid jitter "soon"');
    expect(problems[1]?.message).toContain("jitter 1m must be shorter than the shortest gap between this entry's slots (1m)");
    expect(problems[2]?.message).toContain("jitter 15s must be shorter than the shortest gap between this entry's slots (10s)");
    expect(problems[1]?.identity).toBe("reports.rollup|minutely|* * * * *|UTC");
  });

  it("never_matches: a warning for crons with no slot in the next five years", () => {
    const problems = check([
      { job: rollup, cron: "0 0 30 2 *" },
      { job: rollup, cron: "0 0 * 2 1#5", key: "fifth-monday-of-february" },
      { job: rollup, cron: "0 0 29 2 *", key: "leap-day" },
    ]);
    expect(problems.map((problem) => [problem.index, problem.code, problem.severity])).toEqual([
      [0, "never_matches", "warning"],
      [1, "never_matches", "warning"],
    ]);
    expect(problems[1]?.message).toContain("(the first is 2044-02-29T00:00:00.000Z)");
    expect(loadSchedule([{ job: rollup, cron: "0 0 30 2 *" }], JOBS).warnings).toHaveLength(1);
  });

  it("reports every problem of every entry at once, in schedule order, never throwing", () => {
    const problems = check([
      { job: rollup, cron: "*/5 * * * *" },
      { job: rollup, cron: "99 * * * *", timezone: "Nowhere/Town" },
      42,
      { job: "ghost.job", cron: "0 * * * *" },
      { job: digest, cron: "0 8 * * *", payload: {} },
    ]);
    expect(problems.map((problem) => [problem.index, problem.code])).toEqual([
      [1, "invalid_cron"],
      [1, "invalid_timezone"],
      [2, "invalid_entry"],
      [3, "unregistered_job"],
      [4, "invalid_payload"],
    ]);
  });
});

describe("loadSchedule", () => {
  it("throws one ScheduleValidationError carrying every problem", () => {
    let thrown: unknown;
    try {
      loadSchedule(
        [
          { job: rollup, cron: "" },
          { job: "ghost.job", cron: "0 * * * *" },
          { job: rollup, cron: "0 0 30 2 *", key: "never" },
        ],
        JOBS,
      );
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ScheduleValidationError);
    const error = thrown as ScheduleValidationError;
    expect(error.code).toBe("schedule_invalid");
    expect(error.problems.map((problem) => problem.code)).toEqual(["invalid_cron", "unregistered_job", "never_matches"]);
    expect(error.message).toContain("The schedule has 2 errors");
    expect(error.message).toContain("[invalid_cron] schedule[0]");
    expect(error.message).toContain("[unregistered_job] schedule[1]");
  });
});

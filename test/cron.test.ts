import { describe, expect, it } from "vitest";
import { InvalidCronError, InvalidTimezoneError } from "../src/errors.js";
import { parseCron } from "../src/schedule/cron.js";
import { assertTimezone } from "../src/schedule/timezone.js";
import { slotCalendar } from "../src/schedule/slot-calendar.js";

describe("parseCron canonical form", () => {
  it.each([
    ["@daily", "0 0 * * *"],
    ["@DAILY", "0 0 * * *"],
    ["  0   0  *  *   * ", "0 0 * * *"],
    ["@hourly", "0 * * * *"],
    ["@weekly", "0 0 * * 0"],
    ["@monthly", "0 0 1 * *"],
    ["@yearly", "0 0 1 1 *"],
    ["@annually", "0 0 1 1 *"],
    ["0 0 * * 7", "0 0 * * 0"],
    ["0 0 * * sun", "0 0 * * 0"],
    ["0 9 * JAN-mar Mon-FRI", "0 9 * 1-3 1-5"],
    ["0 9 * jan,mar *", "0 9 * 1,3 *"],
    ["0 9 * jan,jul *", "0 9 * */6 *"],
    ["*/1 * * * *", "* * * * *"],
    ["0-59 * * * *", "* * * * *"],
    ["0 0-23 * * *", "0 * * * *"],
    ["0 0 1-31 * *", "0 0 * * *"],
    ["0 0 * 1-12 *", "0 0 * * *"],
    ["0 0 * * 0-6", "0 0 * * *"],
    ["0 0 * * 0-7", "0 0 * * *"],
    ["0 0 ? * *", "0 0 * * *"],
    ["0 * * * * *", "* * * * *"],
    ["0 0 0 * * *", "0 0 * * *"],
    ["*/30 * * * * *", "*/30 * * * * *"],
    ["0,30 * * * * *", "*/30 * * * * *"],
    ["0,15,30,45 * * * *", "*/15 * * * *"],
    ["0 0,6,12,18 * * *", "0 */6 * * *"],
    ["5-55/10 * * * *", "5,15,25,35,45,55 * * * *"],
    ["1,2,3,5 * * * *", "1-3,5 * * * *"],
    ["0 0 L * 5L", "0 0 L * 5L"],
    ["0 0 * * 7#2", "0 0 * * 0#2"],
  ])("%j canonicalises to %j", (source, canonical) => {
    const parsed = parseCron(source);
    expect(parsed.source).toBe(source);
    expect(parsed.canonical).toBe(canonical);
    expect(parseCron(parsed.canonical).canonical).toBe(canonical);
  });

  it("makes equivalent spellings one canonical string", () => {
    const groups = [
      ["@daily", "0 0 * * *", "0 0 0 * * *", "0 0 */1 * *", "0 0 * */1 ?"],
      ["0 12 * * 1-5", "0 12 * * mon-fri", "0 12 * * MON,TUE,WED,THU,FRI", "0 12 ? * 1,2,3,4,5"],
      ["0 0 * * 0", "0 0 * * 7", "0 0 * * SUN", "@weekly", "0 0 * * 0,7", "0 0 * * sun,7"],
      // A list that names a value twice is the union of its parts, as in classic cron.
      ["0 0 * * 1-5", "0 0 * * 1-5,3", "0 0 * * mon-fri,wed"],
      ["1 * * * *", "1,1 * * * *"],
    ];
    for (const group of groups) {
      expect(new Set(group.map((source) => parseCron(source).canonical)).size).toBe(1);
    }
  });

  it("keeps cron's OR rule: a restricted field covering every day makes every day match", () => {
    // `1-31` is written, so cron-parser ORs it with Monday instead of ignoring it.
    expect(parseCron("0 0 1-31 * 1").canonical).toBe("0 0 * * *");
    expect(parseCron("0 0 1 * 0-6").canonical).toBe("0 0 * * *");
    expect(parseCron("0 0 * * 1").canonical).toBe("0 0 * * 1");
    expect(parseCron("0 0 1,15 * 1").canonical).toBe("0 0 1,15 * 1");
    const everyDay = slotCalendar("0 0 1-31 * 1");
    expect(everyDay.nextMs(Date.parse("2026-03-03T12:00:00Z"))).toBe(Date.parse("2026-03-04T00:00:00Z"));
  });

  it("limits day-of-month to the days the month has", () => {
    expect(parseCron("0 0 */2 2 *").canonical).toBe(parseCron("0 0 1-29/2 2 *").canonical);
    expect(parseCron("0 0 30,31 4 *").canonical).toBe("0 0 30 4 *");
    expect(parseCron("0 0 1-30 4 *").canonical).toBe("0 0 * 4 *");
  });
});

describe("parseCron flags", () => {
  it.each([
    ["* * * * *", true],
    ["0 * * * *", true],
    ["0 */6 * * *", true],
    ["0 0-23/6 * * *", true],
    ["0 0/6 * * *", true],
    ["0 0-23 * * *", true],
    ["0 0-22/2 * * *", true],
    ["0 ?/12 * * *", true],
    ["0 */13 * * *", true],
    ["0 */23 * * *", true],
    // A list is never a wildcard hour, whatever its set (docs/decisions.md, "DST and written hours").
    ["0 0,6,12,18 * * *", false],
    ["0 0,12 * * *", false],
    ["0 0,23 * * *", false],
    ["0 0-11,12-23 * * *", false],
    ["0 */12,0 * * *", false],
    ["0 */24 * * *", false],
    ["0 0-11/12 * * *", false],
    ["0 0-12 * * *", false],
    ["*/30 * * * * *", true],
    ["30 2 * * *", false],
    ["0 0 * * *", false],
    ["*/30 1 * * *", false],
    ["0 1-23 * * *", false],
    ["0 0,5 * * *", false],
    ["0 6,12,18 * * *", false],
  ])("%j wildcardHour=%j", (source, wildcardHour) => {
    expect(parseCron(source).wildcardHour).toBe(wildcardHour);
  });

  it("marks second resolution only when the second field is not {0}", () => {
    expect(parseCron("*/30 * * * * *").hasSeconds).toBe(true);
    expect(parseCron("15 0 * * * *").hasSeconds).toBe(true);
    expect(parseCron("0 0 * * * *").hasSeconds).toBe(false);
    expect(parseCron("* * * * *").hasSeconds).toBe(false);
    expect(parseCron("@hourly").hasSeconds).toBe(false);
  });

  it("flags a day of month no chosen month has as never matching", () => {
    for (const source of ["0 0 30 2 *", "0 0 31 2,4 *", "0 0 31 apr *"]) {
      const parsed = parseCron(source);
      expect(parsed.neverMatches).toBe(true);
      const calendar = slotCalendar(parsed);
      expect(calendar.nextMs(0)).toBeNull();
      expect(calendar.latestMs(Date.parse("2030-01-01T00:00:00Z"))).toBeNull();
      expect(calendar.shortestGapMs()).toBe(Infinity);
    }
    expect(parseCron("0 0 30 2 *").canonical).toBe("0 0 30 2 *");
    expect(parseCron("0 0 29 2 *").neverMatches).toBe(false);
    expect(parseCron("0 0 * * *").neverMatches).toBe(false);
  });
});

describe("parseCron rejects", () => {
  it.each([
    ["", /empty/],
    ["   ", /empty/],
    ["* * * *", /4 fields/],
    ["* * * * * * *", /7 fields/],
    ["61 * * * *", /minute field "61"/],
    ["0 24 * * *", /hour field "24"/],
    ["0 0 32 * *", /day-of-month field "32"/],
    ["0 0 * 13 *", /month field "13"/],
    ["0 0 * * 8", /day-of-week field "8"/],
    ["60 * * * * *", /second field "60"/],
    ["H * * * *", /minute field "H" uses H/],
    ["0 H(0-6) * * *", /hour field .* uses H/],
    ["0 0 * * H", /day-of-week field "H" uses H/],
    ["*/0 * * * *", /minute field/],
    ["0 0 * * 1#6", /day-of-week field/],
    ["a b c d e", /minute field "a"/],
    ["0 0 * foo *", /month field "foo"/],
    ["@reboot", /unknown alias/],
    ["@minutely", /unknown alias/],
    ["@daily 5", /unknown alias/],
  ])("%j", (source, message) => {
    let caught: unknown;
    try {
      parseCron(source);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(InvalidCronError);
    expect((caught as InvalidCronError).code).toBe("invalid_cron");
    expect((caught as InvalidCronError).expression).toBe(source);
    expect((caught as InvalidCronError).message).toMatch(message);
  });

  it("explains how to write a valid expression", () => {
    expect(() => parseCron("* * * *")).toThrow(/5 fields \(minute hour day-of-month month day-of-week\)/);
    expect(() => parseCron("61 * * * *")).toThrow(/minute field "61" has 61, outside 0-59/);
  });

  it("accepts names with letters H in them", () => {
    expect(parseCron("0 0 * * thu").canonical).toBe("0 0 * * 4");
    expect(parseCron("0 0 * * THU").canonical).toBe("0 0 * * 4");
  });
});

describe("assertTimezone", () => {
  it("accepts IANA names", () => {
    for (const zone of ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]) {
      expect(() => assertTimezone(zone)).not.toThrow();
    }
  });

  it("throws InvalidTimezoneError for unknown names", () => {
    for (const zone of ["Mars/Olympus_Mons", "Europe/Berlinn", "", "   "]) {
      expect(() => assertTimezone(zone)).toThrow(InvalidTimezoneError);
    }
  });
});

import { CronExpressionParser } from "cron-parser";
import { describe, expect, it } from "vitest";
import { InvalidCronError, InvalidTimezoneError } from "../src/errors.js";
import { parseCron } from "../src/schedule/cron.js";
import { slotCalendar } from "../src/schedule/slot-calendar.js";
import type { SlotCalendar } from "../src/schedule/slot-calendar.js";

interface CronCase {
  cron: string;
  count: number;
  /** Consecutive slots (ISO UTC) at and around the transition, written by hand from the README's DST rules. */
  around: string[];
}

interface TransitionDay {
  zone: string;
  name: string;
  /** The local day's first and last-plus-one instant. */
  dayStart: string;
  dayEnd: string;
  cases: CronCase[];
}

const z = (time: string) => `${time}.000Z`;

const DAYS: TransitionDay[] = [
  {
    zone: "America/New_York",
    name: "2026-03-08 spring forward 02:00 EST -> 03:00 EDT (07:00Z)",
    dayStart: "2026-03-08T05:00:00Z",
    dayEnd: "2026-03-09T04:00:00Z",
    cases: [
      { cron: "30 2 * * *", count: 1, around: [z("2026-03-08T07:30:00")] },
      { cron: "30 2,3 * * *", count: 1, around: [z("2026-03-08T07:30:00")] },
      { cron: "30 1 * * *", count: 1, around: [z("2026-03-08T06:30:00")] },
      {
        cron: "0 * * * *",
        count: 23,
        around: [z("2026-03-08T05:00:00"), z("2026-03-08T06:00:00"), z("2026-03-08T07:00:00"), z("2026-03-08T08:00:00")],
      },
      { cron: "*/30 1 * * *", count: 2, around: [z("2026-03-08T06:00:00"), z("2026-03-08T06:30:00")] },
      {
        cron: "*/15 * * * *",
        count: 92,
        around: [z("2026-03-08T06:30:00"), z("2026-03-08T06:45:00"), z("2026-03-08T07:00:00"), z("2026-03-08T07:15:00")],
      },
      {
        cron: "*/30 * * * * *",
        count: 2760,
        around: [z("2026-03-08T06:59:00"), z("2026-03-08T06:59:30"), z("2026-03-08T07:00:00"), z("2026-03-08T07:00:30")],
      },
    ],
  },
  {
    zone: "America/New_York",
    name: "2026-11-01 fall back 02:00 EDT -> 01:00 EST (06:00Z)",
    dayStart: "2026-11-01T04:00:00Z",
    dayEnd: "2026-11-02T05:00:00Z",
    cases: [
      { cron: "30 2 * * *", count: 1, around: [z("2026-11-01T07:30:00")] },
      { cron: "30 1 * * *", count: 1, around: [z("2026-11-01T05:30:00")] },
      {
        cron: "0 * * * *",
        count: 25,
        around: [z("2026-11-01T04:00:00"), z("2026-11-01T05:00:00"), z("2026-11-01T06:00:00"), z("2026-11-01T07:00:00")],
      },
      { cron: "*/30 1 * * *", count: 2, around: [z("2026-11-01T05:00:00"), z("2026-11-01T05:30:00")] },
      {
        cron: "*/15 * * * *",
        count: 100,
        around: [
          z("2026-11-01T05:30:00"),
          z("2026-11-01T05:45:00"),
          z("2026-11-01T06:00:00"),
          z("2026-11-01T06:15:00"),
          z("2026-11-01T06:30:00"),
          z("2026-11-01T06:45:00"),
          z("2026-11-01T07:00:00"),
        ],
      },
      {
        cron: "*/30 * * * * *",
        count: 3000,
        around: [z("2026-11-01T05:59:30"), z("2026-11-01T06:00:00"), z("2026-11-01T06:00:30")],
      },
    ],
  },
  {
    zone: "Europe/Berlin",
    name: "2026-03-29 spring forward 02:00 CET -> 03:00 CEST (01:00Z)",
    dayStart: "2026-03-28T23:00:00Z",
    dayEnd: "2026-03-29T22:00:00Z",
    cases: [
      { cron: "30 2 * * *", count: 1, around: [z("2026-03-29T01:30:00")] },
      { cron: "30 1 * * *", count: 1, around: [z("2026-03-29T00:30:00")] },
      {
        cron: "0 * * * *",
        count: 23,
        around: [z("2026-03-28T23:00:00"), z("2026-03-29T00:00:00"), z("2026-03-29T01:00:00"), z("2026-03-29T02:00:00")],
      },
      { cron: "*/30 1 * * *", count: 2, around: [z("2026-03-29T00:00:00"), z("2026-03-29T00:30:00")] },
      {
        cron: "*/15 * * * *",
        count: 92,
        around: [z("2026-03-29T00:30:00"), z("2026-03-29T00:45:00"), z("2026-03-29T01:00:00"), z("2026-03-29T01:15:00")],
      },
      {
        cron: "*/30 * * * * *",
        count: 2760,
        around: [z("2026-03-29T00:59:30"), z("2026-03-29T01:00:00"), z("2026-03-29T01:00:30")],
      },
    ],
  },
  {
    zone: "Europe/Berlin",
    name: "2026-10-25 fall back 03:00 CEST -> 02:00 CET (01:00Z)",
    dayStart: "2026-10-24T22:00:00Z",
    dayEnd: "2026-10-25T23:00:00Z",
    cases: [
      { cron: "30 2 * * *", count: 1, around: [z("2026-10-25T00:30:00")] },
      { cron: "30 1 * * *", count: 1, around: [z("2026-10-24T23:30:00")] },
      {
        cron: "0 * * * *",
        count: 25,
        around: [z("2026-10-24T23:00:00"), z("2026-10-25T00:00:00"), z("2026-10-25T01:00:00"), z("2026-10-25T02:00:00")],
      },
      { cron: "*/30 1 * * *", count: 2, around: [z("2026-10-24T23:00:00"), z("2026-10-24T23:30:00")] },
      {
        cron: "*/15 * * * *",
        count: 100,
        around: [z("2026-10-25T00:45:00"), z("2026-10-25T01:00:00"), z("2026-10-25T01:15:00")],
      },
      {
        cron: "*/30 * * * * *",
        count: 3000,
        around: [z("2026-10-25T00:59:30"), z("2026-10-25T01:00:00"), z("2026-10-25T01:00:30")],
      },
    ],
  },
  {
    zone: "Australia/Lord_Howe",
    name: "2026-04-05 fall back 02:00 +11 -> 01:30 +10:30 (15:00Z)",
    dayStart: "2026-04-04T13:00:00Z",
    dayEnd: "2026-04-05T13:30:00Z",
    cases: [
      { cron: "30 2 * * *", count: 1, around: [z("2026-04-04T16:00:00")] },
      { cron: "30 1 * * *", count: 1, around: [z("2026-04-04T14:30:00")] },
      {
        cron: "0 * * * *",
        count: 24,
        around: [z("2026-04-04T13:00:00"), z("2026-04-04T14:00:00"), z("2026-04-04T15:30:00"), z("2026-04-04T16:30:00")],
      },
      { cron: "*/30 1 * * *", count: 2, around: [z("2026-04-04T14:00:00"), z("2026-04-04T14:30:00")] },
      {
        cron: "*/15 * * * *",
        count: 98,
        around: [
          z("2026-04-04T14:30:00"),
          z("2026-04-04T14:45:00"),
          z("2026-04-04T15:00:00"),
          z("2026-04-04T15:15:00"),
          z("2026-04-04T15:30:00"),
        ],
      },
      {
        cron: "*/30 * * * * *",
        count: 2940,
        around: [z("2026-04-04T14:59:30"), z("2026-04-04T15:00:00"), z("2026-04-04T15:00:30")],
      },
    ],
  },
  {
    zone: "Australia/Lord_Howe",
    name: "2026-10-04 spring forward 02:00 +10:30 -> 02:30 +11 (15:30Z)",
    dayStart: "2026-10-03T13:30:00Z",
    dayEnd: "2026-10-04T13:00:00Z",
    cases: [
      { cron: "30 2 * * *", count: 1, around: [z("2026-10-03T15:30:00")] },
      { cron: "15 2 * * *", count: 1, around: [z("2026-10-03T15:45:00")] },
      { cron: "30 1 * * *", count: 1, around: [z("2026-10-03T15:00:00")] },
      {
        cron: "0 * * * *",
        count: 23,
        around: [z("2026-10-03T13:30:00"), z("2026-10-03T14:30:00"), z("2026-10-03T16:00:00"), z("2026-10-03T17:00:00")],
      },
      { cron: "*/30 1 * * *", count: 2, around: [z("2026-10-03T14:30:00"), z("2026-10-03T15:00:00")] },
      {
        cron: "*/15 * * * *",
        count: 94,
        around: [z("2026-10-03T15:00:00"), z("2026-10-03T15:15:00"), z("2026-10-03T15:30:00"), z("2026-10-03T15:45:00")],
      },
      {
        cron: "*/30 * * * * *",
        count: 2820,
        around: [z("2026-10-03T15:29:00"), z("2026-10-03T15:29:30"), z("2026-10-03T15:30:00"), z("2026-10-03T15:30:30")],
      },
    ],
  },
  // America/Santiago moves its clocks at midnight, so the hours a list names meet the gap and the fold.
  // A list of hours is fixed hours, whatever its set; a written sweep (*/n) is a wildcard (docs/decisions.md).
  {
    zone: "America/Santiago",
    name: "2026-04-04 fall back 24:00 -03 -> 23:00 -04 (03:00Z on the 5th): 23:xx happens twice",
    dayStart: "2026-04-04T03:00:00Z",
    dayEnd: "2026-04-05T04:00:00Z",
    cases: [
      { cron: "0 23 * * *", count: 1, around: [z("2026-04-05T02:00:00")] }, // the first 23:00 (-03) only
      { cron: "0 0,23 * * *", count: 2, around: [z("2026-04-04T03:00:00"), z("2026-04-05T02:00:00")] }, // as 0 0 and 0 23 apart
      { cron: "0 */23 * * *", count: 3, around: [z("2026-04-04T03:00:00"), z("2026-04-05T02:00:00"), z("2026-04-05T03:00:00")] }, // 23:00 -03 and -04
      { cron: "0 0-23/23 * * *", count: 3, around: [z("2026-04-04T03:00:00"), z("2026-04-05T02:00:00"), z("2026-04-05T03:00:00")] },
      { cron: "30 23 * * *", count: 1, around: [z("2026-04-05T02:30:00")] },
      { cron: "0 * * * *", count: 25, around: [z("2026-04-05T01:00:00"), z("2026-04-05T02:00:00"), z("2026-04-05T03:00:00")] },
    ],
  },
  {
    zone: "America/Santiago",
    name: "2026-09-06 spring forward 00:00 -04 -> 01:00 -03 (04:00Z): midnight does not exist",
    dayStart: "2026-09-06T04:00:00Z",
    dayEnd: "2026-09-07T03:00:00Z",
    cases: [
      { cron: "0 0 * * *", count: 1, around: [z("2026-09-06T04:00:00")] }, // 00:00 shifted by the gap: 01:00 -03
      { cron: "0 0,12 * * *", count: 2, around: [z("2026-09-06T04:00:00"), z("2026-09-06T15:00:00")] }, // as 0 0 and 0 12 apart
      { cron: "0 0,6,12,18 * * *", count: 4, around: [z("2026-09-06T04:00:00"), z("2026-09-06T09:00:00"), z("2026-09-06T15:00:00"), z("2026-09-06T21:00:00")] },
      { cron: "0 */12 * * *", count: 1, around: [z("2026-09-06T15:00:00")] }, // a wildcard skips the gap
      { cron: "0 */6 * * *", count: 3, around: [z("2026-09-06T09:00:00"), z("2026-09-06T15:00:00"), z("2026-09-06T21:00:00")] },
      { cron: "30 0 * * 0", count: 1, around: [z("2026-09-06T04:30:00")] }, // Sunday 00:30 -> 01:30 -03
      { cron: "0 * * * *", count: 23, around: [z("2026-09-06T04:00:00"), z("2026-09-06T05:00:00")] },
    ],
  },
];

function slotsBetween(calendar: SlotCalendar, from: number, until: number): number[] {
  const slots: number[] = [];
  for (let slot = calendar.nextMs(from - 1); slot !== null && slot < until; slot = calendar.nextMs(slot)) {
    slots.push(slot);
  }
  return slots;
}

function expectConsecutive(slots: readonly number[], around: readonly string[]): void {
  const iso = slots.map((slot) => new Date(slot).toISOString());
  const first = iso.indexOf(around[0] ?? "");
  expect(first, `${around[0]} is a slot`).toBeGreaterThanOrEqual(0);
  expect(iso.slice(first, first + around.length)).toEqual(around);
}

const dayRange = (day: TransitionDay) => [Date.parse(day.dayStart), Date.parse(day.dayEnd)] as const;

describe.each(DAYS)("$zone $name", (day) => {
  it.each(day.cases)("$cron fires $count times, exactly at the expected instants", ({ cron, count, around }) => {
    const [from, until] = dayRange(day);
    const slots = slotsBetween(slotCalendar(cron, { timezone: day.zone }), from, until);
    expect(slots).toHaveLength(count);
    expectConsecutive(slots, around);
    if (count === around.length) expect(slots.map((slot) => new Date(slot).toISOString())).toEqual(around);
  });

  it.each(day.cases)("$cron: next() and latest() agree on every slot", ({ cron }) => {
    const calendar = slotCalendar(cron, { timezone: day.zone });
    const [from, until] = dayRange(day);
    let previous = calendar.latestMs(from - 1);
    for (const slot of slotsBetween(calendar, from, until)) {
      if (calendar.latestMs(slot) !== slot || calendar.nextMs(slot - 1) !== slot || calendar.latestMs(slot - 1) !== previous) {
        expect.fail(`${cron} disagrees at ${new Date(slot).toISOString()}`);
      }
      previous = slot;
    }
    // Walking backwards with latest() yields the same slots as walking forwards with next().
    const backwards: number[] = [];
    for (let slot = calendar.latestMs(until - 1); slot !== null && slot >= from; slot = calendar.latestMs(slot - 1)) {
      backwards.push(slot);
    }
    expect(backwards.reverse()).toEqual(slotsBetween(calendar, from, until));
  });

  it.each(day.cases)("$cron matches a brute-force scan of Intl wall times", ({ cron }) => {
    const [from, until] = dayRange(day);
    const calendar = slotCalendar(cron, { timezone: day.zone });
    expect(slotsBetween(calendar, from, until)).toEqual(bruteForceSlots(cron, day.zone, from, until));
  });
});

/**
 * An independent reading of the README's DST rules: scan instants, read the wall clock via
 * Intl, fire a fixed-hour entry only on the first occurrence of a wall time,
 * and fire it for wall times the clock jumps over at the pre-jump offset.
 */
function bruteForceSlots(cron: string, zone: string, from: number, until: number): number[] {
  const parsed = parseCron(cron);
  const step = parsed.hasSeconds ? 30_000 : 60_000;
  const fields = parsed.canonical.split(" ");
  const expression = CronExpressionParser.parse((fields.length === 6 ? fields : ["0", ...fields]).join(" "), { tz: "UTC" });
  const matches = (wall: number) => expression.includesDate(new Date(wall));
  const format = new Intl.DateTimeFormat("en-US", {
    timeZone: zone,
    hourCycle: "h23",
    year: "numeric",
    month: "numeric",
    day: "numeric",
    hour: "numeric",
    minute: "numeric",
    second: "numeric",
  });
  const wallOf = (instant: number) => {
    const parts = format.formatToParts(instant);
    const part = (type: string) => Number(parts.find((p) => p.type === type)?.value);
    return Date.UTC(part("year"), part("month") - 1, part("day"), part("hour"), part("minute"), part("second"));
  };
  const seen = new Set<number>();
  const slots = new Set<number>();
  let wall = wallOf(from - 86_400_000);
  for (let instant = from - 86_400_000; instant < until; instant += step) {
    const nextWall = wallOf(instant + step);
    if (matches(wall) && (parsed.wildcardHour || !seen.has(wall))) slots.add(instant);
    seen.add(wall);
    if (!parsed.wildcardHour) {
      for (let skipped = wall + step; skipped < nextWall; skipped += step) {
        if (matches(skipped)) slots.add(skipped - (wall - instant));
      }
    }
    wall = nextWall;
  }
  return [...slots].filter((slot) => slot >= from && slot < until).sort((a, b) => a - b);
}

/** Deterministic pseudo-random instants, so failures reproduce. */
function* instants(seed: number, count: number, from: number, spreadMs: number): Generator<number> {
  let state = seed;
  let at = from;
  for (let index = 0; index < count; index++) {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    at += Math.floor((state / 2_147_483_648) * spreadMs) + (state % 1_000);
    yield at;
  }
}

const COMPARED_CRONS = [
  "0 * * * *",
  "*/7 * * * *",
  "30 2 * * *",
  "0 9 * * 1-5",
  "*/30 * * * * *",
  "10-20/3 5 * * * *",
  "0 0 1 * *",
  "0 0 1 1 *",
  "0 0 L * *",
  "0 12 * * 5L",
  "0 12 * * 1#2",
  "0 12 15 * 1",
  "0 0 */1 * 1",
  "15 10 L 2 *",
  "0 0 29 2 *",
  "7,13 3-5 */3 * sun,sat",
  "59 23 31 12 *",
  "0 0 1 */2 *",
];

describe("America/Santiago expectations, read back through Intl", () => {
  // The hand-written instants above, formatted by Intl (not by the code under test) as the wall time they were meant to be.
  const format = new Intl.DateTimeFormat("en-CA", {
    timeZone: "America/Santiago",
    hourCycle: "h23",
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    timeZoneName: "shortOffset",
  });
  it.each([
    ["2026-04-04T03:00:00Z", "2026-04-04, 00:00 GMT-3"],
    ["2026-04-05T02:00:00Z", "2026-04-04, 23:00 GMT-3"],
    ["2026-04-05T03:00:00Z", "2026-04-04, 23:00 GMT-4"],
    ["2026-04-05T04:00:00Z", "2026-04-05, 00:00 GMT-4"],
    ["2026-09-06T03:59:00Z", "2026-09-05, 23:59 GMT-4"],
    ["2026-09-06T04:00:00Z", "2026-09-06, 01:00 GMT-3"],
    ["2026-09-06T15:00:00Z", "2026-09-06, 12:00 GMT-3"],
    ["2026-09-07T03:00:00Z", "2026-09-07, 00:00 GMT-3"],
  ])("%s is %s", (instant, wall) => {
    expect(format.format(new Date(instant))).toBe(wall);
  });
});

describe("slotCalendar against cron-parser", () => {
  it.each(COMPARED_CRONS)("%s in UTC matches cron-parser's next() and prev()", (cron) => {
    const calendar = slotCalendar(cron);
    const fields = cron.split(" ");
    const expression = CronExpressionParser.parse((fields.length === 5 ? ["0", ...fields] : fields).join(" "), { tz: "UTC" });
    for (const at of instants(cron.length, 250, Date.parse("2024-01-01T00:00:00Z"), 20 * 86_400_000)) {
      expression.reset(new Date(at));
      const next = expression.next().getTime();
      expression.reset(new Date(at + 1));
      const previous = expression.prev().getTime();
      if (calendar.nextMs(at) !== next || calendar.latestMs(at) !== previous) {
        expect.fail(`${cron} at ${new Date(at).toISOString()}: next ${calendar.nextMs(at)} vs ${next}, latest ${calendar.latestMs(at)} vs ${previous}`);
      }
    }
  });

  it.each(["America/New_York", "Europe/Berlin", "Australia/Lord_Howe"])(
    "%s matches cron-parser on ordinary days away from transitions",
    (zone) => {
      for (const cron of ["0 * * * *", "30 2 * * *", "*/15 * * * *", "0 9 * * 1-5"]) {
        const calendar = slotCalendar(cron, { timezone: zone });
        const expression = CronExpressionParser.parse(`0 ${cron}`, { tz: zone });
        for (const month of [0, 6]) {
          for (const at of instants(month + 1, 50, Date.UTC(2026, month, 10), 3_600_000)) {
            expression.reset(new Date(at));
            expect(calendar.nextMs(at)).toBe(expression.next().getTime());
          }
        }
      }
    },
  );
});

describe("slotCalendar", () => {
  it("returns the first slot strictly after and the last slot at or before", () => {
    const calendar = slotCalendar("*/15 * * * *");
    const slot = Date.parse("2026-05-05T10:15:00Z");
    expect(calendar.next(new Date(slot))?.toISOString()).toBe("2026-05-05T10:30:00.000Z");
    expect(calendar.next(slot - 1)?.getTime()).toBe(slot);
    expect(calendar.latest(new Date(slot))?.getTime()).toBe(slot);
    expect(calendar.latest(slot + 0.5)?.getTime()).toBe(slot);
    expect(calendar.latest(slot - 1)?.toISOString()).toBe("2026-05-05T10:00:00.000Z");
    expect(calendar.nextMs(slot + 0.5)).toBe(Date.parse("2026-05-05T10:30:00Z"));
  });

  it("defaults to UTC and accepts a ParsedCron", () => {
    const parsed = parseCron("@daily");
    const calendar = slotCalendar(parsed);
    expect(calendar.timezone).toBe("UTC");
    expect(calendar.cron).toBe(parsed);
    expect(calendar.next(Date.parse("2026-05-05T10:15:00Z"))?.toISOString()).toBe("2026-05-06T00:00:00.000Z");
    const berlin = slotCalendar(parsed, { timezone: "Europe/Berlin" });
    expect(berlin.next(Date.parse("2026-05-05T10:15:00Z"))?.toISOString()).toBe("2026-05-05T22:00:00.000Z");
  });

  it("works from a ParsedCron whose field sets it has not seen", () => {
    const copy = { ...parseCron("0 12 * * 1#2") };
    expect(slotCalendar(copy).next(Date.parse("2026-06-01T00:00:00Z"))?.toISOString()).toBe("2026-06-08T12:00:00.000Z");
  });

  it("finds leap days years apart", () => {
    const calendar = slotCalendar("0 0 29 2 *", { timezone: "America/New_York" });
    expect(calendar.next(Date.parse("2026-01-01T00:00:00Z"))?.toISOString()).toBe("2028-02-29T05:00:00.000Z");
    expect(calendar.latest(Date.parse("2027-06-01T00:00:00Z"))?.toISOString()).toBe("2024-02-29T05:00:00.000Z");
  });

  it("estimates the shortest gap between slots", () => {
    expect(slotCalendar("*/15 * * * *").shortestGapMs()).toBe(900_000);
    expect(slotCalendar("*/30 * * * * *").shortestGapMs()).toBe(30_000);
    expect(slotCalendar("0 9 * * 1-5").shortestGapMs()).toBe(86_400_000);
    expect(slotCalendar("0 0,20 * * *").shortestGapMs()).toBe(4 * 3_600_000);
    expect(slotCalendar("@yearly").shortestGapMs()).toBe(365 * 86_400_000);
  });

  it("throws for an invalid cron or timezone", () => {
    expect(() => slotCalendar("61 * * * *")).toThrow(InvalidCronError);
    expect(() => slotCalendar("* * * *")).toThrow(InvalidCronError);
    expect(() => slotCalendar("0 * * * *", { timezone: "Mars/Olympus_Mons" })).toThrow(InvalidTimezoneError);
  });

  it("rejects instants that are not numbers", () => {
    expect(() => slotCalendar("0 * * * *").next(new Date(Number.NaN))).toThrow(RangeError);
  });
});

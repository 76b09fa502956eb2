import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defineJob } from "../src/jobs/define-job.js";
import type { ScheduleEntry } from "../src/schedule/define-schedule.js";
import { createTestStore, rows, type TestStore } from "./support/ledger.js";

const job = defineJob({ name: "dst.probe", run: () => {} });
const MINUTE = 60_000;

interface TransitionDay {
  readonly zone: string;
  readonly name: string;
  /** Local midnight to local midnight, in UTC. */
  readonly dayStart: string;
  readonly dayEnd: string;
  /** The instant the offset changes. */
  readonly transition: string;
  readonly expected: {
    readonly daily0230: readonly string[];
    readonly daily0130: readonly string[];
    readonly hourlyCount: number;
    /** Hourly slots from one hour before the transition to (not including) two hours after. */
    readonly hourlyAround: readonly string[];
    readonly halfHourInOne: readonly string[];
    readonly every15Count: number;
  };
}

// Expected instants are worked out by hand from the README's DST rules, not printed by the code.
const DAYS: readonly TransitionDay[] = [
  {
    zone: "America/New_York",
    name: "spring forward 02:00 EST -> 03:00 EDT",
    dayStart: "2026-03-08T05:00:00Z",
    dayEnd: "2026-03-09T04:00:00Z",
    transition: "2026-03-08T07:00:00Z",
    expected: {
      daily0230: ["2026-03-08T07:30:00.000Z"], // 02:30 does not exist: 03:30 EDT
      daily0130: ["2026-03-08T06:30:00.000Z"],
      hourlyCount: 23,
      hourlyAround: ["2026-03-08T06:00:00.000Z", "2026-03-08T07:00:00.000Z", "2026-03-08T08:00:00.000Z"], // 01 EST, 03 EDT, 04 EDT
      halfHourInOne: ["2026-03-08T06:00:00.000Z", "2026-03-08T06:30:00.000Z"],
      every15Count: 23 * 4,
    },
  },
  {
    zone: "America/New_York",
    name: "fall back 02:00 EDT -> 01:00 EST",
    dayStart: "2026-11-01T04:00:00Z",
    dayEnd: "2026-11-02T05:00:00Z",
    transition: "2026-11-01T06:00:00Z",
    expected: {
      daily0230: ["2026-11-01T07:30:00.000Z"],
      daily0130: ["2026-11-01T05:30:00.000Z"], // the first 01:30 (EDT) only
      hourlyCount: 25,
      hourlyAround: ["2026-11-01T05:00:00.000Z", "2026-11-01T06:00:00.000Z", "2026-11-01T07:00:00.000Z"], // 01 EDT, 01 EST, 02 EST
      halfHourInOne: ["2026-11-01T05:00:00.000Z", "2026-11-01T05:30:00.000Z"],
      every15Count: 25 * 4,
    },
  },
  {
    zone: "Europe/Berlin",
    name: "spring forward 02:00 CET -> 03:00 CEST",
    dayStart: "2026-03-28T23:00:00Z",
    dayEnd: "2026-03-29T22:00:00Z",
    transition: "2026-03-29T01:00:00Z",
    expected: {
      daily0230: ["2026-03-29T01:30:00.000Z"], // 03:30 CEST
      daily0130: ["2026-03-29T00:30:00.000Z"],
      hourlyCount: 23,
      hourlyAround: ["2026-03-29T00:00:00.000Z", "2026-03-29T01:00:00.000Z", "2026-03-29T02:00:00.000Z"],
      halfHourInOne: ["2026-03-29T00:00:00.000Z", "2026-03-29T00:30:00.000Z"],
      every15Count: 23 * 4,
    },
  },
  {
    zone: "Europe/Berlin",
    name: "fall back 03:00 CEST -> 02:00 CET",
    dayStart: "2026-10-24T22:00:00Z",
    dayEnd: "2026-10-25T23:00:00Z",
    transition: "2026-10-25T01:00:00Z",
    expected: {
      daily0230: ["2026-10-25T00:30:00.000Z"], // the first 02:30 (CEST) only
      daily0130: ["2026-10-24T23:30:00.000Z"],
      hourlyCount: 25,
      hourlyAround: ["2026-10-25T00:00:00.000Z", "2026-10-25T01:00:00.000Z", "2026-10-25T02:00:00.000Z"], // 02 CEST, 02 CET, 03 CET
      halfHourInOne: ["2026-10-24T23:00:00.000Z", "2026-10-24T23:30:00.000Z"],
      every15Count: 25 * 4,
    },
  },
  {
    zone: "Australia/Lord_Howe",
    name: "fall back 02:00 +11 -> 01:30 +10:30",
    dayStart: "2026-04-04T13:00:00Z",
    dayEnd: "2026-04-05T13:30:00Z",
    transition: "2026-04-04T15:00:00Z",
    expected: {
      daily0230: ["2026-04-04T16:00:00.000Z"], // 02:30 +10:30 happens once
      daily0130: ["2026-04-04T14:30:00.000Z"], // the first 01:30 (+11) only
      hourlyCount: 24,
      hourlyAround: ["2026-04-04T14:00:00.000Z", "2026-04-04T15:30:00.000Z", "2026-04-04T16:30:00.000Z"], // 01:00, 02:00, 03:00
      halfHourInOne: ["2026-04-04T14:00:00.000Z", "2026-04-04T14:30:00.000Z"],
      every15Count: 98, // 24.5 real hours: the repeated 01:30 and 01:45 fire twice
    },
  },
  {
    zone: "Australia/Lord_Howe",
    name: "spring forward 02:00 +10:30 -> 02:30 +11",
    dayStart: "2026-10-03T13:30:00Z",
    dayEnd: "2026-10-04T13:00:00Z",
    transition: "2026-10-03T15:30:00Z",
    expected: {
      daily0230: ["2026-10-03T15:30:00.000Z"], // 02:30 +11 exists: it is the first instant after the gap
      daily0130: ["2026-10-03T15:00:00.000Z"],
      hourlyCount: 23, // 02:00 falls in the gap
      hourlyAround: ["2026-10-03T14:30:00.000Z", "2026-10-03T16:00:00.000Z", "2026-10-03T17:00:00.000Z"], // 01:00, 03:00, 04:00
      halfHourInOne: ["2026-10-03T14:30:00.000Z", "2026-10-03T15:00:00.000Z"],
      every15Count: 94, // 23.5 real hours; 02:00 and 02:15 do not exist
    },
  },
];

const ENTRY_KEYS = ["daily0230", "daily0130", "hourly", "halfHourInOne", "every15"] as const;
const CRONS: Record<(typeof ENTRY_KEYS)[number], string> = {
  daily0230: "30 2 * * *",
  daily0130: "30 1 * * *",
  hourly: "0 * * * *",
  halfHourInOne: "*/30 1 * * *",
  every15: "*/15 * * * *",
};

async function slotsByKey(store: TestStore, schedule: readonly ScheduleEntry[], fromMs: number, toMs: number, stepMs: number) {
  const ledger = await store.open({ jobs: [job], schedule });
  for (let now = fromMs - stepMs; now <= toMs; now += stepMs) await ledger.tick({ now: new Date(now) });
  const fired = await rows<{ key: string; slot_ms: number }>(
    ledger,
    sql`select s.key, (extract(epoch from j.scheduled_for) * 1000)::float8 as slot_ms
        from cronledger.jobs j join cronledger.schedule_state s on s.key = j.schedule_key
        where j.scheduled_for >= ${new Date(fromMs).toISOString()}::timestamptz and j.scheduled_for < ${new Date(toMs).toISOString()}::timestamptz
        order by j.scheduled_for`,
  );
  const byEntry = new Map<string, string[]>();
  for (const entry of ledger.entries) byEntry.set(entry.entryKey ?? "", []);
  const keyToEntry = new Map(ledger.entries.map((entry) => [entry.ledgerKey, entry.entryKey ?? ""]));
  for (const row of fired) byEntry.get(keyToEntry.get(row.key) ?? "")?.push(new Date(row.slot_ms).toISOString());
  return byEntry;
}

describe.each(DAYS)("DST: $zone $name, ticked through the day", (day) => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createTestStore("postgres", `dst_${day.zone}`);
  });
  afterAll(async () => {
    await store.dispose();
  });

  it("fires each minute-resolution entry exactly as the README's DST rules say, ticked every minute", async () => {
    const schedule = ENTRY_KEYS.map((key) => ({ job, cron: CRONS[key], timezone: day.zone, key }));
    const fired = await slotsByKey(store, schedule, Date.parse(day.dayStart), Date.parse(day.dayEnd), MINUTE);
    const { expected } = day;
    expect(fired.get("daily0230")).toEqual(expected.daily0230);
    expect(fired.get("daily0130")).toEqual(expected.daily0130);
    expect(fired.get("halfHourInOne")).toEqual(expected.halfHourInOne);
    expect(fired.get("hourly")).toHaveLength(expected.hourlyCount);
    const transition = Date.parse(day.transition);
    const around = (fired.get("hourly") ?? []).filter((slot) => {
      const ms = Date.parse(slot);
      return ms >= transition - 60 * MINUTE && ms < transition + 120 * MINUTE;
    });
    expect(around).toEqual(expected.hourlyAround);
    expect(fired.get("every15")).toHaveLength(expected.every15Count);
    expect(new Set(fired.get("every15")).size).toBe(expected.every15Count);
  });

  it("fires a 6-field every-30-seconds entry at every real instant around the transition, ticked every 10 s", async () => {
    const transition = Date.parse(day.transition);
    const from = transition - 60 * MINUTE;
    const to = transition + 60 * MINUTE;
    const fired = await slotsByKey(store, [{ job, cron: "*/30 * * * * *", timezone: day.zone, key: "seconds" }], from, to, 10_000);
    const slots = fired.get("seconds") ?? [];
    expect(slots).toHaveLength(240);
    // Real time never pauses or repeats: one slot every 30 s straight through the change.
    slots.forEach((slot, index) => expect(Date.parse(slot)).toBe(from + index * 30_000));
  });
});

/**
 * America/Santiago moves its clocks at midnight, where the hours a list names
 * meet the gap and the fold. A list of hours is fixed hours whatever its set
 * (it fires as its hours would one by one); a written sweep (`*\/n`) is a
 * wildcard. Instants worked out by hand from Chile's offsets (-03 summer,
 * -04 winter; test/slot-calendar.test.ts reads them back through Intl).
 */
const SANTIAGO_CRONS = {
  midnight: "0 0 * * *",
  midnightNoon: "0 0,12 * * *",
  everyTwelve: "0 */12 * * *",
  eleven: "0 23 * * *",
  midnightEleven: "0 0,23 * * *",
  everyTwentyThree: "0 */23 * * *",
} as const;

const SANTIAGO_DAYS = [
  {
    name: "fall back on 2026-04-05 (24:00 -03 -> 23:00 -04 on the 4th)",
    from: "2026-04-04T03:00:00Z", // 2026-04-04 00:00 -03
    to: "2026-04-05T04:00:00Z", // 2026-04-05 00:00 -04, excluded
    expected: {
      midnight: ["2026-04-04T03:00:00.000Z"],
      midnightNoon: ["2026-04-04T03:00:00.000Z", "2026-04-04T15:00:00.000Z"],
      everyTwelve: ["2026-04-04T03:00:00.000Z", "2026-04-04T15:00:00.000Z"],
      eleven: ["2026-04-05T02:00:00.000Z"], // the first 23:00 only
      midnightEleven: ["2026-04-04T03:00:00.000Z", "2026-04-05T02:00:00.000Z"], // was three: 23:00 twice
      everyTwentyThree: ["2026-04-04T03:00:00.000Z", "2026-04-05T02:00:00.000Z", "2026-04-05T03:00:00.000Z"],
    },
  },
  {
    name: "spring forward on 2026-09-06 (00:00 -04 -> 01:00 -03)",
    from: "2026-09-06T04:00:00Z", // 2026-09-06 01:00 -03, the day's first instant
    to: "2026-09-07T03:00:00Z", // 2026-09-07 00:00 -03, excluded
    expected: {
      midnight: ["2026-09-06T04:00:00.000Z"], // 00:00 shifted by the gap: 01:00 -03
      midnightNoon: ["2026-09-06T04:00:00.000Z", "2026-09-06T15:00:00.000Z"], // was noon alone
      everyTwelve: ["2026-09-06T15:00:00.000Z"], // a wildcard skips the gap
      eleven: ["2026-09-07T02:00:00.000Z"],
      midnightEleven: ["2026-09-06T04:00:00.000Z", "2026-09-07T02:00:00.000Z"],
      everyTwentyThree: ["2026-09-07T02:00:00.000Z"], // 00:00 is skipped, 23:00 -03 fires
    },
  },
] as const;

describe.each(SANTIAGO_DAYS)("DST: America/Santiago $name, hour lists against written sweeps", (day) => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createTestStore("postgres", "dst_santiago");
  });
  afterAll(async () => {
    await store.dispose();
  });

  it("fires each entry as its written hour field says, ticked every 10 minutes", async () => {
    const schedule = Object.entries(SANTIAGO_CRONS).map(([key, cron]) => ({ job, cron, timezone: "America/Santiago", key }));
    const fired = await slotsByKey(store, schedule, Date.parse(day.from), Date.parse(day.to), 10 * MINUTE);
    for (const key of Object.keys(SANTIAGO_CRONS) as (keyof typeof SANTIAGO_CRONS)[]) {
      expect(fired.get(key), `${key}: ${SANTIAGO_CRONS[key]}`).toEqual(day.expected[key]);
    }
  });
});

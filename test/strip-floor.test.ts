import { describe, expect, it } from "vitest";
import { slotCalendar } from "../src/schedule/slot-calendar.js";
import { stripFloorMs } from "../src/status/runs.js";

const HOUR = 3_600_000;

describe("a strip's floor (the oldest finish its history read needs)", () => {
  it("is the entry's `limit`-th slot back from now, less an hour's margin", () => {
    const now = Date.parse("2026-12-03T12:30:00Z");
    expect(stripFloorMs({ calendar: slotCalendar("0 * * * *") }, 3, now)).toBe(Date.parse("2026-12-03T10:00:00Z") - HOUR);
    expect(stripFloorMs({ calendar: slotCalendar("0 0 1 1 *") }, 2, now)).toBe(Date.parse("2025-01-01T00:00:00Z") - HOUR);
  });

  it("counts a slot at now itself as the first", () => {
    const now = Date.parse("2026-12-03T12:00:00Z");
    expect(stripFloorMs({ calendar: slotCalendar("0 * * * *") }, 1, now)).toBe(now - HOUR);
  });

  it("is null (the whole history) for a calendar without that many slots", () => {
    expect(stripFloorMs({ calendar: slotCalendar("0 0 30 2 *") }, 20, Date.now())).toBeNull();
  });
});

import { describe, expect, it } from "vitest";
import { defineJob } from "../src/jobs/define-job.js";
import { parseCron } from "../src/schedule/cron.js";
import { slotCalendar } from "../src/schedule/slot-calendar.js";
import { validateSchedule } from "../src/schedule/validate.js";

/**
 * Leading zeros are fine in every number of an expression (README, "The
 * schedule format"), the ordinal of `d#n` included: `1#02` is `1#2` and
 * `0#004` is `0#4` for validation (what preflight runs), the slot calendar
 * and the canonical form, and `d#0n` out of 1-5 is refused as `d#n` is.
 */
const job = defineJob({ name: "report.monthly", run: () => undefined });

const SAME: readonly (readonly [string, string])[] = [
  ["0 12 * * 1#02", "0 12 * * 1#2"],
  ["0 12 * * 0#004", "0 12 * * 0#4"],
  ["0 12 * * 01#2", "0 12 * * 1#2"],
  ["0 12 * * mon#05", "0 12 * * 1#5"],
  ["30 0 9 * * 07#0001", "30 0 9 * * 7#1"],
];

describe("leading zeros in the ordinal of d#n", () => {
  it.each(SAME)("%s parses as %s", (written, plain) => {
    expect(parseCron(written).canonical).toBe(parseCron(plain).canonical);
  });

  it.each(SAME)("%s has the slots of %s in a zone with DST", (written, plain) => {
    const zeros = slotCalendar(written, { timezone: "Europe/Berlin" });
    const bare = slotCalendar(plain, { timezone: "Europe/Berlin" });
    let after = Date.UTC(2026, 0, 1);
    for (let i = 0; i < 24; i += 1) {
      const slot = zeros.nextMs(after);
      expect(slot).toBe(bare.nextMs(after));
      if (slot === null) break;
      expect(zeros.latestMs(slot)).toBe(slot);
      after = slot;
    }
  });

  it("passes the schedule validation preflight runs, as the plain ordinal does", () => {
    const problems = validateSchedule(
      SAME.map(([cron], index) => ({ job, cron, key: `k${index}` })),
      [job],
    );
    expect(problems.filter((problem) => problem.severity === "error")).toEqual([]);
  });

  it.each(["0 12 * * 1#00", "0 12 * * 1#06", "0 12 * * 1#0", "0 12 * * 1#-1", "0 12 * * 1#2x"])("refuses %s like any ordinal out of 1-5", (cron) => {
    expect(() => parseCron(cron)).toThrow(/needs d#n with n from 1 to 5/);
  });
});

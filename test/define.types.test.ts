import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineJob } from "../src/jobs/define-job.js";
import { defineSchedule } from "../src/schedule/define-schedule.js";

const digest = defineJob({
  name: "email.send-digest",
  payload: z.object({ list: z.string() }),
  run: () => {},
});
const rollup = defineJob({ name: "reports.rollup", run: () => {} });

describe("defineSchedule typing", () => {
  it("accepts entries whose payload matches their job and rejects the rest at compile time", () => {
    const schedule = defineSchedule([
      { job: digest, cron: "0 8 * * 1-5", timezone: "Europe/Berlin", payload: { list: "daily" } },
      { job: rollup, cron: "*/15 * * * *" },
      { job: "reports.rollup", cron: "@hourly", key: "by-name" },
    ]);
    expect(schedule).toHaveLength(3);

    defineSchedule([
      // @ts-expect-error list must be a string
      { job: digest, cron: "0 8 * * *", payload: { list: 1 } },
    ]);
    defineSchedule([
      // @ts-expect-error the digest job requires a payload
      { job: digest, cron: "0 8 * * *" },
    ]);
  });
});

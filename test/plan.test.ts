import { describe, expect, it } from "vitest";
import { defineJob } from "../src/jobs/define-job.js";
import { candidateSlots, CLOCK_MARGIN_MS, expectedDueSlot, fireTime, nextFireAfter, nextFireAt, planPass, type FireMemo } from "../src/schedule/plan.js";
import { loadSchedule, type ResolvedEntry } from "../src/schedule/validate.js";

// Pure planning: no database, no clock but the instants given here.
const job = defineJob({ name: "plan.probe", run: () => {} });
const MINUTE = 60_000;
const T0 = Date.parse("2026-12-02T10:00:00.000Z");

function entries(...specs: { cron: string; key?: string; jitter?: string }[]): ResolvedEntry[] {
  return loadSchedule(
    specs.map((spec) => ({ job, ...spec })),
    [job],
  ).entries;
}

describe("fire times", () => {
  it("is the slot itself without jitter, and the slot plus the entry's own deterministic delay with it", () => {
    const [plain, jittered] = entries({ cron: "* * * * *" }, { cron: "* * * * *", key: "j", jitter: "30s" });
    expect(fireTime(plain!, T0)).toBe(T0);
    const fire = fireTime(jittered!, T0);
    expect(fire).toBeGreaterThanOrEqual(T0);
    expect(fire).toBeLessThanOrEqual(T0 + 30_000);
    expect(fireTime(jittered!, T0)).toBe(fire);
    expect(nextFireAfter(plain!, T0)).toBe(T0 + MINUTE);
  });

  it("says Infinity for an entry that never fires again", () => {
    const [never] = entries({ cron: "0 0 30 2 *" });
    expect(nextFireAfter(never!, T0)).toBe(Number.POSITIVE_INFINITY);
  });
});

describe("candidate slots", () => {
  it("is exactly one slot, the latest due, at a fixed instant", () => {
    const [minutely] = entries({ cron: "* * * * *" });
    expect(candidateSlots(minutely!, T0 + 30_000, T0 + 30_000)).toEqual([T0]);
  });

  it("covers every slot that can be due while the clock is anywhere in the span", () => {
    const [secondly] = entries({ cron: "* * * * * *" });
    const slots = candidateSlots(secondly!, T0 - 2_000, T0 + 2_000);
    expect(slots).toEqual([T0 - 2_000, T0 - 1_000, T0, T0 + 1_000, T0 + 2_000]);
  });

  it("reaches back past a slot whose jittered fire time is still ahead of the span", () => {
    const [jittered] = entries({ cron: "* * * * *", jitter: "50s" });
    const fire = fireTime(jittered!, T0);
    expect(fire).toBeGreaterThan(T0);
    // At an instant after the slot but before its fire time, the previous slot is the due one.
    const slots = candidateSlots(jittered!, fire - 1, fire - 1);
    expect(slots[0]).toBe(T0 - MINUTE);
    expect(slots).not.toContain(T0);
  });
});

describe("planning a pass", () => {
  const [a, b, c] = entries({ cron: "* * * * *", key: "a" }, { cron: "0 * * * *", key: "b" }, { cron: "*/5 * * * *", key: "c" });
  const all = [a!, b!, c!];

  it("looks at every entry it has never seen", () => {
    const plan = planPass({ entries: all, memo: new Map(), deferredUntil: new Map(), exactMs: null, estimateMs: T0 });
    expect(plan.entries).toHaveLength(3);
    expect([plan.lowMs, plan.highMs]).toEqual([T0 - CLOCK_MARGIN_MS, T0 + CLOCK_MARGIN_MS]);
  });

  it("leaves out entries whose remembered next fire is still ahead, and sits out a quarantine", () => {
    const memo: FireMemo = new Map([
      [a!.ledgerKey, { ledgerMs: T0 - MINUTE, nextFireMs: T0 }],
      [b!.ledgerKey, { ledgerMs: T0 - 10 * MINUTE, nextFireMs: T0 + 50 * MINUTE }],
    ]);
    const deferred = new Map([[c!.ledgerKey, T0 + MINUTE]]);
    const plan = planPass({ entries: all, memo, deferredUntil: deferred, exactMs: T0, estimateMs: 0 });
    expect(plan.entries.map((entry) => entry.ledgerKey)).toEqual([a!.ledgerKey]);
    expect([plan.lowMs, plan.highMs, plan.exactMs]).toEqual([T0, T0, T0]);
    const later = planPass({ entries: all, memo, deferredUntil: deferred, exactMs: T0 + MINUTE, estimateMs: 0 });
    expect(later.entries.map((entry) => entry.ledgerKey)).toEqual([a!.ledgerKey, c!.ledgerKey]);
  });

  it("expects the latest candidate due by the plan's instant", () => {
    const plan = planPass({ entries: all, memo: new Map(), deferredUntil: new Map(), exactMs: T0 + 90_000, estimateMs: 0 });
    expect(expectedDueSlot(a!, plan)).toBe(T0 + MINUTE);
    expect(expectedDueSlot(b!, plan)).toBe(T0);
  });

  it("sleeps until the earliest remembered fire, counting a quarantine from its end", () => {
    const memo: FireMemo = new Map([
      [a!.ledgerKey, { ledgerMs: T0, nextFireMs: T0 + MINUTE }],
      [b!.ledgerKey, { ledgerMs: T0, nextFireMs: T0 + 60 * MINUTE }],
    ]);
    expect(nextFireAt({ entries: all, memo, deferredUntil: new Map() }, Number.POSITIVE_INFINITY)).toBe(T0 + MINUTE);
    expect(nextFireAt({ entries: all, memo, deferredUntil: new Map([[a!.ledgerKey, T0 + 2 * MINUTE]]) }, Number.POSITIVE_INFINITY)).toBe(T0 + 2 * MINUTE);
    expect(nextFireAt({ entries: all, memo, deferredUntil: new Map() }, T0 + 30_000)).toBe(T0 + 30_000);
    expect(nextFireAt({ entries: [], memo, deferredUntil: new Map() }, Number.POSITIVE_INFINITY)).toBeNull();
  });
});

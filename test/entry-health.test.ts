import { describe, expect, it } from "vitest";
import { describeDuration, entryHealth, lateToleranceMs, type EntryRun, type HealthInput } from "../src/status/health.js";
import { slotCalendar } from "../src/schedule/slot-calendar.js";

const MINUTE = 60_000;
const T = Date.parse("2026-03-02T10:00:00.000Z");
const everyMinute = slotCalendar("* * * * *");
const daily = slotCalendar("0 3 * * *");

function run(kind: EntryRun["kind"], overrides: Partial<EntryRun> = {}): EntryRun {
  return {
    jobId: 7,
    kind,
    outcome: null,
    attempts: 1,
    maxAttempts: 3,
    scheduledFor: new Date(T),
    runAt: new Date(T),
    startedAt: new Date(T + 1_000),
    finishedAt: kind === "succeeded" || kind === "failed" ? new Date(T + 2_000) : null,
    retried: false,
    late: false,
    error: kind === "failed" || kind === "retrying" ? "Error: upstream said 503" : null,
    ...overrides,
  };
}

/** An every-minute entry whose last handled slot is T, judged at `nowMs`. */
function input(nowMs: number, overrides: Partial<HealthInput> = {}): HealthInput {
  return {
    nowMs,
    ledger: { slotMs: T, createdMs: T - 10 * MINUTE, handled: true },
    calendar: everyMinute,
    jitterMs: 0,
    latestRun: run("succeeded"),
    ...overrides,
  };
}

describe("lateToleranceMs", () => {
  it("is half the period, at least 30 s and at most 5 minutes", () => {
    expect(lateToleranceMs(15_000)).toBe(30_000);
    expect(lateToleranceMs(MINUTE)).toBe(30_000);
    expect(lateToleranceMs(4 * MINUTE)).toBe(2 * MINUTE);
    expect(lateToleranceMs(60 * MINUTE)).toBe(5 * MINUTE);
    expect(lateToleranceMs(Number.POSITIVE_INFINITY)).toBe(5 * MINUTE);
  });
});

describe("entryHealth", () => {
  it("is ok while the next slot is not overdue beyond its tolerance", () => {
    const health = entryHealth(input(T + MINUTE + 29_000));
    expect(health.state).toBe("ok");
    expect(health.reason).toContain("succeeded");
  });

  it("is late once a slot is unhandled past its tolerance: within one period of an every-minute entry", () => {
    // The ticker stopped after handling 10:00; 10:01 is missed. 30 s later the entry is late, well inside the next period.
    const health = entryHealth(input(T + MINUTE + 30_000));
    expect(health.state).toBe("late");
    expect(health.reason).toContain("2026-03-02T10:01:00.000Z");
    expect(health.reason).toContain("no scheduler is ticking");
    // Two periods later it still is, and says how late.
    expect(entryHealth(input(T + 3 * MINUTE)).reason).toContain("2m past its fire time");
  });

  it("counts the jitter bound before calling an entry late", () => {
    expect(entryHealth(input(T + MINUTE + 30_000, { jitterMs: 20_000 })).state).toBe("ok");
    expect(entryHealth(input(T + MINUTE + 50_000, { jitterMs: 20_000 })).state).toBe("late");
  });

  it("is failing when the latest run failed for good, with the error", () => {
    const health = entryHealth(input(T + 10_000, { latestRun: run("failed", { attempts: 3 }) }));
    expect(health).toEqual({
      state: "failing",
      reason: "its latest run, job #7 for slot 2026-03-02T10:00:00.000Z, failed for good after 3/3 attempts: Error: upstream said 503",
    });
  });

  it("is retrying while the latest run waits for another attempt, and says when", () => {
    const health = entryHealth(input(T + 10_000, { latestRun: run("retrying", { runAt: new Date(T + 31_000) }) }));
    expect(health.state).toBe("retrying");
    expect(health.reason).toContain("attempt 1/3");
    expect(health.reason).toContain("2026-03-02T10:00:31.000Z");
  });

  it("is running while its latest run runs", () => {
    expect(entryHealth(input(T + 10_000, { latestRun: run("running") })).state).toBe("running");
  });

  it("is waiting_for_worker when its queued run waits for a worker that knows it", () => {
    const health = entryHealth(input(T + 40_000, { latestRun: run("queued", { startedAt: null }), waitingForWorker: { since: new Date(T) } }));
    expect(health.state).toBe("waiting_for_worker");
    expect(health.reason).toContain("since 2026-03-02T10:00:00.000Z");
    // A run that is not waiting (it finished) is not made to wait by the flag.
    expect(entryHealth(input(T + 40_000, { waitingForWorker: true })).state).toBe("ok");
  });

  it("is never_fired with its creation time when no slot came due since its ledger row was created", () => {
    const health = entryHealth({
      nowMs: T,
      ledger: { slotMs: T - 5 * MINUTE, createdMs: T - 5 * MINUTE, handled: false },
      calendar: daily,
      jitterMs: 0,
      latestRun: null,
    });
    expect(health.state).toBe("never_fired");
    expect(health.reason).toBe("created at 2026-03-02T09:55:00.000Z and no slot has come due since; its next slot is 2026-03-03T03:00:00.000Z");
    const unseen = entryHealth({ nowMs: T, ledger: null, calendar: daily, jitterMs: 0, latestRun: null });
    expect(unseen.state).toBe("never_fired");
    expect(unseen.reason).toContain("no scheduler pass has seen it yet");
  });

  it("is late, not never_fired, when the first slot after its creation is overdue", () => {
    const health = entryHealth(input(T + 2 * MINUTE, { ledger: { slotMs: T, createdMs: T, handled: false }, latestRun: null }));
    expect(health.state).toBe("late");
  });

  it("puts quarantined before late, late before failing, failing before waiting and retrying", () => {
    const quarantine = { until: new Date(T + MINUTE), reason: "slot could not be enqueued: trigger said no", count: 3 };
    const lateAndFailing = input(T + 5 * MINUTE, { latestRun: run("failed") });
    expect(entryHealth({ ...lateAndFailing, quarantine }).state).toBe("quarantined");
    expect(entryHealth({ ...lateAndFailing, quarantine }).reason).toContain("(3 times in a row): slot could not be enqueued");
    expect(entryHealth(lateAndFailing).state).toBe("late");
    expect(entryHealth(input(T + 10_000, { latestRun: run("failed") })).state).toBe("failing");
    expect(entryHealth(input(T + 10_000, { latestRun: run("retrying"), waitingForWorker: true })).state).toBe("waiting_for_worker");
  });
});

describe("describeDuration", () => {
  it("reads like an operator would say it", () => {
    expect([45_000, 90_000, 12 * MINUTE, 185 * MINUTE, 50 * 60 * MINUTE].map(describeDuration)).toEqual(["45s", "1m 30s", "12m", "3h 5m", "2d 2h"]);
  });
});

import { nextMode } from "../src/jobs/worker-mode.js";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Backoff } from "../src/backoff.js";
import { claimSize, MAX_CONCURRENT_CLAIMS } from "../src/jobs/claim-size.js";
import { attemptStatus, CompletionBatcher, completionRow, count, emptySummary, type Completion } from "../src/jobs/completion.js";
import type { CompletionRow } from "../src/db/sql/completions.js";
import { silentLogger } from "../src/index.js";

// The worker's pure parts: claim sizing, what a completion becomes, the retry waits.
describe("claim size", () => {
  const idle = { concurrency: 10, batchSize: 500, rate: 0, held: 0, claims: 0, claimingRows: 0 };

  it("claims the free slots and nothing more when jobs are slow (no prefetch to hoard)", () => {
    expect(claimSize(idle)).toBe(10);
    expect(claimSize({ ...idle, held: 4 })).toBe(6);
    expect(claimSize({ ...idle, held: 10 })).toBe(0);
    expect(claimSize({ ...idle, held: 4, claims: 1, claimingRows: 6 })).toBe(0);
  });

  it("prefetches about 50 ms of work at the observed rate, refilling below half of it", () => {
    // 2,000 jobs/s: 100 jobs of prefetch on top of 10 slots.
    const fast = { ...idle, rate: 2_000 };
    expect(claimSize(fast)).toBe(110);
    expect(claimSize({ ...fast, held: 60 })).toBe(50);
    expect(claimSize({ ...fast, held: 61 })).toBe(0);
  });

  it("never asks for more than a batch, and overlaps a second claim only when the rate outruns one", () => {
    const flood = { ...idle, rate: 1_000_000 };
    expect(claimSize(flood)).toBe(500);
    expect(claimSize({ ...flood, claims: 1, claimingRows: 100 })).toBe(410);
    expect(claimSize({ ...flood, claims: MAX_CONCURRENT_CLAIMS, claimingRows: 100 })).toBe(0);
    expect(claimSize({ ...idle, rate: 2_000, claims: 1 })).toBe(0);
  });
});

describe("completions", () => {
  const cases: [Completion, string | null, keyof ReturnType<typeof emptySummary>, string, boolean][] = [
    [{ kind: "succeeded", id: 1, attempt: 1, outcome: null }, "done", "succeeded", "succeeded", false],
    [{ kind: "succeeded", id: 1, attempt: 1, outcome: "skip" }, "skip", "skipped", "succeeded", false],
    [{ kind: "succeeded", id: 1, attempt: 1, outcome: "noop" }, "noop", "noop", "succeeded", false],
    [{ kind: "retry", id: 1, attempt: 1, error: "boom", delayMs: 30 }, "retry", "retried", "queued", false],
    [{ kind: "failed", id: 1, attempt: 1, error: "boom" }, "panicked", "failed", "failed", false],
    [{ kind: "cancelled", id: 1, attempt: 1, error: "asked to stop" }, "cancelled", "cancelled", "cancelled", false],
    [{ kind: "returned", id: 1, attempt: 1 }, null, "returned", "queued", true],
  ];

  it.each(cases)("%o is status %s, counted as %s, written as %s", (completion, status, field, rowStatus, returned) => {
    expect(attemptStatus(completion)).toBe(status);
    const summary = emptySummary();
    count(summary, completion);
    expect(summary[field]).toBe(1);
    expect(Object.values(summary).reduce((a, b) => a + b, 0)).toBe(1);
    expect(completionRow(completion)).toMatchObject({ id: 1, status: rowStatus, returned });
  });

  it("keeps a retry's delay and error, and a success's outcome", () => {
    expect(completionRow({ kind: "retry", id: 7, attempt: 1, error: "boom", delayMs: 30 })).toEqual({ id: 7, attempt: 1, status: "queued", outcome: null, error: "boom", delayMs: 30, returned: false });
    expect(completionRow({ kind: "succeeded", id: 7, attempt: 1, outcome: "noop" })).toEqual({ id: 7, attempt: 1, status: "succeeded", outcome: "noop", error: null, delayMs: 0, returned: false });
  });
});

describe("completion batches", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  function batcher(): { batcher: CompletionBatcher; writes: (readonly CompletionRow[])[] } {
    const writes: (readonly CompletionRow[])[] = [];
    const host = { write: async (rows: readonly CompletionRow[]) => (writes.push(rows), []), flushed: () => {}, logger: silentLogger };
    return { batcher: new CompletionBatcher(host), writes };
  }

  it("holds a completion for the batching delay, so the ones that end beside it share its statement", async () => {
    vi.useFakeTimers();
    const { batcher: b, writes } = batcher();
    b.add({ kind: "succeeded", id: 1, attempt: 1, outcome: null });
    await vi.advanceTimersByTimeAsync(5);
    b.add({ kind: "succeeded", id: 2, attempt: 1, outcome: null });
    expect(writes).toEqual([]);
    await vi.advanceTimersByTimeAsync(5);
    expect(writes.map((rows) => rows.map((row) => row.id))).toEqual([[1, 2]]);
  });

  it("writes at once when told nothing else will join (an idle worker's last job)", async () => {
    vi.useFakeTimers();
    const { batcher: b, writes } = batcher();
    b.add({ kind: "succeeded", id: 1, attempt: 1, outcome: null });
    b.flushNow();
    await vi.advanceTimersByTimeAsync(0);
    expect(writes.map((rows) => rows.map((row) => row.id))).toEqual([[1]]);
  });
});

describe("backoff", () => {
  it("waits initial, times factor per failure, up to the cap, and starts over after a success", () => {
    const backoff = new Backoff({ initialMs: 100, factor: 3, maxMs: 900 });
    expect([backoff.next(), backoff.next(), backoff.next(), backoff.next()]).toEqual([100, 300, 900, 900]);
    expect(backoff.attempts).toBe(4);
    expect(backoff.currentMs).toBe(900);
    backoff.reset();
    expect(backoff.currentMs).toBe(0);
    expect(backoff.next()).toBe(100);
    expect(Backoff.delay({ initialMs: 250, factor: 2, maxMs: 5_000 }, 6)).toBe(5_000);
  });
});

describe("a worker's modes", () => {
  it("allows the changes of its life and refuses the rest", () => {
    // A run: started, running, stopped; a stop() during the start; a release before running.
    expect(nextMode("idle", "starting")).toBe("starting");
    expect(nextMode("starting", "running")).toBe("running");
    expect(nextMode("running", "stopping")).toBe("stopping");
    expect(nextMode("stopping", "stopped")).toBe("stopped");
    expect(nextMode("starting", "stopping")).toBe("stopping");
    expect(nextMode("idle", "released")).toBe("released");
    // Never back, never out of a final mode, never claiming again once stopping.
    for (const [from, to] of [
      ["running", "starting"],
      ["stopping", "running"],
      ["stopped", "stopping"],
      ["released", "starting"],
      ["idle", "running"],
    ] as const) {
      expect(() => nextMode(from, to)).toThrow(`cannot go from ${from} to ${to}`);
    }
  });
});

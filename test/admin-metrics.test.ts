import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { createMetrics, OTHER_JOB_TYPE } from "../src/admin/metrics.js";
import { createCronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import type { TickReport } from "../src/events.js";
import { createTestDatabase, serverUrl } from "./support/database.js";
import { withDatabase } from "./support/postgres-url.js";
import { parseExposition } from "./support/prometheus.js";

const slot = { identity: "a|", key: "default|a|", jobName: "a", slot: new Date(0) };

function report(counts: { enqueued?: number; lostRace?: number; quarantined?: number }): TickReport {
  const times = (n = 0) => Array.from({ length: n }, () => slot);
  return {
    now: new Date(0),
    enqueued: times(counts.enqueued).map((outcome) => ({ ...outcome, jobId: 1 })),
    lostRace: times(counts.lostRace),
    skippedStale: [],
    skipped: [],
    quarantined: times(counts.quarantined).map((outcome) => ({ ...outcome, phase: "enqueue" as const, error: "boom", until: new Date(60_000), count: 1 })),
    setAside: [],
    locked: [],
    repaired: [],
    created: 0,
    nextFireAt: null,
    statements: 1,
    attempts: 1,
  };
}

describe("createMetrics", () => {
  it("exposes exactly the documented metric families, pre-initialised for every registered job", async () => {
    const metrics = createMetrics({ jobNames: ["email.send", "reports.rollup"] });
    const text = await metrics.registry.metrics();
    const exposition = parseExposition(text);
    expect([...exposition.types.entries()].sort()).toEqual([
      ["cronledger_dynamic_schedule_entries", "gauge"],
      ["cronledger_failures_total", "counter"],
      ["cronledger_init_failure", "gauge"],
      ["cronledger_job_duration_seconds", "histogram"],
      ["cronledger_jobs_reaped_total", "counter"],
      ["cronledger_jobs_total", "counter"],
      ["cronledger_jobs_waiting_for_worker", "gauge"],
      ["cronledger_jobs_waiting_for_worker_oldest_seconds", "gauge"],
      ["cronledger_late_completions_total", "counter"],
      ["cronledger_prune_rows_removed_total", "counter"],
      ["cronledger_queue_oldest_ready_age_seconds", "gauge"],
      ["cronledger_queue_ready_jobs", "gauge"],
      ["cronledger_schedule_entries", "gauge"],
      ["cronledger_schedule_slots_total", "counter"],
      ["cronledger_tick_duration_seconds", "histogram"],
    ]);
    // Job durations exist from the first scrape too, so rate() over them works before the first job ends.
    expect(exposition.value("cronledger_job_duration_seconds_count", { job_type: "email.send" })).toBe(0);
    expect(exposition.samples.some((sample) => sample.name === "cronledger_job_duration_seconds_bucket" && sample.labels.job_type === "reports.rollup")).toBe(true);
    const statuses = exposition.samples.filter((sample) => sample.name === "cronledger_jobs_total" && sample.labels.job_type === "email.send");
    expect(statuses.map((sample) => sample.labels.status).sort()).toEqual(["cancelled", "done", "noop", "panicked", "retry", "skip", "started"]);
    const outcomes = exposition.samples.filter((sample) => sample.name === "cronledger_schedule_slots_total").map((sample) => sample.labels.outcome);
    expect(outcomes.sort()).toEqual(["enqueued", "locked", "lost_race", "quarantined", "repaired", "set_aside", "skipped_overlap", "skipped_paused", "skipped_stale"]);
    expect(exposition.value("cronledger_init_failure")).toBe(0);
  });

  it("counts events and collapses unknown job names into one label value", async () => {
    const metrics = createMetrics({ jobNames: ["known"] });
    const { hooks } = metrics;
    hooks.jobStarted?.({ jobId: 1, jobName: "known", attempt: 1 });
    hooks.jobFinished?.({ jobId: 1, jobName: "known", attempt: 1, status: "done", durationSeconds: 0.2 });
    hooks.jobStarted?.({ jobId: 2, jobName: "known", attempt: 1 });
    hooks.jobFinished?.({ jobId: 2, jobName: "known", attempt: 1, status: "retry", durationSeconds: 0.1, error: "x" });
    for (const name of ["ghost-1", "ghost-2", "ghost-3"]) {
      hooks.jobStarted?.({ jobId: 3, jobName: name, attempt: 1 });
      hooks.jobFinished?.({ jobId: 3, jobName: name, attempt: 1, status: "panicked", durationSeconds: 0, error: "x" });
    }
    hooks.tickCompleted?.(report({ enqueued: 2, lostRace: 1, quarantined: 1 }), 0.004);
    hooks.pruned?.({ table: "jobs", rows: 7 });
    hooks.initFailure?.(true);

    const exposition = parseExposition(await metrics.registry.metrics());
    expect(exposition.value("cronledger_jobs_total", { job_type: "known", status: "started" })).toBe(2);
    expect(exposition.value("cronledger_jobs_total", { job_type: "known", status: "done" })).toBe(1);
    expect(exposition.value("cronledger_jobs_total", { job_type: "known", status: "retry" })).toBe(1);
    // A retried attempt is not a failure for good: only the panicked ones count.
    expect(exposition.value("cronledger_failures_total", { job_type: "known" })).toBe(0);
    expect(exposition.value("cronledger_jobs_total", { job_type: OTHER_JOB_TYPE, status: "panicked" })).toBe(3);
    expect(exposition.value("cronledger_failures_total", { job_type: OTHER_JOB_TYPE })).toBe(3);
    expect(exposition.samples.some((sample) => sample.labels.job_type?.startsWith("ghost"))).toBe(false);
    expect(exposition.value("cronledger_job_duration_seconds_count", { job_type: "known" })).toBe(2);
    expect(exposition.value("cronledger_schedule_slots_total", { outcome: "enqueued" })).toBe(2);
    expect(exposition.value("cronledger_schedule_slots_total", { outcome: "lost_race" })).toBe(1);
    expect(exposition.value("cronledger_schedule_slots_total", { outcome: "quarantined" })).toBe(1);
    expect(exposition.value("cronledger_tick_duration_seconds_count")).toBe(1);
    expect(exposition.value("cronledger_prune_rows_removed_total", { table: "jobs" })).toBe(7);
    expect(exposition.value("cronledger_init_failure")).toBe(1);

    // Attempts are counted between scrapes and taken in by the next one: nothing is counted twice or lost.
    const again = parseExposition(await metrics.registry.metrics());
    expect(again.value("cronledger_jobs_total", { job_type: "known", status: "started" })).toBe(2);
    hooks.jobStarted?.({ jobId: 4, jobName: "known", attempt: 1 });
    const later = parseExposition(await metrics.registry.metrics());
    expect(later.value("cronledger_jobs_total", { job_type: "known", status: "started" })).toBe(3);
    expect(later.value("cronledger_jobs_total", { job_type: "known", status: "done" })).toBe(1);
  });

  it("registers into a user's registry and shares it between ledgers", async () => {
    const registry = new Registry();
    const first = createMetrics({ registry, jobNames: ["a"] });
    const second = createMetrics({ registry, jobNames: ["b"] });
    expect(first.registry).toBe(registry);
    first.hooks.jobStarted?.({ jobId: 1, jobName: "a", attempt: 1 });
    second.hooks.jobStarted?.({ jobId: 2, jobName: "b", attempt: 1 });
    const exposition = parseExposition(await registry.metrics());
    expect(exposition.value("cronledger_jobs_total", { status: "started" })).toBe(2);
  });
});

describe("cronledger_init_failure", () => {
  it("is 1 after migrate() fails and 0 again once it succeeds", async () => {
    const broken = createCronledger({ database: { url: withDatabase(serverUrl(), "cl_test_does_not_exist"), poolSize: 2 }, logger: silentLogger });
    try {
      await expect(broken.migrate()).rejects.toThrow();
      expect(parseExposition((await broken.metrics?.registry.metrics()) ?? "").value("cronledger_init_failure")).toBe(1);
    } finally {
      await broken.close();
    }
    const database = await createTestDatabase(import.meta.url);
    const working = createCronledger({ database: { url: database.url, poolSize: 2 }, logger: silentLogger, metrics: { registry: new Registry() } });
    try {
      working.events.initFailure(true);
      await working.migrate();
      expect(parseExposition((await working.metrics?.registry.metrics()) ?? "").value("cronledger_init_failure")).toBe(0);
    } finally {
      await working.close();
      await database.drop();
    }
  });

  it("can be turned off", async () => {
    const ledger = createCronledger({ database: withDatabase(serverUrl(), "cl_test_never_opened"), logger: silentLogger, metrics: false });
    expect(ledger.metrics).toBeNull();
    await ledger.close();
  });
});

describe("cronledger_failures_total", () => {
  it("counts every failure ticket: a panicked job and the jobs the prune chore fails as unregistered", async () => {
    const database = await createTestDatabase(import.meta.url);
    const broken = defineJob({ name: "metrics.broken", retry: "maintenance", run: () => Promise.reject(new Error("boom")) });
    const removed = defineJob({ name: "metrics.removed", run: () => {} });
    // An older version of the app enqueued `metrics.removed`; this one no longer has it.
    const older = createCronledger({ database: { url: database.url, poolSize: 2 }, jobs: [removed], logger: silentLogger, metrics: false });
    const ledger = createCronledger({
      database: { url: database.url, poolSize: 2 },
      jobs: [broken],
      logger: silentLogger,
      metrics: { registry: new Registry() },
      chores: { failUnregisteredAfter: "1h" },
    });
    try {
      await ledger.migrate();
      await older.enqueue(removed);
      await older.enqueue(removed);
      await ledger.enqueue(broken);
      expect(await ledger.work({ once: true })).toMatchObject({ failed: 1 });
      expect(await ledger.prune({ now: new Date(Date.now() + 2 * 3_600_000) })).toMatchObject({ failedUnregistered: 2 });
      const tickets = (await ledger.failures()).failures;
      expect(tickets).toHaveLength(3);
      const exposition = parseExposition((await ledger.metrics?.registry.metrics()) ?? "");
      expect(exposition.value("cronledger_failures_total", { job_type: "metrics.broken" })).toBe(1);
      // Not a job of this process: one label value for every unknown name.
      expect(exposition.value("cronledger_failures_total", { job_type: OTHER_JOB_TYPE })).toBe(2);
      const total = exposition.samples.filter((sample) => sample.name === "cronledger_failures_total").reduce((sum, sample) => sum + sample.value, 0);
      expect(total).toBe(tickets.length);
    } finally {
      await older.close();
      await ledger.close();
      await database.drop();
    }
  });
});

import { sql } from "drizzle-orm";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { completeJobs } from "../src/db/sql/completions.js";
import { claimJobs } from "../src/db/sql/jobs.js";
import { InvalidArgumentError, JobNotCancellableError, JobNotFoundError, NonRetryableError } from "../src/errors.js";
import { defineJob, skip } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { defineSchedule } from "../src/schedule/define-schedule.js";
import type { EntryStatus } from "../src/status/model.js";
import { createTestDatabase, serverUrl, useTestDatabase } from "./support/database.js";
import { withDatabase } from "./support/postgres-url.js";
import { parseExposition } from "./support/prometheus.js";

const MINUTE = 60_000;
const T0 = new Date("2026-03-02T10:00:30.000Z");
const at = (offsetMs: number) => new Date(T0.getTime() + offsetMs);

const ping = defineJob({ name: "health.ping", retry: "maintenance", run: () => undefined });
const broken = defineJob({
  name: "health.broken",
  retry: "maintenance",
  run: () => {
    throw new NonRetryableError("upstream refused the report");
  },
});
const flaky = defineJob({
  name: "health.flaky",
  retry: { maxAttempts: 4, baseMs: 30_000, capMs: 30_000, jitter: 0 },
  run: () => {
    throw new Error("upstream timed out");
  },
});
const daily = defineJob({ name: "health.daily", run: () => skip("nothing today") });
/** Its queue is served by no worker of this test: its jobs wait. */
const orphan = defineJob({ name: "health.orphan", queue: "reports", run: () => undefined });
const entity = defineJob({ name: "health.entity", retry: "entity", run: () => {
  throw new Error("entity sync failed");
} });

const SCHEDULE = defineSchedule([
  { job: ping, cron: "* * * * *" },
  { job: broken, cron: "*/5 * * * *" },
  { job: flaky, cron: "*/5 * * * *" },
  { job: daily, cron: "0 3 * * *" },
  { job: orphan, cron: "*/5 * * * *" },
]);

const database = useTestDatabase(import.meta.url);
let ledger: Cronledger;

const byJob = (entries: readonly EntryStatus[], name: string) => entries.find((entry) => entry.jobName === name);
const drain = (now: Date) => ledger.work({ once: true, queues: ["default"], clock: () => now, random: () => 0.5 });

beforeAll(async () => {
  ledger = createCronledger({ database: { url: database.url, poolSize: 4 }, jobs: [ping, broken, flaky, daily, orphan, entity], schedule: SCHEDULE, logger: silentLogger });
  await ledger.migrate();
  // 10:00:30: every entry's ledger row is created; 10:05:00: the every-five-minute entries fire; the workers run what is due.
  await ledger.tick({ now: T0 });
  await ledger.tick({ now: at(4.5 * MINUTE) });
  await drain(at(4.5 * MINUTE + 1_000));
});

afterAll(async () => {
  await ledger?.close();
});

describe("entry health in the status", () => {
  it("shows an every-minute entry late within one period of a missed slot, and says why", async () => {
    // The ticker handled 10:05 and then stopped: 10:06 is missed.
    const justMissed = byJob((await ledger.status({ now: at(5.5 * MINUTE + 29_000) })).entries, ping.name);
    expect(justMissed?.state).not.toBe("late");
    const late = byJob((await ledger.status({ now: at(5.5 * MINUTE + 30_000) })).entries, ping.name);
    expect(late?.state).toBe("late");
    expect(late?.reason).toContain("slot 2026-03-02T10:06:00.000Z is 30s past its fire time");
    // Two periods without a ticker: still late, and the other entries (their slots not due yet) are not.
    const twoPeriods = await ledger.status({ now: at(7.5 * MINUTE) });
    expect(byJob(twoPeriods.entries, ping.name)?.state).toBe("late");
    expect(byJob(twoPeriods.entries, daily.name)?.state).toBe("never_fired");
  });

  it("shows failing, retrying, never_fired and waiting_for_worker from the entries' latest runs and ledger rows", async () => {
    const status = await ledger.status({ now: at(5 * MINUTE) });
    const failing = byJob(status.entries, broken.name);
    expect(failing?.state).toBe("failing");
    expect(failing?.reason).toContain("failed for good after 1/1 attempts: NonRetryableError");
    expect(failing?.latestRun).toMatchObject({ kind: "failed", attempts: 1, maxAttempts: 1 });

    const retrying = byJob(status.entries, flaky.name);
    expect(retrying?.state).toBe("retrying");
    expect(retrying?.reason).toContain("attempt 1/4");
    expect(retrying?.reason).toContain("the next attempt is due at 2026-03-02T10:05:31.000Z");

    const never = byJob(status.entries, daily.name);
    expect(never?.state).toBe("never_fired");
    expect(never?.lastEnqueuedSlot).toBeNull();
    expect(never?.createdAt).toBeInstanceOf(Date);
    expect(never?.reason).toContain("its next slot is 2026-03-03T03:00:00.000Z");

    // Ready since 10:05:00 and unclaimed: not yet past the tolerance (2.5 min for a five-minute entry), then waiting.
    expect(byJob(status.entries, orphan.name)?.state).toBe("ok");
    const waiting = byJob((await ledger.status({ now: at(7 * MINUTE) })).entries, orphan.name);
    expect(waiting?.state).toBe("waiting_for_worker");
    expect(waiting?.reason).toContain("no worker has claimed it");
  });

  it("shows an entry whose slot could not be enqueued as quarantined, before anything else", async () => {
    const other = await createTestDatabase(`${import.meta.url}-quarantine`);
    const isolated = createCronledger({ database: { url: other.url, poolSize: 2 }, jobs: [ping], schedule: [{ job: ping, cron: "* * * * *" }], logger: silentLogger });
    try {
      await isolated.migrate();
      await query(
        isolated.database.db,
        sql.raw(`create function public.reject_ping() returns trigger language plpgsql as $$ begin raise exception 'ping backend is read-only'; end $$;
          create trigger reject_ping before insert on cronledger.job_queue for each row execute function public.reject_ping()`),
      );
      await isolated.tick({ now: T0 });
      const report = await isolated.tick({ now: at(MINUTE) });
      expect(report.quarantined).toHaveLength(1);
      const [entry] = (await isolated.status({ now: at(5 * MINUTE) })).entries;
      expect(entry?.state).toBe("quarantined");
      expect(entry?.reason).toContain("ping backend is read-only");
    } finally {
      await isolated.close();
      await other.drop();
    }
  });
});

describe("operator actions", () => {
  it("cancels a queued job and a retrying one; they end cancelled and no worker claims them", async () => {
    const queued = await ledger.enqueue(ping, {}, { runAt: new Date("2099-01-01T00:00:00Z") });
    const cancelled = await ledger.cancelJob(queued.id);
    expect(cancelled).toMatchObject({ id: queued.id, jobName: ping.name, was: "queued", cancelled: true });
    expect(await ledger.cancelJob(queued.id)).toMatchObject({ was: "cancelled", cancelled: false });

    const [retryingJob] = await ledger.retrying();
    expect(retryingJob).toMatchObject({ jobType: flaky.name, attempts: 1, maxAttempts: 4 });
    expect(retryingJob?.lastError).toContain("upstream timed out");
    const stopped = await ledger.cancelJob(retryingJob?.id ?? 0);
    expect(stopped).toMatchObject({ was: "retrying", cancelled: true });

    // Past the retry's due time, a worker finds nothing of it to run.
    const summary = await drain(at(30 * MINUTE));
    expect(summary.claimed).toBe(0);
    const rows = await query<{ status: string; finished: boolean }>(
      ledger.database.db,
      sql`select status, finished_at is not null as finished from cronledger.jobs where id in (${queued.id}, ${retryingJob?.id ?? 0})`,
    );
    expect(rows).toEqual([
      { status: "cancelled", finished: true },
      { status: "cancelled", finished: true },
    ]);
    expect(byJob((await ledger.status({ now: at(5 * MINUTE) })).entries, flaky.name)?.latestRun?.kind).toBe("cancelled");
  });

  it("asks a running job to stop (once: the first request stands); a retry it asks for then ends it cancelled; refuses a finished job", async () => {
    const job = await ledger.enqueue(ping, {}, { queue: "hold" });
    const [claimed] = await claimJobs(ledger.database.db, { workerId: "test-holder", queues: ["hold"], jobNames: [ping.name], limit: 1 });
    expect(claimed?.id).toBe(job.id);
    const asked = await ledger.cancelJob(job.id, { by: "test", reason: "runaway" });
    expect(asked).toMatchObject({ was: "running", cancelled: true, stop: { requestedBy: "test", reason: "runaway", graceMs: 30_000 } });
    const again = await ledger.cancelJob(job.id);
    expect(again).toMatchObject({ was: "stopping", cancelled: false, stop: { requestedBy: "test", reason: "runaway" } });
    // Its worker (here, a hand-written completion) asks for a retry: a job asked to stop is never queued again.
    await completeJobs(ledger.database.db, "test-holder", [{ id: job.id, attempt: claimed?.attempts ?? 1, status: "queued", outcome: null, error: "aborted", delayMs: 0, returned: false }]);
    const [ended] = await query<{ status: string; attempts: number }>(ledger.database.db, sql`select status, attempts from cronledger.jobs where id = ${job.id}`);
    expect(ended).toEqual({ status: "cancelled", attempts: 1 });
    await expect(ledger.cancelJob(job.id)).resolves.toMatchObject({ was: "cancelled", cancelled: false });
    const [failed] = (await ledger.failures({ jobType: broken.name })).failures;
    await expect(ledger.cancelJob(failed?.id ?? 0)).rejects.toBeInstanceOf(JobNotCancellableError);
    await expect(ledger.cancelJob(failed?.id ?? 0)).rejects.toThrow(/is failed/);
    await expect(ledger.cancelJob(987_654_321)).rejects.toBeInstanceOf(JobNotFoundError);
  });

  it("overrides the retry policy per enqueue, and shows the override with the failure", async () => {
    // The one-shot "keepalive" of an entity-shaped job: probe's 3 attempts and 1 s delays instead of entity's 5 and 30 s.
    const probe = await ledger.enqueue(entity, {}, { retry: "probe", queue: "keepalive" });
    const once = await ledger.enqueue(entity, {}, { retry: { maxAttempts: 1 }, queue: "keepalive" });
    const attempts = await query<{ id: number; max_attempts: number }>(
      ledger.database.db,
      sql`select id::float8 as id, max_attempts from cronledger.jobs where id in (${probe.id}, ${once.id}) order by id`,
    );
    expect(attempts).toEqual([
      { id: probe.id, max_attempts: 3 },
      { id: once.id, max_attempts: 1 },
    ]);
    // Jobs enqueued now are due by the database clock: the worker's clock is a minute ahead of it.
    const now = new Date(Date.now() + MINUTE);
    await ledger.work({ once: true, queues: ["keepalive"], clock: () => now, random: () => 0.5 });
    const [retry] = await query<{ status: string; run_at_ms: number }>(
      ledger.database.db,
      sql`select status, (extract(epoch from run_at) * 1000)::float8 as run_at_ms from cronledger.jobs where id = ${probe.id}`,
    );
    // probe's first delay is 1 s (jitter neutral at random 0.5); entity's would have been 30 s.
    expect(retry).toEqual({ status: "queued", run_at_ms: now.getTime() + 1_000 });
    const tickets = (await ledger.failures({ jobType: entity.name })).failures;
    expect(tickets.map((ticket) => [ticket.id, ticket.attempts, ticket.maxAttempts, ticket.retryOverride])).toEqual([[once.id, 1, 1, "1 attempt"]]);
    expect((await ledger.retrying()).find((job) => job.id === probe.id)?.retryOverride).toBe("probe");

    await expect(ledger.enqueue(entity, {}, { retry: { maxAttempts: 2, delayMs: () => 5 } as never })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(ledger.enqueue(entity, {}, { retry: "sometimes" as never })).rejects.toThrow(/retry: must be "probe", "entity", "maintenance"/);
    await expect(ledger.enqueue(entity, {}, { retry: { maxAttempts: 0 } })).rejects.toThrow(/maxAttempts: must be a positive integer/);
    const [count] = await query<{ n: number }>(ledger.database.db, sql`select count(*)::int as n from cronledger.jobs where job_name = ${entity.name}`);
    expect(count?.n).toBe(2);
  });

  it("marks a retried failure with the job it became", async () => {
    const [ticket] = (await ledger.failures({ jobType: broken.name })).failures;
    expect(ticket?.retriedAs).toBeNull();
    const retried = await ledger.retryJob(ticket?.id ?? 0);
    const [after] = (await ledger.failures({ jobType: broken.name })).failures;
    expect(after?.retriedAs).toEqual({ id: retried.id, status: "queued" });
  });
});

describe("metrics an operator alerts on", () => {
  it("count terminal failures, the reaper's included, entry states and ready jobs per queue", async () => {
    const other = await createTestDatabase(`${import.meta.url}-metrics`);
    const registry = new Registry();
    const observed = createCronledger({
      database: { url: other.url, poolSize: 3 },
      jobs: [ping, broken, flaky, orphan],
      schedule: defineSchedule([
        { job: ping, cron: "* * * * *" },
        { job: broken, cron: "*/5 * * * *" },
        { job: orphan, cron: "*/5 * * * *" },
      ]),
      metrics: { registry },
      logger: silentLogger,
    });
    try {
      await observed.migrate();
      const scrape = async () => parseExposition(await registry.metrics());
      const before = await scrape();
      expect(before.value("cronledger_job_duration_seconds_count", { job_type: ping.name })).toBe(0);
      expect(before.samples.some((sample) => sample.name === "cronledger_job_duration_seconds_bucket" && sample.labels.job_type === broken.name)).toBe(true);

      // The schedule fires at real database time: create the rows, then move them back so 5 minutes of slots are due.
      // (A second instance ticks: the first remembers the ledger values it saw, as a running replica does.)
      await observed.tick();
      await query(observed.database.db, sql`update cronledger.schedule_state set last_enqueued_slot = last_enqueued_slot - interval '5 minutes'`);
      const replica = createCronledger({ database: observed.database, jobs: [ping, broken, flaky, orphan], schedule: observed.entries.map((entry) => ({ job: entry.job, cron: entry.cron.source })), metrics: false, logger: silentLogger });
      await replica.tick();
      await replica.close();
      // One of each: a terminal failure by a worker, a retry (not a failure for good), and a job whose worker died on its last attempt.
      await observed.enqueue(flaky, {});
      const crashed = await observed.enqueue(ping, {}, { queue: "crashy" });
      await claimJobs(observed.database.db, { workerId: "dead-worker", queues: ["crashy"], jobNames: [ping.name], limit: 1 });
      const summary = await observed.work({ once: true, queues: ["default"] });
      expect(summary.failed).toBe(1);
      expect(summary.retried).toBe(1);
      const reaped = await observed.reap({ now: new Date(Date.now() + 10 * MINUTE) });
      expect(reaped).toEqual({ requeued: 0, failed: 1 });

      const metrics = await scrape();
      const [failedRows] = await query<{ n: number }>(observed.database.db, sql`select count(*)::int as n from cronledger.jobs where status = 'failed'`);
      expect(failedRows?.n).toBe(2);
      expect(metrics.value("cronledger_failures_total")).toBe(2);
      expect(metrics.value("cronledger_failures_total", { job_type: broken.name })).toBe(1);
      expect(metrics.value("cronledger_failures_total", { job_type: ping.name })).toBe(1);
      expect(metrics.value("cronledger_failures_total", { job_type: flaky.name })).toBe(0);
      expect(metrics.value("cronledger_jobs_reaped_total", { outcome: "failed" })).toBe(1);
      expect(metrics.value("cronledger_jobs_reaped_total", { outcome: "requeued" })).toBe(0);
      expect(metrics.value("cronledger_job_duration_seconds_count", { job_type: ping.name })).toBe(1);

      // Entry states: the gauge agrees with the status, whatever the states are.
      const status = await observed.status();
      for (const state of ["ok", "late", "failing", "waiting_for_worker", "never_fired", "invalid"]) {
        const expected = state === "invalid" ? status.invalid.length : status.entries.filter((entry) => entry.state === state).length;
        expect(metrics.value("cronledger_schedule_entries", { state }), state).toBe(expected);
      }
      expect(metrics.value("cronledger_schedule_entries")).toBe(status.entries.length);
      expect(metrics.value("cronledger_schedule_entries", { state: "failing" })).toBe(1);

      // Ready jobs: the orphan's slot waits on "reports", nothing is ready on "default" any more.
      const ready = await query<{ queue: string; n: number; oldest_s: number }>(
        observed.database.db,
        sql`select queue, count(*)::int as n, extract(epoch from now() - min(run_at))::float8 as oldest_s
            from cronledger.jobs where status = 'queued' and run_at <= now() group by queue`,
      );
      const reports = ready.find((row) => row.queue === "reports");
      expect(reports?.n).toBeGreaterThanOrEqual(1);
      expect(metrics.value("cronledger_queue_ready_jobs", { queue: "reports" })).toBe(reports?.n);
      expect(metrics.value("cronledger_queue_ready_jobs", { queue: "default" })).toBe(ready.find((row) => row.queue === "default")?.n ?? 0);
      const age = metrics.value("cronledger_queue_oldest_ready_age_seconds", { queue: "reports" });
      expect(Math.abs(age - (reports?.oldest_s ?? 0))).toBeLessThan(5);
      expect(metrics.samples.filter((sample) => sample.name === "cronledger_queue_ready_jobs").map((sample) => sample.labels.queue).sort()).toEqual(
        ["cronledger", "default", "reports"].sort(),
      );
      void crashed;
    } finally {
      await observed.close();
      await other.drop();
    }
  });

  it("sets cronledger_init_failure when a process cannot start (no tables, no database), and clears it once it can", async () => {
    const empty = await createTestDatabase(`${import.meta.url}-init`);
    const registry = new Registry();
    const unmigrated = createCronledger({ database: { url: empty.url, poolSize: 2 }, jobs: [ping], metrics: { registry }, chores: false, logger: silentLogger });
    const refused = createCronledger({
      database: { url: withDatabase(serverUrl(), "x").replace(/:\d+\//, ":1/"), poolSize: 2 },
      jobs: [ping],
      metrics: { registry: new Registry() },
      chores: false,
      logger: silentLogger,
    });
    const initFailure = async (which: Cronledger) => parseExposition((await which.metrics?.registry.metrics()) ?? "").value("cronledger_init_failure");
    try {
      // start() checks the schema before anything runs, and refuses: the gauge says why the fleet is not working.
      await expect(unmigrated.start({ handleSignals: false, workers: false })).rejects.toMatchObject({ code: "migration_required" });
      await expect(refused.start({ handleSignals: false, workers: false })).rejects.toMatchObject({ code: "connection_refused" });
      expect(await initFailure(unmigrated)).toBe(1);
      expect(await initFailure(refused)).toBe(1);
      await unmigrated.migrate();
      expect(await initFailure(unmigrated)).toBe(0);
      await unmigrated.start({ handleSignals: false, workers: false });
      expect(await initFailure(unmigrated)).toBe(0);
    } finally {
      await unmigrated.close();
      await refused.close();
      await empty.drop();
    }
  });
});

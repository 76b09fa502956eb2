import { sql, type SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Cronledger, CronledgerOptions } from "../src/cronledger.js";
import { NonRetryableError } from "../src/errors.js";
import type { CronledgerHooks } from "../src/events.js";
import { defineJob, noop, skip, type JobContext, type JobDefinition } from "../src/jobs/define-job.js";
import { RETRY_CLASSES, type RetryClass } from "../src/jobs/retry.js";
import { CHORE_QUEUE, PRUNE_JOB, REAP_JOB } from "../src/runtime/chores.js";
import { insertFinishedJobs } from "./support/history.js";
import { BACKENDS, createTestStore, rows, type TestStore } from "./support/ledger.js";

interface JobStateRow {
  id: number;
  status: string;
  outcome: string | null;
  attempts: number;
  max_attempts: number;
  last_error: string | null;
  run_at_ms: number;
  locked_by: string | null;
}

async function jobState(ledger: Cronledger, id: number): Promise<JobStateRow> {
  const [row] = await rows<JobStateRow>(
    ledger,
    sql`select id::float8 as id, status, outcome, attempts, max_attempts, last_error, locked_by,
          (extract(epoch from run_at) * 1000)::float8 as run_at_ms
        from cronledger.jobs where id = ${id}`,
  );
  if (!row) throw new Error(`job ${id} not found`);
  return row;
}

async function databaseNowMs(ledger: Cronledger): Promise<number> {
  const [row] = await rows<{ ms: number }>(ledger, sql`select (extract(epoch from now()) * 1000)::float8 as ms`);
  return row?.ms ?? Date.now();
}

/** Workers in the registry that heartbeated within their lease. */
async function registeredWorkers(ledger: Cronledger): Promise<number> {
  const [row] = await rows<{ n: number }>(ledger, sql`select count(*)::int as n from cronledger.workers where lease_ms > 0 and heartbeat_at >= now() - lease_ms * interval '1 millisecond'`);
  return row?.n ?? 0;
}

/** Polls a condition; a deadline turns a hang into a failure. */
async function until(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A job that records every attempt and behaves as `behave` says. */
function recordingJob(name: string, options: { retry?: RetryClass; behave: (ctx: JobContext) => unknown; timeout?: number }) {
  const attempts: JobContext[] = [];
  const job = defineJob({
    name,
    retry: options.retry ?? "entity",
    ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
    run: async (_payload, ctx) => {
      attempts.push(ctx);
      return (await options.behave(ctx)) as undefined;
    },
  });
  return { job, attempts };
}

const fail = () => {
  throw new Error("downstream said no");
};

describe.each(BACKENDS)("worker on %s", (backend) => {
  let store: TestStore | undefined;
  const open = async (jobs: readonly JobDefinition[], extra: Omit<CronledgerOptions, "database" | "jobs"> = {}) => {
    store ??= await createTestStore(backend, `worker_${backend}`);
    return store.open({ jobs, chores: false, ...extra });
  };

  afterEach(async () => {
    await store?.dispose();
    store = undefined;
  });

  it.each(["probe", "entity"] as const)("retries a %s job that always fails exactly max_attempts times, each delay within the class's jittered bounds", async (retryClass) => {
    const { job, attempts } = recordingJob(`always-fails.${retryClass}`, { retry: retryClass, behave: fail });
    const finished: string[] = [];
    const hooks: CronledgerHooks = { jobFinished: (event) => finished.push(event.status) };
    const ledger = await open([job], { hooks });
    const { id } = await ledger.enqueue(job);
    const policy = RETRY_CLASSES[retryClass];

    // An injected clock stands in for the minutes of backoff: each pass runs at the time the retry is due.
    let clock = Math.floor(await databaseNowMs(ledger)) + 1_000;
    const delays: number[] = [];
    for (let pass = 0; pass < 10; pass += 1) {
      const summary = await ledger.work({ once: true, clock: () => new Date(clock) });
      expect(summary.claimed).toBe(1);
      const state = await jobState(ledger, id);
      if (state.status === "failed") break;
      expect(state.status).toBe("queued");
      delays.push(state.run_at_ms - clock);
      clock = state.run_at_ms;
    }

    expect(attempts).toHaveLength(policy.maxAttempts);
    expect(attempts.map((ctx) => ctx.attempt)).toEqual(Array.from({ length: policy.maxAttempts }, (_, i) => i + 1));
    expect(delays).toHaveLength(policy.maxAttempts - 1);
    delays.forEach((delay, index) => {
      const nominal = Math.min(policy.capMs, policy.baseMs * 2 ** index);
      expect(delay).toBeGreaterThanOrEqual(Math.floor(nominal * 0.9));
      expect(delay).toBeLessThanOrEqual(Math.ceil(nominal * 1.1));
    });
    const final = await jobState(ledger, id);
    // A finished job keeps the worker of its last attempt.
    expect(final).toMatchObject({ status: "failed", attempts: policy.maxAttempts, max_attempts: policy.maxAttempts, locked_by: expect.stringMatching(/:\d+:/) });
    expect(final.last_error).toContain("downstream said no");
    expect(finished).toEqual([...Array(policy.maxAttempts - 1).fill("retry"), "panicked"]);
  });

  it("uses the injected random for jitter and honours custom policies", async () => {
    const attempts: number[] = [];
    const job = defineJob({
      name: "custom-policy",
      retry: { maxAttempts: 3, delayMs: (attempt) => attempt * 7_000 },
      run: (_p, ctx) => {
        attempts.push(ctx.attempt);
        throw new Error("no");
      },
    });
    const ledger = await open([job]);
    const { id } = await ledger.enqueue(job);
    let clock = Math.floor(await databaseNowMs(ledger)) + 1_000;
    const delays: number[] = [];
    for (let pass = 0; pass < 3; pass += 1) {
      await ledger.work({ once: true, clock: () => new Date(clock), random: () => 1 });
      const state = await jobState(ledger, id);
      if (state.status !== "queued") break;
      delays.push(state.run_at_ms - clock);
      clock = state.run_at_ms;
    }
    expect(delays).toEqual([7_000, 14_000]);
    expect(attempts).toEqual([1, 2, 3]);
    expect((await jobState(ledger, id)).status).toBe("failed");
  });

  it("fails a maintenance job after its one attempt, and a NonRetryableError at once", async () => {
    const maintenance = recordingJob("maintenance.fails", { retry: "maintenance", behave: fail });
    const fatal = recordingJob("entity.fatal", {
      behave: () => {
        throw new NonRetryableError("the account is gone");
      },
    });
    const ledger = await open([maintenance.job, fatal.job]);
    const a = await ledger.enqueue(maintenance.job);
    const b = await ledger.enqueue(fatal.job);
    const summary = await ledger.work({ once: true });
    expect(summary).toMatchObject({ claimed: 2, failed: 2, retried: 0 });
    expect(maintenance.attempts).toHaveLength(1);
    expect(fatal.attempts).toHaveLength(1);
    expect(await jobState(ledger, a.id)).toMatchObject({ status: "failed", attempts: 1, max_attempts: 1 });
    const fatalRow = await jobState(ledger, b.id);
    expect(fatalRow).toMatchObject({ status: "failed", attempts: 1, max_attempts: 5 });
    expect(fatalRow.last_error).toContain("NonRetryableError [non_retryable]: the account is gone");
  });

  it("ends skip and noop outcomes as succeeded with their outcome, without retrying", async () => {
    const skipping = recordingJob("outcome.skip", { behave: () => skip("nothing to send") });
    const noopping = recordingJob("outcome.noop", { behave: () => noop() });
    const plain = recordingJob("outcome.plain", { behave: () => undefined });
    const statuses: string[] = [];
    const ledger = await open([skipping.job, noopping.job, plain.job], { hooks: { jobFinished: (e) => statuses.push(e.status) } });
    const ids = await ledger.enqueueMany([{ job: skipping.job }, { job: noopping.job }, { job: plain.job }]);
    const summary = await ledger.work({ once: true });
    expect(summary).toMatchObject({ claimed: 3, skipped: 1, noop: 1, succeeded: 1, retried: 0, failed: 0 });
    const states = await Promise.all(ids.map((job) => jobState(ledger, job.id)));
    expect(states.map((s) => [s.status, s.outcome, s.attempts])).toEqual([
      ["succeeded", "skip", 1],
      ["succeeded", "noop", 1],
      ["succeeded", null, 1],
    ]);
    expect(statuses.sort()).toEqual(["done", "noop", "skip"]);
    expect(skipping.attempts.length + noopping.attempts.length).toBe(2);
  });

  it("leaves a job it does not know queued, shown as waiting for a worker that knows it, which then runs it", async () => {
    const ghost = defineJob({ name: "reports.ghost", run: () => {} });
    const known = recordingJob("reports.known", { behave: () => undefined });
    const producer = await open([ghost, known.job]);
    const { id } = await producer.enqueue(ghost);
    await producer.enqueue(known.job);
    const worker = await open([known.job]);
    expect(await worker.work({ once: true })).toMatchObject({ claimed: 1, failed: 0, succeeded: 1 });
    expect(await jobState(worker, id)).toMatchObject({ status: "queued", attempts: 0, last_error: null });

    // While a worker that does not know it runs, the job is counted as waiting for one that does.
    const running = worker.work({ pollInterval: "50ms" });
    await until(async () => (await registeredWorkers(worker)) === 1);
    const waiting = await worker.waitingForWorker();
    expect(waiting.map((row) => [row.jobName, row.count])).toEqual([["reports.ghost", 1]]);
    expect((await worker.status()).waitingForWorker.map((row) => row.jobName)).toEqual(["reports.ghost"]);
    await worker.stop();
    await running;
    expect(await registeredWorkers(worker)).toBe(0);

    expect(await producer.work({ once: true })).toMatchObject({ claimed: 1, succeeded: 1 });
    expect(await jobState(producer, id)).toMatchObject({ status: "succeeded", attempts: 1 });
    expect(await producer.waitingForWorker()).toEqual([]);
  });

  it("fails with JobNotRegisteredError only a job that no live worker has known for longer than chores.failUnregisteredAfter", async () => {
    const ghost = defineJob({ name: "reports.gone", run: () => {} });
    const producer = await open([ghost]);
    const { id } = await producer.enqueue(ghost);
    const worker = await open([], { chores: { failUnregisteredAfter: "1h" } });
    const now = await databaseNowMs(worker);
    expect(await worker.prune({ now: new Date(now + 59 * 60_000) })).toMatchObject({ failedUnregistered: 0 });
    expect(await jobState(worker, id)).toMatchObject({ status: "queued" });
    expect(await worker.prune({ now: new Date(now + 61 * 60_000) })).toMatchObject({ failedUnregistered: 1 });
    const row = await jobState(worker, id);
    expect(row).toMatchObject({ status: "failed", attempts: 0 });
    expect(row.last_error).toContain("JobNotRegisteredError");
    expect(row.last_error).toContain('"reports.gone"');
    expect(row.last_error).toContain("1 h");
  });

  it("never fails a registered job as unregistered, however long all its workers have been down", async () => {
    const report = recordingJob("reports.registered", { behave: () => undefined });
    const other = defineJob({ name: "reports.elsewhere", run: () => {} });
    // Workers that registered both names ran, then all stopped.
    const fleet = await open([report.job, other], { chores: { failUnregisteredAfter: "1h" } });
    const running = fleet.work({ pollInterval: "50ms" });
    await until(async () => (await registeredWorkers(fleet)) === 1);
    await fleet.stop();
    await running;
    expect(await registeredWorkers(fleet)).toBe(0);
    const { id: registeredId } = await fleet.enqueue(report.job);
    const { id: elsewhereId } = await fleet.enqueue(other);

    // The config of the process running the prune chore registers the job: two hours on, with no worker live, it still waits.
    const now = await databaseNowMs(fleet);
    expect(await fleet.prune({ now: new Date(now + 2 * 3_600_000) })).toMatchObject({ failedUnregistered: 0 });
    expect(await jobState(fleet, registeredId)).toMatchObject({ status: "queued", attempts: 0 });
    expect(await jobState(fleet, elsewhereId)).toMatchObject({ status: "queued", attempts: 0 });

    // A process whose config lacks the job: it was registered within the hour by a worker now stopped, so it waits too.
    const pruner = await open([], { chores: { failUnregisteredAfter: "1h" } });
    await rows(pruner, sql`update cronledger.job_queue set run_at = now() - interval '2 hours' where id = ${elsewhereId}`);
    expect(await pruner.prune()).toMatchObject({ failedUnregistered: 0 });
    expect(await jobState(pruner, elsewhereId)).toMatchObject({ status: "queued" });
    // The process that defines them still never fails them.
    expect(await fleet.prune({ now: new Date(now + 2 * 3_600_000) })).toMatchObject({ failedUnregistered: 0 });
    // Only to a process that defines neither name, once no worker has registered them for the whole hour, are they jobs
    // of removed code, and failed.
    expect(await pruner.prune({ now: new Date(now + 2 * 3_600_000) })).toMatchObject({ failedUnregistered: 2 });
    expect(await jobState(pruner, elsewhereId)).toMatchObject({ status: "failed" });
  });

  it("fails a stored payload that no longer parses terminally with a clear message, and passes parsed payloads", async () => {
    const seen: unknown[] = [];
    const typed = defineJob({
      name: "typed.payload",
      payload: z.object({ count: z.coerce.number() }),
      run: (payload) => {
        seen.push(payload);
      },
    });
    const ledger = await open([typed]);
    await ledger.enqueue(typed, { count: 3 });
    const [bad] = await rows<{ id: number }>(
      ledger,
      sql`insert into cronledger.job_queue (job_name, payload, max_attempts) values ('typed.payload', '{"count": "many"}', 5) returning id::float8 as id`,
    );
    const summary = await ledger.work({ once: true });
    expect(summary).toMatchObject({ succeeded: 1, failed: 1, retried: 0 });
    expect(seen).toEqual([{ count: 3 }]);
    const row = await jobState(ledger, bad?.id ?? -1);
    expect(row).toMatchObject({ status: "failed", attempts: 1 });
    expect(row.last_error).toContain("InvalidStoredJobError [invalid_stored_input]");
    expect(row.last_error).toContain("count");
  });

  it("aborts the signal at the timeout and counts it as a failed attempt", async () => {
    let abortedWith: unknown;
    const slow = recordingJob("slow.job", {
      retry: "probe",
      timeout: 50,
      behave: (ctx) =>
        new Promise((_, reject) =>
          ctx.signal.addEventListener("abort", () => {
            abortedWith = ctx.signal.reason;
            reject(new Error("aborted"));
          }),
        ),
    });
    const ledger = await open([slow.job]);
    const { id } = await ledger.enqueue(slow.job);
    const summary = await ledger.work({ once: true });
    expect(summary.retried).toBe(1);
    expect((abortedWith as Error).name).toBe("JobTimeoutError");
    const row = await jobState(ledger, id);
    expect(row).toMatchObject({ status: "queued", attempts: 1 });
    expect(row.last_error).toContain("JobTimeoutError [job_timeout]");
  });

  it("ends at the timeout a handler that never looks at its signal, whose signal then reads as aborted", async () => {
    let resume: () => void = () => {};
    const stuck = recordingJob("stuck.job", {
      retry: "maintenance",
      timeout: 50,
      behave: () => new Promise<void>((resolve) => (resume = resolve)),
    });
    const ledger = await open([stuck.job]);
    const { id } = await ledger.enqueue(stuck.job);
    const summary = await ledger.work({ once: true });
    resume();
    expect(summary.failed).toBe(1);
    expect(stuck.attempts[0]?.signal.aborted).toBe(true);
    expect((stuck.attempts[0]?.signal.reason as Error).name).toBe("JobTimeoutError");
    expect((await jobState(ledger, id)).last_error).toContain("JobTimeoutError [job_timeout]");
  });

  it("sizes the claim that follows its first finished job by that job, not by the rate it knew before", async () => {
    const quick = defineJob({ name: "quick.job", run: () => {} });
    const ledger = await open([quick]);
    await ledger.enqueueMany(Array.from({ length: 300 }, () => ({ job: quick })));
    // The rows each claim asks for, read from the claim statements the worker sends.
    const limits: number[] = [];
    const db = ledger.database.db;
    const execute = db.execute.bind(db);
    const dialect = new PgDialect();
    db.execute = ((statement: SQL) => {
      const query = dialect.sqlToQuery(statement);
      if (/^update "cronledger"."job_queue" as j\s+set "status" = 'running'/.test(query.sql.trim())) limits.push(Number(query.params[3]));
      return execute(statement);
    }) as typeof db.execute;
    const summary = await ledger.work({ once: true, concurrency: 10 });
    expect(summary.succeeded).toBe(300);
    // The first claim knows no job's duration: the free slots only. The next one, sent once a job has
    // finished, prefetches on top of them (it used to ask for one row, sized by the first claim's rate of 0).
    // How much on top depends on how long the first no-op job measured: over 100 rows on a quiet machine
    // (under 5 ms), fewer when a loaded CI machine stretches it (one run asked for under 100); more than the
    // free slots alone as long as it measured under about 50 ms (src/jobs/claim-size.ts).
    expect(limits[0]).toBe(10);
    expect(limits[1]).toBeGreaterThan(10);
  });

  it("gives handlers their context and runs lower priority values first", async () => {
    const order: number[] = [];
    const contexts: JobContext[] = [];
    const job = defineJob({
      name: "ordered",
      payload: z.object({ n: z.number() }),
      run: (payload, ctx) => {
        order.push(payload.n);
        contexts.push(ctx);
      },
    });
    const ledger = await open([job]);
    await ledger.enqueueMany([
      { job, payload: { n: 3 }, options: { priority: 5 } },
      { job, payload: { n: 1 }, options: { priority: -1 } },
      { job, payload: { n: 2 }, options: { priority: 0 } },
    ]);
    await ledger.work({ once: true, concurrency: 1 });
    expect(order).toEqual([1, 2, 3]);
    expect(contexts[0]).toMatchObject({ jobName: "ordered", attempt: 1, maxAttempts: 5, scheduledFor: null });
    expect(typeof contexts[0]?.jobId).toBe("number");
    expect(contexts[0]?.signal.aborted).toBe(false);
  });

  it("stores errors redacted", async () => {
    const leaky = recordingJob("leaky", {
      retry: "maintenance",
      behave: () => {
        throw new Error('request failed: Authorization: Bearer abc123 {"password": "hunter2"}');
      },
    });
    const ledger = await open([leaky.job]);
    const { id } = await ledger.enqueue(leaky.job);
    await ledger.work({ once: true });
    const row = await jobState(ledger, id);
    expect(row.last_error).not.toContain("abc123");
    expect(row.last_error).not.toContain("hunter2");
  });

  it("reaps a job whose heartbeat went stale: back to the queue with attempts left, failed without", async () => {
    const job = defineJob({ name: "reaped", run: () => {} });
    const once = defineJob({ name: "reaped.once", retry: "maintenance", run: () => {} });
    const ledger = await open([job, once], { lease: "30s" });
    const a = await ledger.enqueue(job);
    const b = await ledger.enqueue(once);
    // What a worker that died mid-job leaves behind.
    await rows(ledger, sql`update cronledger.job_queue set status = 'running', attempts = 1, locked_by = 'dead-host:1:abc', heartbeat_at = now() - interval '10 seconds'`);
    expect(await ledger.reap()).toEqual({ requeued: 0, failed: 0 });
    // Well past the lease, also as counted from the server's own start (an embedded PGlite may have started a moment ago).
    const later = new Date((await databaseNowMs(ledger)) + 10 * 60_000);
    expect(await ledger.reap({ now: later })).toEqual({ requeued: 1, failed: 1 });
    const requeued = await jobState(ledger, a.id);
    // The worker stays named until another attempt claims the job: its late result would still be written (completeJobs).
    expect(requeued).toMatchObject({ status: "queued", attempts: 1, locked_by: "dead-host:1:abc" });
    expect(requeued.last_error).toContain("dead-host:1:abc stopped heartbeating");
    const failed = await jobState(ledger, b.id);
    expect(failed.status).toBe("failed");
    expect(failed.last_error).toContain("no attempts left");
    expect(await ledger.work({ once: true })).toMatchObject({ succeeded: 1 });
  });

  it("prunes the days of finished jobs past their retention, each status on its own clock", async () => {
    const job = defineJob({ name: "old.job", run: () => {} });
    const pruned: number[] = [];
    const ledger = await open([job], {
      chores: { retention: { succeeded: "1d", failed: "3d", batchSize: 2 } },
      hooks: { pruned: (event) => event.table === "jobs" && pruned.push(event.rows) },
    });
    // Judged at noon UTC of a fixed day: retention drops whole UTC days of the history.
    const now = new Date("2026-03-10T12:00:00Z");
    const hoursAgo = (hours: number) => new Date(now.getTime() - hours * 3_600_000);
    await insertFinishedJobs(ledger.database.db, [
      { jobName: "old.job", status: "succeeded", finishedAt: hoursAgo(48) },
      { jobName: "old.job", status: "succeeded", finishedAt: hoursAgo(47) },
      // 03-09: past one day, but its day is not: kept until the day is.
      { jobName: "old.job", status: "succeeded", finishedAt: hoursAgo(30) },
      { jobName: "old.job", status: "succeeded", finishedAt: hoursAgo(2) },
      { jobName: "old.job", status: "failed", finishedAt: hoursAgo(48) },
      { jobName: "old.job", status: "failed", finishedAt: hoursAgo(100) },
    ]);
    await rows(ledger, sql`insert into cronledger.job_queue (job_name) values ('old.job')`);
    const result = await ledger.prune({ now });
    expect(result.jobRows).toBe(3);
    expect(pruned).toEqual([3]);
    const left = await rows<{ status: string; n: number }>(ledger, sql`select status, count(*)::int as n from cronledger.jobs group by status order by status`);
    expect(left).toEqual([
      { status: "failed", n: 1 },
      { status: "queued", n: 1 },
      { status: "succeeded", n: 2 },
    ]);
  });

  it("returns an aborted job to the queue on stop without counting the attempt, and keeps finished ones", async () => {
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    let sawAbort = false;
    const quick = recordingJob("stop.quick", { behave: () => undefined });
    const stuck = recordingJob("stop.stuck", {
      behave: (ctx) =>
        new Promise((_, reject) => {
          started();
          ctx.signal.addEventListener("abort", () => {
            sawAbort = true;
            reject(ctx.signal.reason);
          });
        }),
    });
    const ledger = await open([quick.job, stuck.job]);
    const [q, s] = await ledger.enqueueMany([{ job: quick.job }, { job: stuck.job }]);
    const working = ledger.work({ pollInterval: "1m", gracePeriod: 100 });
    await running;
    await ledger.stop();
    const summary = await working;
    expect(sawAbort).toBe(true);
    expect(summary).toMatchObject({ succeeded: 1, returned: 1 });
    expect(await jobState(ledger, q?.id ?? -1)).toMatchObject({ status: "succeeded", attempts: 1 });
    expect(await jobState(ledger, s?.id ?? -1)).toMatchObject({ status: "queued", attempts: 0, locked_by: null });
  });

  it("runs the chores as ledger entries when they are enabled", async () => {
    const ledger = await open([], { chores: true });
    const now = await databaseNowMs(ledger);
    const later = new Date(now + 3_600_000 + 1_000);
    await ledger.tick({ now: new Date(now) });
    const report = await ledger.tick({ now: later });
    expect(report.enqueued.map((e) => e.jobName).sort()).toEqual([PRUNE_JOB, REAP_JOB]);
    const queues = await rows<{ queue: string }>(ledger, sql`select distinct queue from cronledger.jobs`);
    expect(queues).toEqual([{ queue: CHORE_QUEUE }]);
    expect(await ledger.work({ once: true, clock: () => later })).toMatchObject({ claimed: 2, succeeded: 2 });
  });

  it("runs the chores on a worker given other queues, so naming queues cannot starve the reaper", async () => {
    const mail = recordingJob("mail.send", { behave: () => undefined });
    const ledger = await open([mail.job], { chores: true });
    const now = await databaseNowMs(ledger);
    const later = new Date(now + 3_600_000 + 1_000);
    await ledger.tick({ now: new Date(now) });
    await ledger.tick({ now: later });
    await ledger.enqueue(mail.job);
    expect(await ledger.work({ once: true, queues: ["default"], clock: () => later })).toMatchObject({ claimed: 3, succeeded: 3 });
    expect(await rows(ledger, sql`select 1 from cronledger.jobs where status <> 'succeeded'`)).toEqual([]);
  });
});

describe("worker on postgres, in real time", () => {
  let store: TestStore | undefined;
  afterEach(async () => {
    await store?.dispose();
  });

  it("wakes an idle worker through LISTEN/NOTIFY well before its poll interval", async () => {
    store = await createTestStore("postgres", "worker_listen");
    const resolvers: (() => void)[] = [];
    const ran = [0, 1].map((n) => new Promise<void>((resolve) => (resolvers[n] = resolve)));
    const job = defineJob({ name: "wake.me", payload: z.object({ n: z.number() }), run: ({ n }) => resolvers[n]?.() });
    const ledger = await store.open({ jobs: [job], chores: false });
    await ledger.enqueue(job, { n: 0 });
    const working = ledger.work({ pollInterval: "10m" });
    // The first claim took job 0 and came back short: the worker now claims again only when told to.
    await ran[0];
    await ledger.enqueue(job, { n: 1 });
    // Within the test's timeout only the notification, not the 10-minute poll, can have started it.
    await ran[1];
    await ledger.stop();
    expect(await working).toMatchObject({ succeeded: 2 });
  });

  it("wakes for a retry when it comes due, not at the next poll, and never before", async () => {
    store = await createTestStore("postgres", "worker_retry_wake");
    const starts: number[] = [];
    let finished!: () => void;
    const done = new Promise<void>((resolve) => (finished = resolve));
    const job = defineJob({
      name: "retry.soon",
      retry: { maxAttempts: 2, delayMs: () => 300 },
      run: () => {
        starts.push(performance.now());
        if (starts.length === 1) throw new Error("first attempt fails");
        finished();
      },
    });
    const ledger = await store.open({ jobs: [job], chores: false });
    await ledger.enqueue(job);
    const working = ledger.work({ pollInterval: "10m" });
    // Within the test's timeout only the retry's own wake-up, not the 10-minute poll, can start attempt 2.
    await done;
    await ledger.stop();
    expect(await working).toMatchObject({ retried: 1, succeeded: 1 });
    expect((starts[1] ?? 0) - (starts[0] ?? 0)).toBeGreaterThanOrEqual(300);
  });

  it("wakes for a retry counted from the write of its completion, however late that write comes", async () => {
    store = await createTestStore("postgres", "worker_retry_wake_late_write");
    const starts: number[] = [];
    let finished!: () => void;
    const done = new Promise<void>((resolve) => (finished = resolve));
    let locked!: () => void;
    const rowLocked = new Promise<void>((resolve) => (locked = resolve));
    let writeHeld!: Promise<unknown>;
    const holder = await store.open({ chores: false });
    const job = defineJob({
      name: "retry.late-write",
      retry: { maxAttempts: 2, delayMs: () => 200 },
      run: async (_payload, ctx) => {
        starts.push(performance.now());
        if (starts.length > 1) {
          finished();
          return;
        }
        // Another session holds the job's row for 1 s, so the completion that schedules the retry is
        // written 1 s after the attempt ends: long past the 200 ms the retry waits.
        writeHeld = holder.database.db.transaction(async (tx) => {
          await tx.execute(sql`select id from cronledger.job_queue where id = ${ctx.jobId} for update`);
          locked();
          await new Promise((resolve) => setTimeout(resolve, 1_000));
        });
        await rowLocked;
        throw new Error("first attempt fails");
      },
    });
    const ledger = await store.open({ jobs: [job], chores: false });
    await ledger.enqueue(job);
    const working = ledger.work({ pollInterval: "10m" });
    // Only a wake-up counted from the write can start attempt 2 within the test's timeout: one counted from
    // the attempt's end fires while the row is still held, finds nothing, and leaves the retry to the poll.
    await done;
    await writeHeld;
    await ledger.stop();
    expect(await working).toMatchObject({ retried: 1, succeeded: 1 });
    expect((starts[1] ?? 0) - (starts[0] ?? 0)).toBeGreaterThanOrEqual(1_200);
  });

  it("heartbeats a long job so the reaper leaves it alone, however often it runs", async () => {
    store = await createTestStore("postgres", "worker_heartbeat");
    let finish!: () => void;
    const release = new Promise<void>((resolve) => (finish = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const long = defineJob({
      name: "long.job",
      retry: "maintenance",
      run: async () => {
        started();
        await release;
      },
    });
    // Long enough that a loaded CI machine's event-loop stalls cannot pass for a dead worker.
    const lease = 1_500;
    const ledger = await store.open({ jobs: [long], chores: false, lease });
    // The reaper of another process: the worker's own reap would heartbeat its jobs first.
    const reaper = await store.open({ jobs: [long], chores: false, lease });
    const { id } = await ledger.enqueue(long);
    const working = ledger.work({ once: true });
    await running;
    // Three leases long, reaping all the while: heartbeats every lease/3 keep the job its worker's.
    const reaped: number[] = [];
    const deadline = performance.now() + 3 * lease;
    while (performance.now() < deadline) {
      const report = await reaper.reap();
      reaped.push(report.requeued + report.failed);
      await new Promise((resolve) => setTimeout(resolve, lease / 6));
    }
    finish();
    expect(await working).toMatchObject({ succeeded: 1, failed: 0 });
    expect(reaped.every((n) => n === 0)).toBe(true);
    expect(await jobState(ledger, id)).toMatchObject({ status: "succeeded", attempts: 1 });
  });

  it("never reaps its own running job, even when its heartbeat timers were held up; another process's reaper would", async () => {
    store = await createTestStore("postgres", "worker_own_reap");
    let finish!: () => void;
    const release = new Promise<void>((resolve) => (finish = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const long = defineJob({ name: "long.own", run: async () => (started(), await release) });
    const lease = 1_000;
    const ledger = await store.open({ jobs: [long], chores: false, lease });
    const other = await store.open({ jobs: [long], chores: false, lease });
    const { id } = await ledger.enqueue(long);
    const working = ledger.work({ once: true });
    await running;
    // As if this process's timers had not fired for ten seconds (a stalled pool, a blocked event loop).
    const stall = () => rows(ledger, sql`update cronledger.job_queue set heartbeat_at = now() - interval '10 seconds' where id = ${id}`);
    await stall();
    expect(await ledger.reap()).toEqual({ requeued: 0, failed: 0 });
    await stall();
    expect(await other.reap()).toEqual({ requeued: 1, failed: 0 });
    finish();
    await working;
  });

  it("reaps a job its own live worker never heard it claimed (the claim committed, its answer lost with the connection)", async () => {
    store = await createTestStore("postgres", "worker_orphan_reap");
    let finish!: () => void;
    const release = new Promise<void>((resolve) => (finish = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const long = defineJob({ name: "long.orphan", run: async () => (started(), await release) });
    const lease = 1_000;
    const ledger = await store.open({ jobs: [long], chores: false, lease });
    const { id: held } = await ledger.enqueue(long);
    const working = ledger.work({ once: true, concurrency: 1 });
    await running;
    // Another job, locked by that same live worker as a committed claim whose answer never reached it leaves it.
    const [worker] = await rows<{ locked_by: string }>(ledger, sql`select locked_by from cronledger.job_queue where id = ${held}`);
    const [inserted] = await rows<{ id: number }>(
      ledger,
      sql`insert into cronledger.job_queue (job_name, status, attempts, max_attempts, locked_by, started_at, heartbeat_at)
          values ('long.orphan', 'running', 1, 3, ${worker!.locked_by}, now() - interval '10 seconds', now() - interval '10 seconds') returning id::float8 as id`,
    );
    const orphan = inserted!.id;
    await rows(ledger, sql`update cronledger.job_queue set heartbeat_at = now() - interval '10 seconds' where id = ${held}`);
    // The held one is spared; the orphan, which nothing in this process runs, goes back to the queue.
    expect(await ledger.reap()).toEqual({ requeued: 1, failed: 0 });
    expect(await jobState(ledger, orphan)).toMatchObject({ status: "queued" });
    expect(await jobState(ledger, held)).toMatchObject({ status: "running" });
    finish();
    await working;
  });

  it("runs a chore while every slot is busy, outside the slots", async () => {
    store = await createTestStore("postgres", "worker_chore_slots");
    let finish!: () => void;
    const release = new Promise<void>((resolve) => (finish = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const long = defineJob({ name: "long.slot", run: async () => (started(), await release) });
    const ledger = await store.open({ jobs: [long], chores: true });
    await ledger.enqueue(long);
    const working = ledger.work({ concurrency: 1, pollInterval: "10m" });
    await running;
    // The reap slot fires while the one slot is taken; the chore queue's notification brings it in beside the long job.
    // Two passes around exactly one slot of the reap chore (every 15 s), at least 45 s ago: not on a whole
    // minute, where the prune chore's slot (minute 7) could fall too. A window of wall-clock times could hold two.
    const now = await databaseNowMs(ledger);
    let reapSlot = Math.floor((now - 45_000) / 15_000) * 15_000;
    if (reapSlot % 60_000 === 0) reapSlot -= 15_000;
    await ledger.tick({ now: new Date(reapSlot - 14_000) });
    expect((await ledger.tick({ now: new Date(reapSlot + 500) })).enqueued.map((outcome) => outcome.jobName)).toEqual([REAP_JOB]);
    await until(async () => (await rows(ledger, sql`select 1 from cronledger.jobs where job_name = ${REAP_JOB} and status = 'succeeded'`)).length === 1);
    expect(await rows(ledger, sql`select status from cronledger.jobs where job_name = 'long.slot'`)).toEqual([{ status: "running" }]);
    finish();
    await ledger.stop();
    expect(await working).toMatchObject({ succeeded: 2 });
  });
});

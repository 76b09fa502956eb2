import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { sql } from "drizzle-orm";
import { query, type Database } from "../db/connection.js";
import { rootMessage } from "../db/transient.js";
import { parseDuration, type Duration } from "../duration.js";
import { ConfigError, JobNotRegisteredError, NonRetryableError } from "../errors.js";
import { redactError } from "../admin/redact.js";
import type { AttemptStatus, CronledgerEvents } from "../events.js";
import type { Logger } from "../log.js";
import { Attempt } from "./attempt.js";
import { describeIssues, type JobDefinition } from "./define-job.js";
import { JOBS_CHANNEL, notifyQueues } from "./insert-jobs.js";
import { JobTimeoutError, LeaseLostError, InvalidStoredJobError, WorkerShutdownError } from "./job-errors.js";
import { DEFAULT_LEASE_MS, heartbeatJobs } from "./reaper.js";
import { retryDelayMs } from "./retry.js";

export interface WorkOptions {
  /** Drain the jobs that are ready now, then return a summary (default: run until stop()). */
  readonly once?: boolean;
  /** Jobs run at the same time by this worker; default 10. */
  readonly concurrency?: number;
  /** Queues to serve; default: every queue of the registered jobs and schedule entries, plus "default". */
  readonly queues?: readonly string[];
  /** Most jobs claimed in one statement; default 500. Claims shrink to the free slots when jobs are slow. */
  readonly batchSize?: number;
  /** How often an idle worker looks for jobs that LISTEN/NOTIFY cannot announce (delayed jobs, retries); default 1 s. */
  readonly pollInterval?: Duration;
  /** Running jobs without a heartbeat for this long are reaped; heartbeats go every lease/3. Default: the ledger's lease. */
  readonly lease?: Duration;
  /** On stop(), how long running jobs may take to finish before their signal is aborted; default 25 s. */
  readonly gracePeriod?: Duration;
  /** Test hook: the clock that decides which jobs are due and when retries run (default: the database clock). */
  readonly clock?: () => Date;
  /** Test hook: the random source of retry jitter. */
  readonly random?: () => number;
}

/** What a worker did; `work({ once: true })` resolves with it. */
export interface WorkSummary {
  claimed: number;
  succeeded: number;
  skipped: number;
  noop: number;
  /** Failed attempts with another attempt scheduled. */
  retried: number;
  /** Terminal failures (attempts exhausted, non-retryable, unregistered, invalid payload). */
  failed: number;
  /** Jobs handed back to the queue unfinished by a shutdown, their attempt not counted. */
  returned: number;
}

/** What a worker needs from its Cronledger. */
export interface WorkerHost {
  readonly database: Database;
  readonly jobs: ReadonlyMap<string, JobDefinition>;
  readonly events: CronledgerEvents;
  readonly logger: Logger;
}

export const DEFAULT_CONCURRENCY = 10;
export const DEFAULT_BATCH_SIZE = 500;
export const DEFAULT_POLL_INTERVAL_MS = 1_000;
export const DEFAULT_GRACE_PERIOD_MS = 25_000;
/** Completions are written together once this many are waiting, or after FLUSH_DELAY_MS. */
const FLUSH_SIZE = 500;
const FLUSH_DELAY_MS = 2;
/** Prefetch enough claimed jobs for this much work at the handlers' pace, so claims overlap execution. */
const PREFETCH_HORIZON_S = 0.05;
/** Weight of the latest job in the running mean of job durations. */
const DURATION_WEIGHT = 0.1;
/** Jobs shorter than this count as this long, so no-op jobs still size the prefetch finitely. */
const MIN_JOB_MS = 0.01;
/** After aborting at the end of the grace period, how long handlers get to honour the signal. */
const ABORT_SETTLE_MS = 2_000;
const MAX_BACKOFF_MS = 5_000;
const MAX_CONCURRENT_CLAIMS = 2;
/*
 * CLAIM_COMMIT: a claim commits asynchronously (synchronous_commit = off for its own
 * transaction, set inside the statement). It is visible to every other worker at once,
 * so nobody claims the job twice; what a server crash can lose is the claim's last few
 * hundred milliseconds, which puts the job back to queued: it runs again, as a job of a
 * worker that died does (at least once). Enqueues and completions stay synchronous.
 * Saves a WAL flush on the path from enqueue to start and on every claim of a drain.
 */
/** Retries due sooner than this get a timer of their own; later ones are found by the poll. */
const MAX_RETRY_WAKE_MS = 5 * 60_000;
/** After the retry's due time: its completion is flushed and the database clock has passed it. */
const RETRY_WAKE_MARGIN_MS = 25;
const RETRY_WAKE_BUCKET_MS = 50;

interface ClaimedJob {
  readonly id: number;
  readonly jobName: string;
  readonly queue: string;
  readonly payload: string;
  readonly priority: number;
  readonly runAtMs: number;
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly scheduledForMs: number | null;
}

type FinalStatus = "succeeded" | "failed" | "queued";

/** One row update waiting to be flushed: the end of an attempt, or a job handed back. */
interface Completion {
  readonly id: number;
  readonly status: FinalStatus;
  readonly outcome: string | null;
  readonly error: string | null;
  readonly delayMs: number;
  /** -1 for jobs handed back at shutdown: an interrupted attempt is not the job's fault. */
  readonly attemptsDelta: number;
}

interface ActiveJob {
  readonly job: ClaimedJob;
  readonly attempt: Attempt;
  readonly settled: Promise<void>;
}

interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

function positiveInteger(value: number | undefined, fallback: number, what: string): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1) throw new ConfigError(`${what} must be a positive integer (got ${String(value)}).`);
  return value;
}

export function newWorkerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
}

/**
 * Claims jobs in batches (FOR UPDATE SKIP LOCKED, priority then run_at
 * order, served by jobs_ready_idx), runs them with bounded concurrency and
 * writes their ends in batches. A small local buffer of claimed jobs lets
 * claims overlap execution; it grows with the rate the handlers can sustain and shrinks
 * to the free slots when jobs are slow, so slow jobs are not hoarded.
 *
 * Every write is guarded by `locked_by = this worker and status = 'running'`,
 * so a job the reaper took back is never overwritten by its old worker.
 */
export class Worker {
  readonly id: string;
  readonly queues: readonly string[];
  readonly concurrency: number;
  private readonly host: WorkerHost;
  private readonly once: boolean;
  private readonly batchSize: number;
  private readonly pollMs: number;
  private readonly leaseMs: number;
  private readonly graceMs: number;
  private readonly clock: (() => Date) | undefined;
  private readonly random: () => number;

  private readonly summary: WorkSummary = { claimed: 0, succeeded: 0, skipped: 0, noop: 0, retried: 0, failed: 0, returned: 0 };
  private readonly buffer: ClaimedJob[] = [];
  private readonly active = new Map<number, ActiveJob>();
  private pending: Completion[] = [];
  /** Claims in flight, and how many rows they asked for. */
  private readonly claims = new Set<Promise<void>>();
  private claimingRows = 0;
  private flushing: Promise<void> | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  /** False once a claim came back short: the queue is drained until a NOTIFY, the poll or a finished job says otherwise. */
  private more = true;
  /** Counts those signals, so a claim that comes back short after one arrived does not clear `more`. */
  private signals = 0;
  private stopping = false;
  private started = false;
  private claimBackoffMs = 0;
  private flushBackoffMs = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  /** Wake-ups for scheduled retries, by RETRY_WAKE_BUCKET_MS bucket of their due time. */
  private readonly retryWakes = new Map<number, NodeJS.Timeout>();
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private readonly drained = deferred();
  private readonly hurried = deferred();
  private rate = 0;
  /** Running mean of job durations; undefined until a job has finished. */
  private meanJobMs: number | undefined;
  private stopPromise: Promise<WorkSummary> | undefined;

  constructor(host: WorkerHost, options: WorkOptions & { readonly defaultQueues: readonly string[]; readonly defaultLeaseMs?: number }) {
    this.host = host;
    this.id = newWorkerId();
    this.once = options.once ?? false;
    this.concurrency = positiveInteger(options.concurrency, DEFAULT_CONCURRENCY, "concurrency");
    this.batchSize = positiveInteger(options.batchSize, DEFAULT_BATCH_SIZE, "batchSize");
    this.pollMs = parseDuration(options.pollInterval ?? DEFAULT_POLL_INTERVAL_MS, "pollInterval");
    this.leaseMs = parseDuration(options.lease ?? options.defaultLeaseMs ?? DEFAULT_LEASE_MS, "lease");
    this.graceMs = parseDuration(options.gracePeriod ?? DEFAULT_GRACE_PERIOD_MS, "gracePeriod");
    this.clock = options.clock;
    this.random = options.random ?? Math.random;
    const queues = options.queues ?? options.defaultQueues;
    if (queues.length === 0) throw new ConfigError("work() needs at least one queue.");
    this.queues = [...new Set(queues)];
  }

  /** Starts claiming. Resolves with the summary when drained (`once`) or after stop(). */
  async run(): Promise<WorkSummary> {
    if (this.started) throw new ConfigError("A worker runs once; create another for a new run.");
    this.started = true;
    if (!this.once) {
      try {
        this.unlisten = await this.host.database.listen(JOBS_CHANNEL, (queue) => {
          if (this.queues.includes(queue)) this.wake();
        });
      } catch (error) {
        this.host.logger.warn("LISTEN failed; relying on polling until the next start", { worker: this.id, error: redactError(error) });
      }
      this.pollTimer = setInterval(() => this.wake(), this.pollMs);
    }
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), Math.max(10, Math.floor(this.leaseMs / 3)));
    this.pump();
    await this.drained.promise;
    return this.stopPromise ?? this.finish();
  }

  /**
   * Graceful stop: no more claims; claimed-but-unstarted jobs go straight
   * back; running jobs get the grace period, then their signal is aborted
   * and they go back to the queue with the interrupted attempt uncounted.
   */
  stop(gracePeriodMs: number = this.graceMs): Promise<WorkSummary> {
    this.stopPromise ??= this.shutdown(gracePeriodMs);
    return this.stopPromise;
  }

  /** Ends the grace period of a stop in progress now (a second SIGTERM). */
  hurry(): void {
    this.hurried.resolve();
  }

  private wake(): void {
    this.more = true;
    this.signals += 1;
    this.pump();
  }

  /** The event loop of the worker: start what can run, claim when the buffer runs low, finish when drained. */
  private pump(): void {
    if (this.stopping) return;
    while (this.active.size < this.concurrency && this.buffer.length > 0) this.startJob(this.buffer.shift() as ClaimedJob);
    const prefetch = Math.min(this.batchSize, Math.round(this.rate * PREFETCH_HORIZON_S));
    const capacity = this.concurrency + prefetch;
    const held = this.active.size + this.buffer.length;
    const lowWater = capacity - Math.max(1, Math.floor(prefetch / 2));
    // A second claim may overlap the first on another connection when the job rate outruns one claim's round trip.
    const maxClaims = prefetch >= this.batchSize / 2 ? MAX_CONCURRENT_CLAIMS : 1;
    if (this.more && this.claims.size < maxClaims && this.retryTimer === undefined && held + this.claimingRows <= lowWater) {
      const limit = Math.min(this.batchSize, capacity - held - this.claimingRows);
      this.claimingRows += limit;
      const claim: Promise<void> = this.claim(limit).finally(() => {
        this.claimingRows -= limit;
        this.claims.delete(claim);
        this.pump();
      });
      this.claims.add(claim);
    }
    if (this.once && !this.more && this.claims.size === 0 && held === 0 && this.pending.length === 0 && !this.flushing && this.flushTimer === undefined) {
      this.drained.resolve();
    }
  }

  /**
   * The rate the handlers could sustain: concurrency over the mean job
   * duration. Not the rate observed, which the claims themselves bound: with
   * several processes, a small prefetch made small claims, a low rate, and a
   * smaller prefetch again.
   */
  private updateRate(): void {
    if (this.meanJobMs === undefined) return;
    this.rate = (this.concurrency * 1000) / Math.max(MIN_JOB_MS, this.meanJobMs);
  }

  private nowSql() {
    return this.clock === undefined ? sql`now()` : sql`${this.clock().toISOString()}::timestamptz`;
  }

  private async claim(limit: number): Promise<void> {
    this.updateRate();
    const signalsBefore = this.signals;
    let rows: ClaimedJob[];
    try {
      rows = await query<ClaimedJob>(
        this.host.database.db,
        sql`update cronledger.jobs j
            set status = 'running', attempts = j.attempts + 1, locked_by = ${this.id}, heartbeat_at = now(), started_at = now()
            where j.id = any(array(
              select c.id from unnest(${sql.param(this.queues)}::text[]) as q(name)
              cross join lateral (
                select id, priority, run_at from cronledger.jobs
                where queue = q.name and status = 'queued' and run_at <= ${this.nowSql()}
                order by priority, run_at, id
                limit ${limit}
                for update skip locked
              ) c
              order by c.priority, c.run_at, c.id
              limit ${limit}
            ))
            -- The claim commits without waiting for its WAL flush (see CLAIM_COMMIT above).
            and (select set_config('synchronous_commit', 'off', true)) = 'off'
            returning j.id::float8 as "id", j.job_name as "jobName", j.queue, j.payload::text as payload, j.priority,
              (extract(epoch from j.run_at) * 1000)::float8 as "runAtMs", j.attempts, j.max_attempts as "maxAttempts",
              (extract(epoch from j.scheduled_for) * 1000)::float8 as "scheduledForMs"`,
      );
      this.claimBackoffMs = 0;
    } catch (error) {
      this.claimBackoffMs = Math.min(MAX_BACKOFF_MS, Math.max(100, this.claimBackoffMs * 2));
      this.host.logger.warn("claiming jobs failed; retrying", { worker: this.id, retryInMs: this.claimBackoffMs, error: redactError(error) });
      this.retryTimer = setTimeout(() => {
        this.retryTimer = undefined;
        this.pump();
      }, this.claimBackoffMs);
      return;
    }
    // A NOTIFY that arrived while this claim ran may announce jobs its snapshot did not see.
    if (rows.length < limit && this.signals === signalsBefore) this.more = false;
    if (rows.length === 0) return;
    rows.sort((a, b) => a.priority - b.priority || a.runAtMs - b.runAtMs || a.id - b.id);
    this.summary.claimed += rows.length;
    if (this.stopping) {
      for (const job of rows) this.handBack(job);
      return;
    }
    this.buffer.push(...rows);
  }

  private startJob(job: ClaimedJob): void {
    const definition = this.host.jobs.get(job.jobName);
    const started = performance.now();
    const attempt = new Attempt(
      {
        jobId: job.id,
        jobName: job.jobName,
        attempt: job.attempts,
        maxAttempts: job.maxAttempts,
        scheduledFor: job.scheduledForMs === null ? null : new Date(job.scheduledForMs),
      },
      this.host.logger,
    );
    const settled = this.execute(job, definition, attempt).then(
      (completion) => this.settle(job, definition, completion, started),
      (error: unknown) => this.settle(job, definition, this.failure(job, definition, error), started),
    );
    this.active.set(job.id, { job, attempt, settled });
  }

  private async execute(job: ClaimedJob, definition: JobDefinition | undefined, attempt: Attempt): Promise<Completion> {
    this.host.events.jobStarted({ jobId: job.id, jobName: job.jobName, attempt: job.attempts });
    if (definition === undefined) return this.failure(job, undefined, new JobNotRegisteredError(job.jobName));
    const parsed = definition.payload.safeParse(JSON.parse(job.payload));
    if (!parsed.success) return this.failure(job, definition, new InvalidStoredJobError(job.jobName, job.id, describeIssues(parsed.error)));
    const timeout = setTimeout(() => attempt.abort(new JobTimeoutError(job.jobName, definition.timeoutMs)), definition.timeoutMs);
    try {
      const result = await attempt.run(definition, parsed.data);
      const outcome = result && typeof result === "object" && (result.outcome === "skip" || result.outcome === "noop") ? result.outcome : null;
      return { id: job.id, status: "succeeded", outcome, error: null, delayMs: 0, attemptsDelta: 0 };
    } catch (error) {
      if (attempt.abortReason instanceof WorkerShutdownError) return this.handBackCompletion(job);
      return this.failure(job, definition, attempt.isAborted ? attempt.abortReason : error);
    } finally {
      clearTimeout(timeout);
    }
  }

  /** Decides what a failed attempt becomes: a retry after the policy's delay, or a terminal failure. */
  private failure(job: ClaimedJob, definition: JobDefinition | undefined, error: unknown): Completion {
    const terminal =
      definition === undefined ||
      error instanceof NonRetryableError ||
      error instanceof InvalidStoredJobError ||
      (error as { code?: unknown } | null)?.code === "non_retryable" ||
      job.attempts >= job.maxAttempts;
    const message = redactError(error);
    if (terminal) return { id: job.id, status: "failed", outcome: null, error: message, delayMs: 0, attemptsDelta: 0 };
    return { id: job.id, status: "queued", outcome: null, error: message, delayMs: retryDelayMs(definition.retry, job.attempts, this.random), attemptsDelta: 0 };
  }

  private handBackCompletion(job: ClaimedJob): Completion {
    return { id: job.id, status: "queued", outcome: null, error: null, delayMs: 0, attemptsDelta: -1 };
  }

  private handBack(job: ClaimedJob): void {
    this.summary.returned += 1;
    this.enqueueCompletion(this.handBackCompletion(job));
  }

  private settle(job: ClaimedJob, definition: JobDefinition | undefined, completion: Completion, started: number): void {
    const entry = this.active.get(job.id);
    if (entry === undefined) return;
    this.active.delete(job.id);
    if (entry.attempt.abortReason instanceof LeaseLostError) return;
    if (completion.attemptsDelta < 0) {
      this.summary.returned += 1;
      this.enqueueCompletion(completion);
      return;
    }
    const durationSeconds = (performance.now() - started) / 1000;
    const status = this.attemptStatus(completion);
    const base = { jobId: job.id, jobName: job.jobName, attempt: job.attempts, status, durationSeconds };
    if (completion.error === null) {
      this.host.events.jobFinished(base);
    } else if (status === "retry") {
      const nextRunAt = new Date((this.clock?.() ?? new Date()).getTime() + completion.delayMs);
      this.host.events.jobFinished({ ...base, error: completion.error, nextRunAt });
      this.host.logger.warn("job attempt failed; retrying", {
        job: job.jobName,
        jobId: job.id,
        attempt: job.attempts,
        maxAttempts: job.maxAttempts,
        nextRunAt: nextRunAt.toISOString(),
        error: completion.error,
      });
    } else {
      this.host.events.jobFinished({ ...base, error: completion.error });
      this.host.logger.error("job failed terminally", {
        job: job.jobName,
        jobId: job.id,
        attempt: job.attempts,
        maxAttempts: job.maxAttempts,
        registered: definition !== undefined,
        error: completion.error,
      });
    }
    const jobMs = durationSeconds * 1000;
    this.meanJobMs = this.meanJobMs === undefined ? jobMs : this.meanJobMs + DURATION_WEIGHT * (jobMs - this.meanJobMs);
    // A drain also picks up what its own jobs enqueued; a running worker wakes when a retry comes due.
    if (this.once) {
      this.more = true;
      this.signals += 1;
    } else if (status === "retry") this.wakeForRetry(completion.delayMs);
    this.enqueueCompletion(completion);
    this.pump();
  }

  /**
   * Wakes the worker when a retry it scheduled comes due, so a job retried
   * in 2 s runs in 2 s, not at the poll after. Retries due within the same
   * RETRY_WAKE_BUCKET_MS share one timer; far-off ones are left to the poll.
   */
  private wakeForRetry(delayMs: number): void {
    if (delayMs > MAX_RETRY_WAKE_MS) return;
    const bucket = Math.ceil((performance.now() + delayMs + RETRY_WAKE_MARGIN_MS) / RETRY_WAKE_BUCKET_MS);
    if (this.retryWakes.has(bucket)) return;
    const timer = setTimeout(() => {
      this.retryWakes.delete(bucket);
      this.wake();
    }, bucket * RETRY_WAKE_BUCKET_MS - performance.now());
    this.retryWakes.set(bucket, timer);
  }

  private clearRetryWakes(): void {
    for (const timer of this.retryWakes.values()) clearTimeout(timer);
    this.retryWakes.clear();
  }

  private attemptStatus(completion: Completion): AttemptStatus {
    if (completion.status === "failed") {
      this.summary.failed += 1;
      return "panicked";
    }
    if (completion.status === "queued") {
      this.summary.retried += 1;
      return "retry";
    }
    if (completion.outcome === "skip") {
      this.summary.skipped += 1;
      return "skip";
    }
    if (completion.outcome === "noop") {
      this.summary.noop += 1;
      return "noop";
    }
    this.summary.succeeded += 1;
    return "done";
  }

  private enqueueCompletion(completion: Completion): void {
    this.pending.push(completion);
    if (this.pending.length >= FLUSH_SIZE) this.scheduleFlush(0);
    else this.scheduleFlush(FLUSH_DELAY_MS);
  }

  private scheduleFlush(delayMs: number): void {
    if (this.flushing) return;
    if (this.flushTimer !== undefined) {
      if (delayMs > 0) return;
      clearTimeout(this.flushTimer);
    }
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      this.flushing = this.flush().finally(() => {
        this.flushing = undefined;
        if (this.pending.length > 0) this.scheduleFlush(this.flushBackoffMs || (this.pending.length >= FLUSH_SIZE ? 0 : FLUSH_DELAY_MS));
        else this.pump();
      });
    }, delayMs);
  }

  /** Writes every waiting completion in one statement; on failure they stay queued for the next try. */
  private async flush(): Promise<void> {
    const batch = this.pending;
    if (batch.length === 0) return;
    this.pending = [];
    const column = <K extends keyof Completion>(key: K) => sql.param(batch.map((completion) => completion[key]));
    try {
      await this.host.database.db.execute(
        sql`with done as (
              update cronledger.jobs j set
                status = t.status,
                outcome = t.outcome,
                last_error = coalesce(t.error, j.last_error),
                attempts = j.attempts + t.delta,
                run_at = case when t.status = 'queued' then ${this.nowSql()} + t.delay_ms * interval '1 millisecond' else j.run_at end,
                finished_at = case when t.status = 'queued' then null else now() end,
                locked_by = null,
                heartbeat_at = null
              from unnest(
                ${column("id")}::bigint[], ${column("status")}::text[], ${column("outcome")}::text[],
                ${column("error")}::text[], ${column("delayMs")}::float8[], ${column("attemptsDelta")}::int[]
              ) as t(id, status, outcome, error, delay_ms, delta)
              where j.id = t.id and j.locked_by = ${this.id} and j.status = 'running'
              returning j.queue, t.status, t.delta
            )
            ${notifyQueues(sql`done where status = 'queued' and delta < 0`)}`,
      );
      this.flushBackoffMs = 0;
    } catch (error) {
      this.pending = batch.concat(this.pending);
      this.flushBackoffMs = Math.min(MAX_BACKOFF_MS, Math.max(100, this.flushBackoffMs * 2));
      this.host.logger.warn("recording finished jobs failed; retrying", {
        worker: this.id,
        jobs: batch.length,
        retryInMs: this.flushBackoffMs,
        error: redactError(error),
      });
    }
  }

  private heldIds(): number[] {
    return [...this.active.keys(), ...this.buffer.map((job) => job.id)];
  }

  private async heartbeat(): Promise<void> {
    const ids = this.heldIds();
    if (ids.length === 0) return;
    let alive: Set<number>;
    try {
      alive = await heartbeatJobs(this.host.database, this.id, ids);
    } catch (error) {
      this.host.logger.warn("heartbeat failed; the reaper takes jobs back if this lasts longer than the lease", {
        worker: this.id,
        leaseMs: this.leaseMs,
        error: rootMessage(error),
      });
      return;
    }
    for (const id of ids) {
      if (alive.has(id)) continue;
      const active = this.active.get(id);
      if (active) {
        this.host.logger.warn("a running job was reaped (stale heartbeat); aborting it here", { worker: this.id, jobId: id, job: active.job.jobName });
        active.attempt.abort(new LeaseLostError(id));
        continue;
      }
      const index = this.buffer.findIndex((job) => job.id === id);
      if (index >= 0) this.buffer.splice(index, 1);
    }
  }

  private async shutdown(gracePeriodMs: number): Promise<WorkSummary> {
    this.stopping = true;
    clearInterval(this.pollTimer);
    clearTimeout(this.retryTimer);
    this.clearRetryWakes();
    const unlisten = this.unlisten;
    this.unlisten = undefined;
    await unlisten?.().catch(() => {});
    for (const job of this.buffer.splice(0)) this.handBack(job);
    await Promise.all(this.claims);

    const running = () => Promise.all([...this.active.values()].map((entry) => entry.settled));
    let graceTimer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<"timeout">((resolve) => (graceTimer = setTimeout(() => resolve("timeout"), gracePeriodMs)));
    const ended = await Promise.race([running().then(() => "done" as const), graceOver, this.hurried.promise.then(() => "timeout" as const)]);
    clearTimeout(graceTimer);
    if (ended === "timeout" && this.active.size > 0) {
      this.host.logger.warn("grace period over; aborting running jobs and returning them to the queue", {
        worker: this.id,
        jobs: this.active.size,
        gracePeriodMs,
      });
      const reason = new WorkerShutdownError(this.id);
      for (const entry of this.active.values()) entry.attempt.abort(reason);
      let settleTimer: NodeJS.Timeout | undefined;
      await Promise.race([running(), new Promise<void>((resolve) => (settleTimer = setTimeout(resolve, ABORT_SETTLE_MS)))]);
      clearTimeout(settleTimer);
      // Handlers that ignore their signal are handed back anyway: this process is going away.
      for (const entry of [...this.active.values()]) {
        this.active.delete(entry.job.id);
        this.handBack(entry.job);
      }
    }
    await this.drainCompletions();
    clearInterval(this.heartbeatTimer);
    this.drained.resolve();
    return this.finish();
  }

  /** Flushes until nothing is waiting, retrying through short outages, bounded so shutdown cannot hang. */
  private async drainCompletions(): Promise<void> {
    const deadline = performance.now() + 10_000;
    while ((this.pending.length > 0 || this.flushing || this.flushTimer !== undefined) && performance.now() < deadline) {
      if (this.flushing) {
        await this.flushing;
        continue;
      }
      clearTimeout(this.flushTimer);
      this.flushTimer = undefined;
      await this.flush();
      if (this.pending.length > 0) await new Promise((resolve) => setTimeout(resolve, this.flushBackoffMs));
    }
    if (this.pending.length > 0) {
      this.host.logger.error("could not record some finished jobs before stopping; the reaper will return them to the queue", {
        worker: this.id,
        jobs: this.pending.length,
      });
    }
  }

  private finish(): WorkSummary {
    clearInterval(this.pollTimer);
    clearInterval(this.heartbeatTimer);
    clearTimeout(this.retryTimer);
    this.clearRetryWakes();
    clearTimeout(this.flushTimer);
    return { ...this.summary };
  }
}

// The worker loop: claim, start, heartbeat, complete, stop. Longer than most files (about 500
// lines) because stopping gracefully (grace period, abort, hand-back without counting the attempt)
// and the wake-up sources (NOTIFY, poll, finished jobs, retries coming due, chores outside the
// slots) share the loop's state; each separable part already lives in its own module (see below).
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { Backoff } from "../backoff.js";
import type { ClaimedJob, HeldAttempt, LateCompletion } from "../db/sql/jobs.js";
import { InvalidArgumentError, InvalidStoredJobError, JobNotRegisteredError, JobTimeoutError, LeaseLostError, NonRetryableError, WorkerShutdownError } from "../errors.js";
import { retryCapMs } from "../db/diagnose.js";
import { logFailure } from "../db/log-failure.js";
import { childLogger, type Logger } from "../log.js";
import { redactError } from "../redact.js";
import { Attempt } from "./attempt.js";
import { claimSize, DurationMeter } from "./claim-size.js";
import { attemptStatus, CompletionBatcher, count, emptySummary, type Completion, type WorkSummary } from "./completion.js";
import { validatePayload, type JobDefinition } from "./define-job.js";
import { Heartbeats } from "./heartbeats.js";
import type { WorkerRegistration } from "../db/sql/workers.js";
import { retryDelayMs } from "./retry.js";
import { effectiveRetryPolicy, readStoredRetryPolicy } from "./retry-override.js";
import { RetryWakes } from "./retry-wakes.js";
import type { ResolvedWorkOptions } from "./work-options.js";
import type { WorkerDependencies } from "./worker-deps.js";
import { nextMode, type WorkerMode } from "./worker-mode.js";
import { withinDeadline } from "../deadline.js";
import { DEFAULT_STOP_GRACE_MS, StopRequests, stoppedCompletion } from "./stops.js";

export type { WorkSummary } from "./completion.js";
export type { WorkerDependencies } from "./worker-deps.js";

/** What a worker is given: its resolved options, the queues it serves and its lease. */
export interface WorkerSettings extends Omit<ResolvedWorkOptions, "queues" | "leaseMs"> {
  readonly queues: readonly string[];
  readonly leaseMs: number;
  /** The namespace it registers under (src/db/sql/workers.ts). */
  readonly namespace: string;
  /**
   * cronledger's chores this worker serves: claimed ahead of ordinary jobs
   * and run outside its `concurrency` slots, so neither a backlog nor long
   * jobs can keep the reaper from running.
   */
  readonly chores?: { readonly queue: string; readonly jobNames: readonly string[] } | undefined;
  /**
   * How long a handler asked to stop (cancelJob on a running job) may run on
   * after its signal is aborted before its job is failed as killed; default
   * DEFAULT_STOP_GRACE_MS (createCronledger's `stopGrace`).
   */
  readonly stopGraceMs?: number;
}


/**
 * Claims that fail retry after 100 ms doubling to this, so a worker claims again within about a second of the
 * database coming back; a persistent cause (wrong password) waits up to a minute.
 */
export const MAX_RETRY_BACKOFF_MS = 1_000;
/** After aborting at the end of the grace period, how long handlers get to honour the signal. */
const ABORT_SETTLE_MS = 2_000;
/** How soon writeWaitingResults tries again after a try that failed at once. */
const RESULTS_RETRY_MS = 100;
/** Chores claimed per statement at most: one reap and one prune slot, with room for a late one. */
const CHORE_CLAIM_LIMIT = 4;

interface ActiveJob {
  readonly job: ClaimedJob;
  readonly attempt: Attempt;
  /** Set once the handler has been started: the entry is recorded first, since a handler may run to its end at once. */
  settled: Promise<void>;
}

const NOT_STARTED: Promise<void> = Promise.resolve();

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** A finished attempt's fields in the worker's log lines (made only for the lines that need them). */
function attemptFields(job: ClaimedJob): { job: string; jobId: number; attempt: number; maxAttempts: number } {
  return { job: job.jobName, jobId: job.id, attempt: job.attempts, maxAttempts: job.maxAttempts };
}

export function newWorkerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
}

/**
 * Claims jobs in batches, runs them with bounded concurrency and writes
 * their ends in batches. The parts: claim sizing (src/jobs/claim-size.ts),
 * one run of a handler (src/jobs/attempt.ts), completion batching
 * (src/jobs/completion.ts), heartbeats (src/jobs/heartbeats.ts), stop
 * requests on running jobs (src/jobs/stops.ts); the SQL is
 * in src/db/sql/jobs.ts, reached through the WorkerStore it is given
 * (src/jobs/worker-deps.ts); retries coming due
 * wake it through src/jobs/retry-wakes.ts. This class is the
 * loop that ties them together: `pump()` starts what can run and claims
 * when the buffer runs low; wake-ups come from NOTIFY, the poll, finished
 * jobs and retries coming due.
 */
export class Worker {
  readonly id: string;
  readonly queues: readonly string[];
  readonly concurrency: number;
  private readonly settings: WorkerSettings;
  private readonly deps: WorkerDependencies;
  private readonly log: Logger;
  private readonly random: () => number;
  private readonly batcher: CompletionBatcher;
  private readonly heartbeats: Heartbeats;
  private readonly durations = new DurationMeter();
  private readonly claimBackoff = new Backoff({ initialMs: 100, factor: 2, maxMs: MAX_RETRY_BACKOFF_MS });
  /** The job names claimed into the slots: every registered name except the chores'. */
  private readonly jobNames: readonly string[];
  private readonly registration: WorkerRegistration;

  private readonly summary = emptySummary();
  private readonly buffer: ClaimedJob[] = [];
  private readonly active = new Map<number, ActiveJob>();
  /** Ids of the running chores: in `active` (heartbeats, completion, shutdown) but outside the slots. */
  private readonly chores = new Set<number>();
  /** A chore may be ready (its queue was notified, or the poll came round): claim even with every slot busy. */
  private choresWanted = true;
  /** Claims in flight, and how many rows they asked for. */
  private readonly claims = new Set<Promise<void>>();
  private claimingRows = 0;
  /** Wake-ups (NOTIFY, the poll, retries due, a drain's own jobs) so far: a claim that saw one arrive while it ran may not conclude the queue is empty. */
  private signals = 0;
  /** False once a claim came back short: the queue is drained until a NOTIFY, the poll or a finished job says otherwise. */
  private more = true;
  /** Where the worker is in its life (src/jobs/worker-mode.ts); changed only by setMode. */
  private mode: WorkerMode = "idle";
  private claimRetryTimer: NodeJS.Timeout | undefined;
  private stopWatchingHealth: (() => void) | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private readonly retryWakes = new RetryWakes(() => this.wake());
  private unlisten: (() => Promise<void>) | undefined;
  private unlistenStops: (() => Promise<void>) | undefined;
  private listening: Promise<void> | undefined;
  /** Running jobs an operator asked to stop (src/jobs/stops.ts). */
  private readonly stops: StopRequests;
  private readonly drained = deferred();
  private readonly hurried = deferred();
  private stopPromise: Promise<WorkSummary> | undefined;

  constructor(deps: WorkerDependencies, settings: WorkerSettings) {
    if (settings.queues.length === 0) throw new InvalidArgumentError("work() needs at least one queue.");
    this.deps = deps;
    this.settings = settings;
    this.id = newWorkerId();
    this.queues = [...new Set(settings.queues)];
    this.concurrency = settings.concurrency;
    const choreNames = new Set(settings.chores?.jobNames ?? []);
    this.jobNames = [...deps.jobs.keys()].filter((name) => !choreNames.has(name));
    this.registration = {
      id: this.id,
      namespace: settings.namespace,
      jobNames: [...this.jobNames, ...choreNames],
      queues: this.queues,
      leaseMs: settings.leaseMs,
    };
    this.random = settings.random ?? Math.random;
    this.log = childLogger(deps.logger, { worker: this.id });
    this.stops = new StopRequests(settings.stopGraceMs ?? DEFAULT_STOP_GRACE_MS, this.log);
    this.batcher = new CompletionBatcher({
      write: (rows) => deps.store.complete(this.id, rows, this.settings.clock?.()),
      late: (results) => this.lateResults(results),
      flushed: () => this.pump(),
      // A retry is due its delay after the statement that wrote it, so its wake-up is counted from the write,
      // not from the attempt's end: counted from there, a completion held up past the wake-up's margin (a
      // loaded machine, a slow write) left the retry for the next poll.
      written: (batch) => {
        if (this.settings.once) return;
        for (const completion of batch) if (completion.kind === "retry") this.retryWakes.add(completion.delayMs);
      },
      health: deps.health,
      logger: this.log,
    });
    this.heartbeats = new Heartbeats(
      {
        held: () => this.held(),
        beat: (held) => deps.store.heartbeat(this.registration, held),
        lost: (attempts) => this.lost(attempts),
        stopRequested: (requests) => this.stops.apply(requests, this.active),
        health: deps.health,
        logger: this.log,
      },
      settings.leaseMs,
    );
  }

  private setMode(to: WorkerMode): void {
    this.mode = nextMode(this.mode, to);
  }

  private inMode(...modes: WorkerMode[]): boolean {
    return modes.includes(this.mode);
  }

  /** Claims may go out: neither starting nor stopping. */
  private get claiming(): boolean {
    return this.mode === "running";
  }

  /** Starts claiming. Resolves with the summary when drained (`once`) or after stop(). */
  async run(): Promise<WorkSummary> {
    // Stopped before it ran (a stop() during work()'s schema check): nothing to start.
    if (this.stopPromise) return this.stopPromise;
    if (this.mode !== "idle") throw new InvalidArgumentError("A worker runs once; create another for a new run.");
    this.setMode("starting");
    // LISTEN before the first claim, so no NOTIFY falls between them; the registration (its names and
    // queues; later beats keep the row fresh) goes out beside the LISTENs. Until both are done, a NOTIFY
    // claims nothing (pump() waits for `claiming`).
    await Promise.all([this.listen(), this.heartbeats.beatNow()]);
    // Unless a stop() came meanwhile (read through a method: the compiler would keep the mode it saw before the await).
    if (this.inMode("starting")) {
      // A claim waiting out a long backoff (a persistent cause waits up to a minute) goes as soon as the database is back.
      this.stopWatchingHealth = this.deps.health.whenBack(() => {
        if (this.claimRetryTimer === undefined || !this.claiming) return;
        clearTimeout(this.claimRetryTimer);
        this.claimRetryTimer = setTimeout(() => void this.resync(), 0);
      });
      if (!this.settings.once) {
        this.pollTimer = setInterval(() => {
          this.choresWanted = true;
          this.wake();
        }, this.settings.pollMs);
      }
      this.heartbeats.start();
      this.setMode("running");
      this.pump();
    }
    await this.drained.promise;
    if (this.stopPromise) return this.stopPromise;
    // The drain of `once` is over: the worker stops as a stop() would, with nothing left to wait for.
    this.setMode("stopping");
    await this.unregister();
    return this.finish();
  }

  /**
   * Opens this worker's LISTENs (new jobs, stop requests), once; run()
   * awaits them before its first claim. A caller may begin it early, so the
   * LISTEN connection opens while the schema is checked. Never rejects: a
   * LISTEN that fails is logged and the worker relies on polling.
   */
  listen(): Promise<void> {
    this.listening ??= this.settings.once ? Promise.resolve() : this.openListeners();
    return this.listening;
  }

  private async openListeners(): Promise<void> {
    const [jobs, stops] = await Promise.allSettled([
      this.deps.store.listen((queue) => {
        if (queue === this.settings.chores?.queue) this.choresWanted = true;
        if (this.queues.includes(queue)) this.wake();
      }),
      // A stop request for a job this worker runs: beat now, which brings the request (who, why) with it.
      this.deps.store.listenForStops((jobId) => {
        if (this.active.has(jobId)) void this.heartbeats.beatNow();
      }),
    ]);
    if (jobs.status === "fulfilled") this.unlisten = jobs.value;
    else logFailure(this.log, "warn", "LISTEN failed; relying on polling until the next start", {}, jobs.reason);
    if (stops.status === "fulfilled") this.unlistenStops = stops.value;
    else logFailure(this.log, "warn", "LISTEN for stop requests failed; running jobs asked to stop learn it at their heartbeat (lease/3)", {}, stops.reason);
  }

  /** Closes what listen() opened, for a worker that will not run (its schema check failed). */
  async release(): Promise<void> {
    // A stop() that came first (during the schema check) has already ended it.
    if (this.mode === "idle") this.setMode("released");
    await this.unlistenAll();
  }

  private async unlistenAll(): Promise<void> {
    await this.listening;
    const unlisten = [this.unlisten, this.unlistenStops];
    this.unlisten = this.unlistenStops = undefined;
    for (const close of unlisten) await close?.().catch(() => {});
  }

  /**
   * Graceful stop: no more claims; claimed-but-unstarted jobs go straight
   * back; running jobs get the grace period, then their signal is aborted
   * and they go back to the queue with the interrupted attempt uncounted.
   */
  stop(gracePeriodMs: number = this.settings.graceMs): Promise<WorkSummary> {
    // A worker that already ended (a drained `once`, a release) has nothing to stop.
    this.stopPromise ??= this.finished ? Promise.resolve({ ...this.summary }) : this.shutdown(gracePeriodMs);
    return this.stopPromise;
  }

  /** Ends the grace period of a stop in progress now (a second SIGTERM). */
  hurry(): void {
    this.hurried.resolve();
  }

  /**
   * Heartbeats every job this worker holds now. The reap chore calls it on
   * the workers of its own process before it reaps, so a process whose
   * timers were held up (a stalled pool, a blocked event loop) never takes
   * back its own live jobs.
   */
  async beat(): Promise<void> {
    if (this.inMode("starting", "running", "stopping")) await this.heartbeats.beatNow();
  }

  /** The jobs this worker holds (running, waiting for a slot, or ended with the result not yet written): its own reaper spares them. */
  heldJobIds(): number[] {
    return this.held().map((attempt) => attempt.id);
  }

  /** True once the worker has stopped (or drained) and left the registry, or was released without running. */
  get finished(): boolean {
    return this.mode === "stopped" || this.mode === "released";
  }

  private wake(): void {
    this.more = true;
    this.signals += 1;
    this.pump();
  }

  /** The event loop of the worker: start what can run, claim when the buffer runs low, finish when drained. */
  private pump(): void {
    if (!this.claiming) return;
    // Handlers start synchronously (src/jobs/attempt.ts): one may stop the worker while this loop runs.
    while (this.claiming && this.active.size - this.chores.size < this.concurrency && this.buffer.length > 0) this.startJob(this.buffer.shift() as ClaimedJob);
    const held = this.active.size - this.chores.size + this.buffer.length;
    if (this.claimRetryTimer === undefined) {
      const limit = this.more
        ? claimSize({
            concurrency: this.concurrency,
            batchSize: this.settings.batchSize,
            // Read fresh: a worker's first finished job sizes the claim that follows it (read at the previous
            // claim's start instead, the first claim's 0 made the second claim a single row).
            rate: this.durations.sustainableRate(this.concurrency),
            held,
            claims: this.claims.size,
            claimingRows: this.claimingRows,
          })
        : 0;
      // Every claim takes ready chores too; with every slot busy, a chores-only claim goes out when one may be ready.
      if (limit > 0 || (this.choresWanted && this.settings.chores !== undefined && this.claims.size === 0)) this.startClaim(limit);
    }
    if (this.settings.once && !this.more && this.claims.size === 0 && this.active.size + this.buffer.length === 0 && !this.batcher.busy) {
      this.drained.resolve();
    }
  }

  private startClaim(limit: number): void {
    this.choresWanted = false;
    this.claimingRows += limit;
    const claim: Promise<void> = this.claim(limit).finally(() => {
      this.claimingRows -= limit;
      this.claims.delete(claim);
      this.pump();
    });
    this.claims.add(claim);
  }

  private async claim(limit: number): Promise<void> {
    const signalsBefore = this.signals;
    const { chores } = this.settings;
    const sent = this.deps.health.sent();
    const claimedFrom = performance.now();
    const pending = this.deps.store.claim({
      workerId: this.id,
      queues: this.queues,
      jobNames: this.jobNames,
      limit,
      chores: chores === undefined ? undefined : { ...chores, limit: CHORE_CLAIM_LIMIT },
      now: this.settings.clock?.(),
    });
    let rows: ClaimedJob[];
    try {
      const answer = await withinDeadline(pending, this.settings.claimTimeoutMs);
      if (!answer.done) {
        // Stop waiting, so the next claim can go out; whatever this one claimed still runs when it answers.
        // During a known outage that is expected (the outage is logged once, src/db/health.ts): debug only.
        const level = this.deps.health.down ? "debug" : "warn";
        this.log[level]("a claim has not answered; claiming again without waiting for it", { claimTimeoutMs: this.settings.claimTimeoutMs });
        pending.then(
          (answered) => {
            this.claimed(answered.length, claimedFrom);
            // A worker stopping by then leaves them to the reaper (back to the queue after the lease).
            if (!this.claiming) return;
            this.absorb(answered, 0, signalsBefore);
            this.pump();
          },
          () => undefined,
        );
        this.more = true;
        return;
      }
      rows = answer.value;
      this.claimed(rows.length, claimedFrom);
      this.claimBackoff.reset();
      sent.succeeded();
    } catch (error) {
      const retryInMs = this.claimBackoff.next(retryCapMs(error, MAX_RETRY_BACKOFF_MS));
      if (chores !== undefined) this.choresWanted = true;
      logFailure(this.log, "warn", "claiming jobs failed; retrying", { retryInMs }, error, sent);
      // Before the next claim, this worker's own state goes first (resync): a claim could otherwise take back a job
      // whose result waits here, which the reaper returned to the queue meanwhile.
      this.claimRetryTimer = setTimeout(() => void this.resync(), retryInMs);
      return;
    }
    this.absorb(rows, limit, signalsBefore);
  }

  private claimed(count: number, fromMs: number): void {
    this.deps.events.jobsClaimed({ workerId: this.id, queues: this.queues, count, durationSeconds: (performance.now() - fromMs) / 1000 });
  }

  /** Takes in the rows of a claim that asked for `limit`: chores start at once, the rest wait in the buffer for a slot. */
  private absorb(rows: readonly ClaimedJob[], limit: number, signalsBefore: number): void {
    const choreNames = this.settings.chores?.jobNames ?? [];
    const choreRows = rows.filter((job) => choreNames.includes(job.jobName));
    const ordinary = choreRows.length === 0 ? [...rows] : rows.filter((job) => !choreNames.includes(job.jobName));
    // A wake-up that arrived while this claim ran may announce jobs its snapshot did not see.
    if (ordinary.length < limit && this.signals === signalsBefore) this.more = false;
    if (rows.length === 0) return;
    ordinary.sort((a, b) => a.priority - b.priority || a.runAtMs - b.runAtMs || a.id - b.id);
    this.summary.claimed += rows.length;
    if (!this.claiming) {
      for (const job of rows) this.handBack(job);
      return;
    }
    // Chores start at once, beside whatever fills the slots; the claim's other rows are held (and heartbeated) first,
    // since a handler's first steps run inside startJob (the reap chore beats this worker's jobs before it reaps).
    this.buffer.push(...ordinary);
    for (const job of choreRows) {
      this.chores.add(job.id);
      this.startJob(job);
    }
  }

  private startJob(job: ClaimedJob): void {
    const definition = this.deps.jobs.get(job.jobName);
    const started = performance.now();
    const attempt = new Attempt(
      {
        jobId: job.id,
        jobName: job.jobName,
        attempt: job.attempts,
        maxAttempts: job.maxAttempts,
        scheduledFor: job.scheduledForMs === null ? null : new Date(job.scheduledForMs),
        scheduleKey: job.scheduleKey,
        idempotencyKey: job.idempotencyKey,
      },
      this.deps.attempts,
    );
    const entry: ActiveJob = { job, attempt, settled: NOT_STARTED };
    this.active.set(job.id, entry);
    entry.settled = this.execute(job, definition, attempt).then(
      (completion) => this.settle(job, definition, completion, started),
      (error: unknown) => this.settle(job, definition, this.failure(job, definition, error), started),
    );
  }

  private async execute(job: ClaimedJob, definition: JobDefinition | undefined, attempt: Attempt): Promise<Completion> {
    const { scheduleKey, queue, traceContext } = job;
    this.deps.events.jobStarted({ jobId: job.id, jobName: job.jobName, attempt: job.attempts, maxAttempts: job.maxAttempts, queue, scheduleKey, scheduledFor: attempt.scheduledFor, traceContext });
    if (definition === undefined) return this.failure(job, undefined, new JobNotRegisteredError(job.jobName));
    const parsed = validatePayload(definition, JSON.parse(job.payload));
    if (!parsed.ok) return this.failure(job, definition, new InvalidStoredJobError(job.jobName, job.id, parsed.issues));
    const timeout = setTimeout(() => attempt.abort(new JobTimeoutError(job.jobName, definition.timeoutMs)), definition.timeoutMs);
    try {
      // With tracing on, the handler runs inside its attempt's span (src/tracing.ts); without, as it always did.
      const { tracing } = this.deps;
      const result = tracing === undefined ? await attempt.run(definition, parsed.value) : await tracing.attempt(job.id, job.attempts, () => attempt.run(definition, parsed.value));
      const stopped = stoppedCompletion(job, attempt);
      if (stopped !== null) return stopped;
      const outcome = result && typeof result === "object" && (result.outcome === "skip" || result.outcome === "noop") ? result.outcome : null;
      return { kind: "succeeded", id: job.id, attempt: job.attempts, outcome };
    } catch (error) {
      // A hand-back of a job asked to stop ends it cancelled all the same (the completion statement sees the request).
      if (attempt.abortReason instanceof WorkerShutdownError) return { kind: "returned", id: job.id, attempt: job.attempts };
      const stopped = stoppedCompletion(job, attempt);
      if (stopped !== null) return stopped;
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
    if (terminal) return { kind: "failed", id: job.id, attempt: job.attempts, error: message };
    const policy = effectiveRetryPolicy(definition.retry, readStoredRetryPolicy(job.retryPolicy));
    return { kind: "retry", id: job.id, attempt: job.attempts, error: message, delayMs: retryDelayMs(policy, job.attempts, this.random) };
  }

  private handBack(job: ClaimedJob): void {
    this.summary.returned += 1;
    this.batcher.add({ kind: "returned", id: job.id, attempt: job.attempts });
  }

  private settle(job: ClaimedJob, definition: JobDefinition | undefined, completion: Completion, started: number): void {
    const entry = this.active.get(job.id);
    if (entry === undefined) return;
    this.active.delete(job.id);
    this.chores.delete(job.id);
    this.stops.ended(job.id);
    if (entry.attempt.abortReason instanceof LeaseLostError) {
      // Another attempt holds the job now: this one's end is still written, as a superseded attempt (never dropped).
      this.batcher.add(completion);
      return;
    }
    count(this.summary, completion);
    const status = attemptStatus(completion);
    if (status === null) {
      this.batcher.add(completion);
      return;
    }
    const durationSeconds = (performance.now() - started) / 1000;
    const base = { jobId: job.id, jobName: job.jobName, attempt: job.attempts, status, durationSeconds };
    if (completion.kind === "retry") {
      const nextRunAt = new Date((this.settings.clock?.() ?? new Date()).getTime() + completion.delayMs);
      this.deps.events.jobFinished({ ...base, error: completion.error, nextRunAt });
      this.log.warn("job attempt failed; retrying", { ...attemptFields(job), nextRunAt: nextRunAt.toISOString(), error: completion.error });
    } else if (completion.kind === "failed") {
      this.deps.events.jobFinished({ ...base, error: completion.error });
      this.log.error("job failed terminally", { ...attemptFields(job), registered: definition !== undefined, error: completion.error });
    } else if (completion.kind === "cancelled") {
      this.deps.events.jobFinished(base);
      this.log.info("job stopped as asked: cancelled", attemptFields(job));
    } else {
      this.deps.events.jobFinished(base);
    }
    this.durations.add(durationSeconds * 1000);
    // A drain also picks up what its own jobs enqueued.
    if (this.settings.once) {
      this.more = true;
      this.signals += 1;
    }
    this.batcher.add(completion);
    this.pump();
    // Nothing left running or waiting to run: its completion is written now, not after the batching delay.
    if (this.active.size === 0 && this.buffer.length === 0) this.batcher.flushNow();
  }

  /** The attempts this worker holds, for its heartbeats: running, claimed and waiting for a slot, or ended with the result not yet written. */
  private held(): HeldAttempt[] {
    const held: HeldAttempt[] = [];
    for (const { job } of this.active.values()) held.push({ id: job.id, attempt: job.attempts });
    for (const job of this.buffer) held.push({ id: job.id, attempt: job.attempts });
    for (const attempt of this.batcher.holding()) held.push(attempt);
    return held;
  }

  /**
   * After a failed claim (the database out of reach, or a statement refused),
   * before claiming again: a heartbeat, which takes back this worker's jobs
   * that the reaper returned to the queue meanwhile, then the results that
   * wait here. Only then a claim: it could otherwise take back, as a new
   * attempt, a job whose result waits here. Retried with the claim's backoff
   * until both are written.
   */
  private async resync(): Promise<void> {
    if (!this.claiming) {
      this.claimRetryTimer = undefined;
      return;
    }
    const ready = (await this.heartbeats.beatNow()) && (!this.batcher.stalled || (await this.batcher.retryNow()));
    if (!this.claiming) {
      this.claimRetryTimer = undefined;
      return;
    }
    if (!ready) {
      this.claimRetryTimer = setTimeout(() => void this.resync(), this.claimBackoff.next(MAX_RETRY_BACKOFF_MS));
      return;
    }
    this.claimRetryTimer = undefined;
    this.pump();
  }

  /**
   * Writes now the results that wait behind a failed write, without their
   * backoff, within `timeoutMs`: the scheduler of the same process calls it
   * before a pass, so that a pass after an outage sees the jobs that ended
   * during it as ended (an overlap policy's `skip` must not skip a slot for a
   * job that finished while the database was out of reach).
   */
  async writeWaitingResults(timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (this.batcher.stalled && this.inMode("starting", "running")) {
      const left = deadline - performance.now();
      if (left <= 0) return;
      const written = await withinDeadline(this.batcher.retryNow(), left);
      // A try that failed at once (the connection not back yet): the next one a moment later, within the deadline.
      if (!written.done || !written.value) await new Promise((resolve) => setTimeout(resolve, Math.min(RESULTS_RETRY_MS, Math.max(0, deadline - performance.now()))));
    }
  }

  /** Results the claim's fence turned away: logged, and an event for the metrics (src/db/sql/jobs.ts, settleLateCompletions). */
  private lateResults(results: readonly LateCompletion[]): void {
    for (const result of results) {
      if (result.fate === "written") continue;
      const fields = { jobId: result.id, job: result.jobName, attempt: result.attempt, jobAttempts: result.jobAttempts, jobStatus: result.jobStatus };
      if (result.fate === "amended") {
        this.log.info("a job ended while the database was out of reach for longer than the lease; its result now replaces the reaper's verdict", fields);
      } else {
        this.log.warn(
          "a job's result arrived after its lease had lapsed and another attempt had claimed it (or it had ended otherwise): the job ran twice; this attempt's result is kept in cronledger.superseded_attempts",
          fields,
        );
      }
      this.deps.events.lateCompletion({
        jobId: result.id,
        jobName: result.jobName ?? "?",
        attempt: result.attempt,
        fate: result.fate,
        jobAttempts: result.jobAttempts,
        jobStatus: result.jobStatus,
      });
    }
  }

  /**
   * Attempts another attempt holds now (the reaper took them back and someone claimed them): running ones are aborted,
   * buffered ones dropped. Only that attempt: a later attempt of the same job this worker claimed since (a retry
   * claimed while the beat was out) is its own, and runs on.
   */
  private lost(attempts: readonly HeldAttempt[]): void {
    for (const { id, attempt } of attempts) {
      const active = this.active.get(id);
      if (active) {
        if (active.job.attempts !== attempt) continue;
        this.log.warn("a running job was reaped (stale heartbeat) and claimed by another attempt; aborting it here", { jobId: id, job: active.job.jobName, attempt });
        active.attempt.abort(new LeaseLostError(id));
        continue;
      }
      const index = this.buffer.findIndex((job) => job.id === id && job.attempts === attempt);
      if (index >= 0) this.buffer.splice(index, 1);
    }
  }

  private async shutdown(gracePeriodMs: number): Promise<WorkSummary> {
    this.setMode("stopping");
    this.stopTimers();
    await this.unlistenAll();
    for (const job of this.buffer.splice(0)) this.handBack(job);
    await Promise.all(this.claims);

    const running = () => Promise.all([...this.active.values()].map((entry) => entry.settled));
    // The grace period, cut short by a second signal (hurry()).
    const ended = await withinDeadline(running(), gracePeriodMs, this.hurried.promise);
    if (!ended.done && this.active.size > 0) {
      this.log.warn("grace period over; aborting running jobs and returning them to the queue", { jobs: this.active.size, gracePeriodMs });
      const reason = new WorkerShutdownError(this.id);
      for (const entry of this.active.values()) entry.attempt.abort(reason);
      await withinDeadline(running(), ABORT_SETTLE_MS);
      // Handlers that ignore their signal are handed back anyway: this process is going away.
      for (const entry of [...this.active.values()]) {
        this.active.delete(entry.job.id);
        this.chores.delete(entry.job.id);
        this.handBack(entry.job);
      }
    }
    await this.batcher.drain();
    this.heartbeats.stop();
    this.drained.resolve();
    await this.unregister();
    return this.finish();
  }

  /** Takes this worker out of the registry; if that fails, its row ages out (the prune chore removes it). */
  private async unregister(): Promise<void> {
    await this.deps.store.unregister(this.id).catch((error: unknown) => this.log.debug("could not remove the worker from the registry", { error: redactError(error) }));
  }

  private stopTimers(): void {
    this.stopWatchingHealth?.();
    clearInterval(this.pollTimer);
    this.stops.clear();
    clearTimeout(this.claimRetryTimer);
    this.retryWakes.clear();
  }

  private finish(): WorkSummary {
    this.setMode("stopped");
    this.stopTimers();
    this.heartbeats.stop();
    this.batcher.close();
    return { ...this.summary };
  }
}

// The worker loop: claim, start, heartbeat, complete, stop. Longer than most files (about 540
// lines, under 400 of code) because stopping gracefully (grace period, abort, hand-back without
// counting the attempt) and the wake-up sources (NOTIFY, poll, finished jobs, retries coming due,
// chores outside the slots) share the loop's state; each separable part lives in its own module (see below).
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { Backoff } from "../backoff.js";
import type { ClaimedJob, HeldAttempt } from "../db/sql/jobs.js";
import { InvalidArgumentError, LeaseLostError, WorkerShutdownError } from "../errors.js";
import { retryCapMs } from "../db/diagnose.js";
import { logFailure } from "../db/log-failure.js";
import { childLogger, type Logger } from "../log.js";
import { redactError } from "../redact.js";
import { Attempt } from "./attempt.js";
import { claimSize, DurationMeter } from "./claim-size.js";
import { attemptStatus, CompletionBatcher, count, emptySummary, type Completion, type WorkSummary } from "./completion.js";
import type { JobDefinition } from "./define-job.js";
import { Heartbeats } from "./heartbeats.js";
import type { WorkerRegistration } from "../db/sql/workers.js";
import { RetryWakes } from "./retry-wakes.js";
import type { WorkerSettings } from "./work-options.js";
import type { WorkerDependencies } from "./worker-deps.js";
import { nextMode, type WorkerMode } from "./worker-mode.js";
import { WorkerListeners } from "./worker-listeners.js";
import { claimWithin, type Claimer } from "./claim.js";
import { withinDeadline } from "../deadline.js";
import { DEFAULT_STOP_GRACE_MS, StopRequests } from "./stops.js";
import { reportAttemptEnd, reportLateResults, type AttemptReporter } from "./attempt-report.js";
import { attemptInput, failedAttempt, runAttempt, type AttemptRunner } from "./run-attempt.js";

export type { WorkSummary } from "./completion.js";
export type { WorkerDependencies } from "./worker-deps.js";
export type { WorkerSettings } from "./work-options.js";

/**
 * Claims that fail retry after 100 ms doubling to this, so a worker claims again within about a second of the
 * database coming back; a persistent cause (wrong password) waits up to a minute.
 */
export const MAX_RETRY_BACKOFF_MS = 1_000;
/** After aborting at the end of the grace period, how long handlers get to honour the signal. */
const ABORT_SETTLE_MS = 2_000;

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

export function newWorkerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
}

/**
 * Claims jobs in batches, runs them with bounded concurrency and writes
 * their ends in batches. The parts: claim sizing (src/jobs/claim-size.ts),
 * one claim statement within its timeout (src/jobs/claim.ts), a claimed
 * job's run and what it became (src/jobs/run-attempt.ts), the events and
 * log lines of its end (src/jobs/attempt-report.ts), its LISTENs
 * (src/jobs/worker-listeners.ts), one run of a handler (src/jobs/attempt.ts), completion batching
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
  /** What running an attempt and reporting its end need (src/jobs/run-attempt.ts, src/jobs/attempt-report.ts). */
  private readonly runner: AttemptRunner;
  private readonly reporter: AttemptReporter;
  /** What sending a claim needs (src/jobs/claim.ts). */
  private readonly claimer: Claimer;
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
  private readonly listeners: WorkerListeners;
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
    this.log = childLogger(deps.logger, { worker: this.id });
    this.runner = { events: deps.events, tracing: deps.tracing, random: settings.random ?? Math.random };
    this.reporter = { events: deps.events, log: this.log };
    this.claimer = { deps, log: this.log, workerId: this.id, queues: this.queues, jobNames: this.jobNames, chores: settings.chores, timeoutMs: settings.claimTimeoutMs };
    this.listeners = new WorkerListeners(deps.store, this.log, {
      ready: (queue) => {
        if (queue === this.settings.chores?.queue) this.choresWanted = true;
        if (this.queues.includes(queue)) this.wake();
      },
      // A stop request for a job this worker runs: beat now, which brings the request (who, why) with it.
      stop: (jobId) => {
        if (this.active.has(jobId)) void this.heartbeats.beatNow();
      },
    });
    this.stops = new StopRequests(settings.stopGraceMs ?? DEFAULT_STOP_GRACE_MS, this.log);
    this.batcher = new CompletionBatcher({
      write: (rows) => deps.store.complete(this.id, rows, this.settings.clock?.()),
      late: (results) => reportLateResults(this.reporter, results),
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
    return this.listeners.open(this.settings.once);
  }

  /** Closes what listen() opened, for a worker that will not run (its schema check failed). */
  async release(): Promise<void> {
    // A stop() that came first (during the schema check) has already ended it.
    if (this.mode === "idle") this.setMode("released");
    await this.listeners.close();
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
    let rows: ClaimedJob[] | null;
    try {
      rows = await claimWithin(this.claimer, limit, this.settings.clock?.(), (answered) => {
        // A worker stopping by then leaves them to the reaper (back to the queue after the lease).
        if (!this.claiming) return;
        this.absorb(answered, 0, signalsBefore);
        this.pump();
      });
      // Not answered within the claim timeout: the next claim goes out; this one's rows still run if it answers.
      if (rows === null) {
        this.more = true;
        return;
      }
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
    const attempt = new Attempt(attemptInput(job), this.deps.attempts);
    const entry: ActiveJob = { job, attempt, settled: NOT_STARTED };
    this.active.set(job.id, entry);
    entry.settled = runAttempt(this.runner, job, definition, attempt).then(
      (completion) => this.settle(job, definition, completion, started),
      (error: unknown) => this.settle(job, definition, failedAttempt(this.runner, job, definition, error), started),
    );
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
    reportAttemptEnd(this.reporter, job, definition, completion, status, durationSeconds, () => this.settings.clock?.() ?? new Date());
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
    await this.batcher.retryWithin(timeoutMs, () => this.inMode("starting", "running"));
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
    await this.listeners.close();
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

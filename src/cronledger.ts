// The facade an application holds. About 450 lines, most of them the public methods' documentation:
// each body is a few lines handing work to the Scheduler, the enqueuer, the Operations, a Worker or the Supervisor.
import { randomUUID } from "node:crypto";
import type { StandardSchemaV1 } from "./jobs/standard-schema.js";
import { createMetrics, type CronledgerMetrics } from "./admin/metrics.js";
import { openDatabase, type Database } from "./db/connection.js";
import { DatabaseHealth } from "./db/health.js";
import { migrateDatabase } from "./db/migrate.js";
import type { Executor } from "./db/executor.js";
import { ensureSchema } from "./db/schema-check.js";
import { EntryNotFoundError, InvalidArgumentError } from "./errors.js";
import { combineHooks, type CronledgerEvents, type TickReport } from "./events.js";
import type { JobDefinition } from "./jobs/define-job.js";
import type { EnqueueArgs, EnqueuedJob, EnqueueRequests, JobReference } from "./jobs/define-job.js";
import type { EnqueueManyOptions } from "./jobs/enqueue-options.js";
import { JobEnqueuer } from "./jobs/enqueuer.js";
import { triggerIdempotencyKey, triggerRequestKey } from "./jobs/trigger-key.js";
import { jobRegistry } from "./jobs/registry.js";
import { Worker, type WorkerDependencies, type WorkSummary } from "./jobs/worker.js";
import { workerStore } from "./jobs/worker-deps.js";
import type { FailureFilter, FailurePage } from "./operators/failures.js";
import { Operations, type CancelRequest, type CancelledJob, type EntryPauseResult, type RunningJob, type TriggeredRun, type ReapReport, type RetryingJob, type WaitingForWorker } from "./operators/operations.js";
import type { RetriedJob } from "./operators/retry-failed.js";
import { consoleLogger, type Logger } from "./log.js";
import { adaptLogger } from "./logger-adapter.js";
import { resolveCronledgerOptions, type CronledgerOptions, type ResolvedCronledgerOptions } from "./options.js";
import { resolveWorkOptions, type ResolvedWorkOptions, type WorkOptions } from "./jobs/work-options.js";
import { resolveStartOptions, type StartOptions } from "./runtime/start-options.js";
import { CHORE_QUEUE, choreSchedule, PRUNE_JOB, REAP_JOB } from "./runtime/chores.js";
import { reportInterval, SchedulePresence } from "./runtime/presence.js";
import { Supervisor } from "./runtime/supervisor.js";
import { findEntry } from "./schedule/find-entry.js";
import { loadEntries, Scheduler } from "./schedule/scheduler.js";
import { readDeployPlan, type DeployPlan } from "./schedule/deploy-plan.js";
import { entryJob, type TickOptions } from "./schedule/pass.js";
import { Schedules } from "./schedule/schedules.js";
import type { BackfillOptions, BackfillResult } from "./schedule/backfill.js";
import type { ResolvedEntry } from "./schedule/validate.js";
import type { ScheduleProblem } from "./errors.js";
import { buildStatus, type SchedulerStatus, type StatusOptions } from "./status/model.js";
import { EntryProblemTracker } from "./status/problems.js";
import { openTelemetryTracing } from "./open-telemetry.js";

export type { CronledgerOptions } from "./options.js";
export type { EntryStatus, SchedulerStatus } from "./status/model.js";

/**
 * What an application holds: a Scheduler (src/schedule/scheduler.ts: the
 * entries and the passes over the ledger), the enqueue path
 * (src/jobs/enqueuer.ts), the Operations (src/operators/operations.ts: what
 * operators read and do, the chores' reap and prune), workers given narrow
 * dependencies (src/jobs/worker-deps.ts), and the Supervisor that runs
 * ticker and workers under `start()`. This class only wires them together;
 * see docs/architecture.md for the map.
 */
export class Cronledger {
  readonly database: Database;
  readonly namespace: string;
  readonly logger: Logger;
  readonly events: CronledgerEvents;
  /** Every job this process can run, chores included, by name. */
  readonly jobs: ReadonlyMap<string, JobDefinition>;
  readonly entries: readonly ResolvedEntry[];
  readonly warnings: readonly ScheduleProblem[];
  /** Null when created with `metrics: false`. */
  readonly metrics: CronledgerMetrics | null;
  readonly leaseMs: number;
  readonly scheduler: Scheduler;
  /** Schedules as data: the entries the application creates, changes and removes at runtime (src/schedule/schedules.ts). */
  readonly schedules: Schedules;
  /** Whether the database is reachable, as this process's ticks, claims and heartbeats find out; an outage is logged once. */
  readonly health: DatabaseHealth;
  /** Entries whose ledger value recent ticks of this process repaired: the status warns about them (quarantines come from the ledger). */
  readonly entryProblems = new EntryProblemTracker();
  private readonly options: ResolvedCronledgerOptions;
  private readonly ownsDatabase: boolean;
  private supervisor: Supervisor | undefined;
  private readonly unobserve: (() => void) | undefined;
  private schemaCheck: Promise<void> | undefined;
  /** Reports this process's schedule as running (src/runtime/presence.ts): on a timer under start(), from tick() otherwise. */
  private readonly presence: SchedulePresence;
  private readonly workers = new Set<Worker>();
  /** Every worker this process created (work() and start()'s), so the reaper can heartbeat them first. */
  private readonly created = new Set<Worker>();
  /** What every worker of this process is given (src/jobs/worker.ts). */
  private readonly workerParts: WorkerDependencies;
  private readonly enqueuer: JobEnqueuer;
  /** What operators read and do: failures, retries, cancel, runs, counts, reap, prune (src/operators/operations.ts). */
  private readonly operations: Operations;

  constructor(options: CronledgerOptions = {}) {
    this.options = resolveCronledgerOptions(options);
    const { namespace, chores } = this.options;
    this.namespace = namespace;
    this.leaseMs = this.options.leaseMs;
    this.logger = adaptLogger(this.options.logger ?? consoleLogger);
    const choreParts = choreSchedule(this, chores);
    this.jobs = jobRegistry(this.options.jobs, choreParts.jobs);
    // Validated before the database is opened: a broken schedule creates no pool and no embedded directory.
    const schedule = loadEntries(this.options.schedule, choreParts.schedule, [...this.jobs.values()], {
      namespace,
      maxPayloadBytes: this.options.maxPayloadBytes,
      mode: this.options.invalidEntries,
      catchUpWindowMs: this.options.catchUpWindowMs,
      overlap: this.options.overlap,
    });
    this.entries = schedule.entries;
    this.warnings = schedule.warnings;
    const metricsOption = this.options.metrics;
    this.metrics =
      metricsOption === false
        ? null
        : createMetrics({
            jobNames: this.jobs.keys(),
            ...(metricsOption.registry ? { registry: metricsOption.registry } : {}),
            waitingForWorker: async () =>
              (await this.operations.waitingForWorker()).map((row) => ({ jobName: row.jobName, count: row.count, waitedSeconds: row.waitedMs / 1000 })),
          });
    // Only with the `tracing` option is @opentelemetry/api loaded (src/open-telemetry.ts); its spans come from listeners and three calls of the data path.
    const traces = this.options.tracing === undefined ? undefined : openTelemetryTracing(this.options.tracing);
    const tracing = traces?.tracing;
    const hooks = [...this.options.hooks, this.entryProblems.hooks, ...(this.metrics ? [this.metrics.hooks] : []), ...(traces ? [traces.hooks] : [])];
    this.events = combineHooks(hooks, (error) => this.logger.error("a cronledger hook threw", { error: String(error) }));
    // An open Database given in the options is the application's to close.
    this.ownsDatabase = this.options.database?.kind !== "open";
    this.database = openDatabase(this.options.database);
    this.logger.info(`using ${this.database.label}`);
    this.health = new DatabaseHealth(this.logger, this.database.label);
    const parts = { database: this.database, logger: this.logger, events: this.events };
    this.scheduler = new Scheduler({ ...parts, namespace, schedule, passTimeoutMs: this.options.passTimeoutMs, tracing });
    this.enqueuer = new JobEnqueuer({ database: this.database, jobs: this.jobs, maxPayloadBytes: this.options.maxPayloadBytes, tracing });
    this.schedules = new Schedules({
      database: this.database,
      namespace,
      jobs: [...this.jobs.values()],
      staticEntries: [...schedule.entries, ...schedule.choreEntries],
      maxPayloadBytes: this.options.maxPayloadBytes,
      catchUpWindowMs: this.options.catchUpWindowMs,
      overlap: this.options.overlap,
      ready: (executor) => this.ensureSchema(executor),
    });
    this.operations = new Operations({ ...parts, namespace, jobs: this.jobs, leaseMs: this.leaseMs, retention: chores.retention, stopGraceMs: this.options.stopGraceMs, tracing });
    // A scheduled job's ctx.schedule names its entry: the loaded entry behind its ledger key.
    const byKey = new Map([...schedule.entries, ...schedule.choreEntries].map((entry) => [entry.ledgerKey, entry]));
    const attempts = { logger: this.logger, enqueuer: this.enqueuer, entryOf: (key: string) => byKey.get(key) };
    this.workerParts = { store: workerStore(this.database), jobs: this.jobs, attempts, logger: this.logger, events: this.events, health: this.health, tracing };
    this.unobserve = this.metrics?.observe({
      status: () => this.status(),
      readyJobs: (queues, cap) => this.operations.readyStats(queues, cap),
      queues: this.knownQueues(),
      database: this.database.label,
    });
    this.presence = new SchedulePresence(() => this.scheduler.reportSchedule(), reportInterval(this.options.chores.ledgerGraceMs), this.logger);
  }

  /** Applies cronledger's migrations under an advisory lock; safe to call from every replica at boot. */
  async migrate(): Promise<{ applied: number; adopted: number }> {
    try {
      const result = await migrateDatabase(this.database);
      this.events.initFailure(false);
      return result;
    } catch (error) {
      // cronledger_init_failure: a replica that cannot migrate (database down, migration broken) is alertable before any job is late.
      this.events.initFailure(true);
      throw error;
    }
  }

  /**
   * Validates the payload, then writes the job: on cronledger's database, or
   * with `{ db: tx }` inside the application's drizzle transaction, so it
   * commits or rolls back with the business rows.
   */
  async enqueue<S extends StandardSchemaV1>(job: JobReference<S>, ...args: EnqueueArgs<S>): Promise<EnqueuedJob> {
    await this.ensureSchema(this.enqueuer.executor(args[1]?.db));
    return this.enqueuer.enqueue(job, ...args);
  }

  /**
   * Validates every payload first, then inserts all jobs in one statement (`{ db: tx }`: in the application's transaction).
   * Each request's payload is checked against its job's schema at compile time.
   */
  async enqueueMany<const R extends readonly object[]>(requests: EnqueueRequests<R>, options?: EnqueueManyOptions): Promise<EnqueuedJob[]> {
    await this.ensureSchema(this.enqueuer.executor(options?.db));
    return this.enqueuer.enqueueMany(requests, options);
  }

  /** One scheduler pass at `now` (default: the database clock); the chores are part of it with `chores: true` or options. */
  async tick(options: TickOptions = {}): Promise<TickReport> {
    await this.ensureSchema();
    const report = await this.scheduler.tick(options, this.options.chores.when === "always");
    // A process that only ticks (its own loop, `cronledger tick --once`) reports its schedule too, so the
    // prune grace counts its rarely firing entries as evaluated.
    await this.presence.reportIfDue();
    return report;
  }

  /**
   * Deletes the ledger rows of this namespace that no process has evaluated
   * for the grace (`chores.ledgerGrace`, default 7 days): rows no pass wrote
   * and no running schedule reported within it. This process's own entries
   * always stay.
   */
  async pruneLedger(options: { now?: Date } = {}): Promise<number> {
    return this.scheduler.pruneLedger(this.options.chores.ledgerGraceMs, options.now);
  }

  /**
   * The deploy plan of this ledger's schedule (the new version's config) against the live ledger, workers and
   * jobs of its database: what is added, removed, retimed, overdue or carried over (src/schedule/deploy-plan.ts).
   * Read-only. `at`: the switch instant (default: the database clock). No schema check: the plan of a release whose
   * migrations have not run yet reads the live tables as they are (docs/decisions.md).
   */
  async plan(options: { at?: Date } = {}): Promise<DeployPlan> {
    const entries = [...this.scheduler.entries, ...this.scheduler.choreEntries];
    const choreJobNames = new Set([REAP_JOB, PRUNE_JOB]);
    return readDeployPlan(this.database.db, { namespace: this.namespace, entries, choreJobNames, jobNames: new Set(this.jobs.keys()), atMs: options.at?.getTime(), graceMs: this.options.chores.ledgerGraceMs });
  }

  /**
   * The status model: every entry with its state (ok, late, failing...) and why, its last slot, next run,
   * latest run and problems; invalid entries; job counts (see src/status/model.ts). `now` judges the
   * entries at that instant instead of the database clock (tests, like `tick({ now })`); `runs` adds the
   * recent runs of one page of entries (`recentRuns`, the Schedule page's strips). A constant number of
   * statements whatever the number of entries.
   */
  async status(options: StatusOptions = {}): Promise<SchedulerStatus> {
    return buildStatus(
      { scheduler: this.scheduler, reads: this.operations, problems: this.entryProblems, chores: this.options.chores.when !== "never", dynamic: this.schedules },
      options,
    );
  }

  /** Ready jobs no live worker knows (no worker serving their queue has registered their name), by job name. */
  async waitingForWorker(): Promise<WaitingForWorker[]> {
    return this.operations.waitingForWorker();
  }

  /** Terminal failures (the failure tickets), newest first, without payloads and with errors redacted. */
  async failures(filter: FailureFilter = {}): Promise<FailurePage> {
    return this.operations.failures(filter);
  }

  /** Re-enqueues failed job `id` as a new queued job; retrying the same failure twice returns the first retry. */
  async retryJob(id: number): Promise<RetriedJob> {
    return this.operations.retryFailed(id);
  }

  /**
   * Cancels job `id`. Waiting for its first run or a retry: it ends
   * `cancelled` and never runs (again). Running: it is asked to stop; its
   * worker aborts its `ctx.signal` with a JobCancelledError saying who
   * (`by`) and why (`reason`), the job ends `cancelled` when the handler
   * returns (never retried), or is failed as killed after `stopGrace`.
   */
  async cancelJob(id: number, request: CancelRequest = {}): Promise<CancelledJob> {
    return this.operations.cancel(id, request);
  }

  /**
   * Backfills entry `entry` (its key, job name, identity or ledger key): one
   * job per slot of `[from, to]` that has none yet, each with its own
   * `scheduledFor` and `ctx.schedule.backfilled`; slots after the ledger are
   * left to the ticker. `dryRun` lists them; `max` / `latest` bound them;
   * more than BACKFILL_CAP needs `force`. See docs/operations.md.
   */
  async backfill(entry: string, options: BackfillOptions): Promise<BackfillResult> {
    return this.scheduler.backfill(await this.entryNamed(entry), options);
  }

  /**
   * The entry an operator names: one of this process's schedule
   * (src/schedule/find-entry.ts), else a dynamic entry by its key or ledger
   * key (`ledger.schedules`), read from the database; the static schedule's
   * did-you-mean otherwise.
   */
  private async entryNamed(name: string): Promise<ResolvedEntry> {
    try {
      return findEntry(this.entries, name);
    } catch (error) {
      if (!(error instanceof EntryNotFoundError)) throw error;
      const chore = [...this.scheduler.choreEntries].find((entry) => [entry.jobName, entry.identity, entry.ledgerKey, entry.entryKey].includes(name));
      if (chore !== undefined || name === REAP_JOB || name === PRUNE_JOB) throw choreNamed(chore?.jobName ?? name);
      await this.ensureSchema();
      const dynamic = await this.schedules.resolved(name);
      if (dynamic === undefined) throw error;
      return dynamic;
    }
  }

  /**
   * Pauses schedule entry `entry` (its key, its job name when one entry runs
   * it, or its identity): the pause lives in its ledger row, so every
   * replica, and every later restart or deploy that keeps the entry, records
   * its slots as skipped (paused) instead of enqueuing them, and shows it as
   * `paused` with `note` and `by`. An unknown name throws
   * EntryNotFoundError with a did-you-mean.
   */
  async pause(entry: string, options: { note?: string | null; by?: string } = {}): Promise<EntryPauseResult> {
    const found = await this.entryNamed(entry);
    return this.operations.pause({ identity: found.identity, key: found.ledgerKey, jobName: found.jobName }, options.by ?? "api", options.note ?? null);
  }

  /** Resumes a paused entry: the next slot fires as usual, never a burst of the paused ones. */
  async resume(entry: string, options: { by?: string } = {}): Promise<EntryPauseResult> {
    const found = await this.entryNamed(entry);
    return this.operations.resume({ identity: found.identity, key: found.ledgerKey, jobName: found.jobName }, options.by ?? "api");
  }

  /** Running jobs, longest-running first, with any stop request on them (what a running job's `cancelJob` is for). */
  async running(options: { limit?: number; id?: number } = {}): Promise<RunningJob[]> {
    return this.operations.running(options.limit ?? 50, options.id);
  }

  /**
   * Clears the quarantine of the entry with this ledger key (the `key` in the
   * status; or its identity, for an entry of this process's schedule), once
   * its cause is fixed: every replica's next pass fires its due slot. Null
   * when the namespace has no such ledger row.
   */
  async clearQuarantine(key: string): Promise<{ key: string; jobName: string; wasQuarantined: boolean } | null> {
    return (await this.scheduler.clearQuarantine(key)) ?? null;
  }

  /**
   * Runs schedule entry `entry` now, outside its schedule, with its payload,
   * queue and priority; its handler sees `ctx.schedule.trigger` (`by` and the
   * request id). The entry's overlap policy applies as to a slot (a `skip`
   * entry with a live job records the run-now as skipped instead). `requestId`
   * is the idempotency key, alone and per entry: a second call with the same
   * id returns the first call's job, whoever makes it (default: a fresh id,
   * so every call runs).
   */
  async trigger(entry: string, options: { by?: string; requestId?: string } = {}): Promise<TriggeredRun> {
    const found = await this.entryNamed(entry);
    const by = options.by ?? "api";
    const requestId = options.requestId ?? randomUUID();
    const idempotencyKey = triggerIdempotencyKey(requestId, by, found.ledgerKey);
    const requestKey = triggerRequestKey(found.ledgerKey, requestId);
    await this.ensureSchema();
    return this.operations.trigger(
      { identity: found.identity, key: found.ledgerKey, jobName: found.jobName },
      { requestId, by },
      { ...entryJob(found), idempotencyKey, requestKey },
    );
  }

  /** Jobs waiting for a retry after a failed attempt, soonest first (what `cancelJob` is usually for). */
  async retrying(options: { limit?: number } = {}): Promise<RetryingJob[]> {
    return this.operations.retrying(options.limit ?? 50);
  }

  /**
   * Runs jobs in this process. `once`: drains what is ready now and resolves
   * with a summary; otherwise runs until `stop()` and resolves then.
   */
  async work(options: WorkOptions = {}): Promise<WorkSummary> {
    const resolved = resolveWorkOptions(options);
    const worker = this.createWorker(resolved, this.options.chores.when === "always");
    // Known to stop() from here on: a stop() during the schema check ends this call too.
    this.workers.add(worker);
    try {
      // Its LISTEN connection opens while the schema is checked (src/jobs/worker.ts, listen()).
      void worker.listen();
      try {
        await this.ensureSchema();
      } catch (error) {
        await worker.release();
        throw error;
      }
      return await worker.run();
    } finally {
      this.workers.delete(worker);
    }
  }

  /**
   * Starts the runtime: the ticker (sleeping until the next fire time, at
   * most 30 s), workers with heartbeats, and the chores. Returns at once;
   * SIGTERM / SIGINT stop it gracefully (see `stop()`).
   */
  async start(options: StartOptions = {}): Promise<void> {
    if (this.supervisor) throw new InvalidArgumentError("start() was already called on this Cronledger; call stop() first.");
    const resolved = resolveStartOptions(options);
    const chores = this.scheduler.choreEntries.length > 0;
    const supervisor = new Supervisor(
      {
        logger: this.logger,
        health: this.health,
        tick: () => this.scheduler.tick({}, chores),
        createWorker: (settings) => this.createWorker({ ...settings, once: false }, chores),
        close: () => this.close(),
      },
      resolved,
    );
    // Throws before anything runs when the first worker cannot be made; only a started supervisor is kept.
    // The first worker's LISTEN connection opens while the schema is checked.
    supervisor.prepare();
    try {
      await this.ensureSchema();
    } catch (error) {
      await supervisor.abandon();
      throw error;
    }
    supervisor.start();
    this.supervisor = supervisor;
    // The schedule this process runs is reported while it runs, so no other version's prune chore deletes its rows.
    this.presence.start();
  }

  /**
   * Graceful stop of `start()` and of running `work()` calls: no new claims,
   * running jobs get their grace period, the rest are aborted through
   * ctx.signal and returned to the queue without counting the attempt.
   */
  async stop(): Promise<WorkSummary | undefined> {
    const supervisor = this.supervisor;
    this.presence.stop();
    const [summary] = await Promise.all([supervisor?.stop(), ...[...this.workers].map((worker) => worker.stop())]);
    if (this.supervisor === supervisor) this.supervisor = undefined;
    return summary;
  }

  /**
   * Returns running jobs whose heartbeat is older than the lease to the
   * queue, or fails them when out of attempts. This process's own workers
   * heartbeat first and are spared: whatever held up their timers (a stalled
   * pool, a blocked event loop, a connection lost for longer than the lease),
   * this process never takes back a job its workers hold, running or
   * finished with the result not yet written.
   */
  async reap(options: { now?: Date } = {}): Promise<ReapReport> {
    for (const worker of this.created) if (worker.finished) this.created.delete(worker);
    await Promise.all([...this.created].map((worker) => worker.beat()));
    // And spares them outright: a beat that failed (the database flapping) must not let this process fail a job it
    // still runs, or one whose result waits to be written (docs/decisions.md, "A completion is fenced by its claim").
    // Only the jobs they hold: a claim committed whose answer never arrived (its connection ended first) leaves a
    // job locked by a live worker that does not know it, which is reaped after the lease like a dead worker's.
    return this.operations.reap(
      options.now,
      [...this.created].flatMap((worker) => worker.heldJobIds()),
    );
  }

  /**
   * The prune chore: ledger rows no process has evaluated for the grace,
   * queued jobs no live worker has known for `chores.failUnregisteredAfter`
   * (failed with JobNotRegisteredError) and the registry rows of dead
   * workers, then finished jobs older than their retention (in bounded batches).
   */
  async prune(options: { now?: Date } = {}): Promise<{ ledgerRows: number; jobRows: number; failedUnregistered: number }> {
    const ledgerRows = await this.scheduler.pruneLedger(this.options.chores.ledgerGraceMs, options.now);
    const { failedUnregistered } = await this.operations.pruneRegistry(this.options.chores.failUnregisteredAfterMs, options.now);
    const jobRows = await this.operations.pruneFinished(options.now);
    await this.schedules.foldCounts();
    return { ledgerRows, jobRows, failedUnregistered };
  }

  /**
   * A worker serving `options.queues`, else every queue of the registered
   * jobs and schedule entries plus "default". One that serves the chores
   * serves their queue whatever queues it was given: otherwise
   * `start({ queues: ["default"] })` would enqueue reap jobs nobody runs, and
   * crashed jobs would stay running.
   */
  private createWorker(options: ResolvedWorkOptions, servesChores: boolean): Worker {
    const queues = [...new Set(options.queues === undefined ? this.knownQueues() : servesChores ? [...options.queues, CHORE_QUEUE] : options.queues)];
    // A worker whose queues include the chores' runs them outside its slots (src/jobs/worker.ts).
    const choreNames = [REAP_JOB, PRUNE_JOB].filter((name) => this.jobs.has(name));
    const chores = choreNames.length > 0 && queues.includes(CHORE_QUEUE) ? { queue: CHORE_QUEUE, jobNames: choreNames } : undefined;
    const worker = new Worker(this.workerParts, {
      ...options,
      queues,
      leaseMs: options.leaseMs ?? this.leaseMs,
      namespace: this.namespace,
      chores,
      stopGraceMs: this.options.stopGraceMs,
    });
    this.created.add(worker);
    return worker;
  }

  /** "default" and every queue of the registered jobs (chores included) and schedule entries. */
  private knownQueues(): string[] {
    return [...new Set(["default", ...[...this.jobs.values()].map((job) => job.queue), ...this.entries.map((entry) => entry.queue)])];
  }

  /**
   * The schema check (src/db/schema-check.ts) before the first write: one
   * catalog statement per process, remembered once it passes. A failure
   * (schema or connection) sets cronledger_init_failure and throws, e.g. a
   * MigrationRequiredError naming the command to run.
   */
  private ensureSchema(executor?: Executor): Promise<void> {
    this.schemaCheck ??= ensureSchema(this.database, executor).then(
      () => this.events.initFailure(false),
      (error: unknown) => {
        this.schemaCheck = undefined;
        this.events.initFailure(true);
        throw error;
      },
    );
    return this.schemaCheck;
  }

  async close(): Promise<void> {
    this.unobserve?.();
    await this.stop();
    if (this.ownsDatabase) await this.database.close();
  }
}

export function createCronledger(options: CronledgerOptions = {}): Cronledger {
  return new Cronledger(options);
}

/** An operator named one of cronledger's own chores where an entry of the application's schedule belongs. */
function choreNamed(job: string): InvalidArgumentError {
  const does = job === REAP_JOB ? "returns to the queue the jobs whose worker died" : "drops finished jobs past their retention and workers that stopped reporting";
  return new InvalidArgumentError(
    `${job} is one of cronledger's chores (it ${does}), not an entry of your schedule: chores cannot be paused, resumed, run now or backfilled. ` +
      "The `chores` option of createCronledger() or the config says whether and when they run.",
  );
}

import { sql } from "drizzle-orm";
import type { Registry } from "prom-client";
import type { z } from "zod";
import { EntryProblemTracker } from "./admin/entry-problems.js";
import { listFailures, type FailureFilter, type FailurePage } from "./admin/failures.js";
import { createMetrics, type CronledgerMetrics } from "./admin/metrics.js";
import { retryFailedJob, type RetriedJob } from "./admin/retry-job.js";
import { openDatabase, query, type Database, type DatabaseSetting } from "./db/connection.js";
import { migrateDatabase } from "./db/migrate.js";
import { ConfigError } from "./errors.js";
import { combineHooks, type CronledgerEvents, type CronledgerHooks } from "./events.js";
import type { JobDefinition } from "./jobs/define-job.js";
import { enqueueJobs, type EnqueuedJob, type EnqueueOptions, type EnqueueRequest, type JobReference } from "./jobs/enqueue.js";
import { consoleLogger, type Logger } from "./log.js";
import type { ScheduleEntry } from "./schedule/define-schedule.js";
import { pruneLedger } from "./schedule/prune.js";
import { runTick, type FireMemo, type TickOptions, type TickReport } from "./schedule/tick.js";
import { loadSchedule, type ResolvedEntry } from "./schedule/validate.js";
import type { ScheduleProblem } from "./errors.js";
import { parseDuration, type Duration } from "./duration.js";
import { resolveMaxPayloadBytes } from "./jobs/payload-limit.js";
import { DEFAULT_LEASE_MS, reapStaleJobs, type ReapReport } from "./jobs/reaper.js";
import { pruneFinishedJobs, resolveRetention, type ResolvedRetention } from "./jobs/retention.js";
import { Worker, type WorkOptions, type WorkSummary } from "./jobs/worker.js";
import { CHORE_QUEUE, choreSchedule, type ChoresSetting } from "./runtime/chores.js";
import { Supervisor, type StartOptions } from "./runtime/supervisor.js";

export interface CronledgerOptions {
  /**
   * PostgreSQL URL; omitted: DATABASE_URL, else embedded PGlite in ./.cronledger ("memory://" for in-memory).
   * An already-open Database (from openDatabase) is shared, and close() leaves it open.
   */
  readonly database?: DatabaseSetting | Database;
  readonly jobs?: readonly JobDefinition[];
  readonly schedule?: readonly ScheduleEntry[];
  /** Separates apps sharing one database: each prunes and evaluates only its own ledger rows. */
  readonly namespace?: string;
  readonly logger?: Logger;
  /** Listeners for ticks and job attempts (metrics, logs, the demo's event lines). */
  readonly hooks?: CronledgerHooks | readonly CronledgerHooks[];
  /** Prometheus metrics, on by default in a Registry of their own (`ledger.metrics.registry`); pass yours to share it, or false to turn them off. */
  readonly metrics?: { readonly registry?: Registry } | false;
  /**
   * The reaper and prune chores, run as ledger entries (each slot once across
   * the cluster). Default: on wherever `start()` runs, left out of bare
   * `tick()` calls; `true` or options: always; `false`: never.
   */
  readonly chores?: ChoresSetting;
  /** A running job without a heartbeat for this long is reaped; default 30 s. Heartbeats go every lease/3. */
  readonly lease?: Duration;
  /**
   * Largest payload, in bytes of its stored JSON, that enqueue, enqueueMany and
   * schedule entries accept; default 1 MiB (1048576). Larger ones are refused
   * with a PayloadTooLargeError before anything is written.
   */
  readonly maxPayloadBytes?: number;
}

export interface EntryStatus {
  readonly identity: string;
  readonly key: string;
  readonly jobName: string;
  readonly cron: string;
  readonly timezone: string;
  readonly lastEnqueuedSlot: Date | null;
  readonly nextRunAt: Date | null;
  /** One of cronledger's own chores (`cronledger.reap`, `cronledger.prune`), not an entry of the app's schedule. */
  readonly chore: boolean;
}

export interface SchedulerStatus {
  readonly databaseNow: Date;
  readonly namespace: string;
  readonly entries: readonly EntryStatus[];
  readonly warnings: readonly ScheduleProblem[];
  readonly queues: Readonly<Record<string, Readonly<Record<string, number>>>>;
}

export class Cronledger {
  readonly database: Database;
  readonly namespace: string;
  readonly logger: Logger;
  readonly events: CronledgerEvents;
  readonly jobs: ReadonlyMap<string, JobDefinition>;
  readonly entries: readonly ResolvedEntry[];
  readonly warnings: readonly ScheduleProblem[];
  /** Null when created with `metrics: false`. */
  readonly metrics: CronledgerMetrics | null;
  /** Entries that recent ticks quarantined or repaired: the admin status lists them as broken. */
  readonly entryProblems = new EntryProblemTracker();
  private readonly memo: FireMemo = new Map();
  private readonly deferred = new Map<string, number>();
  private readonly clock: { offsetMs: number | undefined } = { offsetMs: undefined };
  readonly leaseMs: number;
  readonly maxPayloadBytes: number;
  private readonly retention: ResolvedRetention;
  private readonly choreEntries: readonly ResolvedEntry[];
  private readonly entriesWithChores: readonly ResolvedEntry[];
  private choresActive: boolean;
  private supervisor: Supervisor | undefined;
  private readonly workers = new Set<Worker>();
  private readonly ownsDatabase: boolean;

  constructor(options: CronledgerOptions = {}) {
    this.namespace = options.namespace ?? "default";
    if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(this.namespace)) {
      throw new ConfigError(`Invalid namespace ${JSON.stringify(this.namespace)}: use 1-64 letters, digits and . _ : -.`);
    }
    this.logger = options.logger ?? consoleLogger;
    const jobs = options.jobs ?? [];
    const registry = new Map<string, JobDefinition>();
    for (const job of jobs) {
      if (registry.has(job.name) && registry.get(job.name) !== job) {
        throw new ConfigError(`Two different jobs are named "${job.name}": job names are identities and must be unique.`);
      }
      registry.set(job.name, job);
    }
    const chores = choreSchedule(this, options.chores);
    for (const job of chores.jobs) {
      if (registry.has(job.name)) throw new ConfigError(`The job name "${job.name}" is reserved for cronledger's chores; rename your job.`);
      registry.set(job.name, job);
    }
    this.jobs = registry;
    this.leaseMs = parseDuration(options.lease ?? DEFAULT_LEASE_MS, "lease");
    this.maxPayloadBytes = resolveMaxPayloadBytes(options.maxPayloadBytes);
    this.retention = resolveRetention(typeof options.chores === "object" ? options.chores.retention : undefined);
    this.choresActive = options.chores !== undefined && options.chores !== false;
    // Throws one ScheduleValidationError listing every problem: a worker refuses to boot on a broken schedule.
    const loaded = loadSchedule(options.schedule ?? [], jobs, { namespace: this.namespace, maxPayloadBytes: this.maxPayloadBytes });
    this.entries = loaded.entries;
    this.warnings = loaded.warnings;
    this.choreEntries = loadSchedule(chores.schedule, chores.jobs, { namespace: this.namespace }).entries;
    this.entriesWithChores = [...this.entries, ...this.choreEntries];
    for (const warning of loaded.warnings) this.logger.warn(warning.message, { code: warning.code });
    const userHooks = options.hooks === undefined ? [] : Array.isArray(options.hooks) ? options.hooks : [options.hooks as CronledgerHooks];
    this.metrics = options.metrics === false ? null : createMetrics({ jobNames: registry.keys(), ...(options.metrics?.registry ? { registry: options.metrics.registry } : {}) });
    const hooks = [...userHooks, this.entryProblems.hooks, ...(this.metrics ? [this.metrics.hooks] : [])];
    this.events = combineHooks(hooks, (error) => this.logger.error("a cronledger hook threw", { error: String(error) }));
    const setting = options.database;
    this.ownsDatabase = !isDatabase(setting);
    this.database = isDatabase(setting) ? setting : openDatabase(setting);
    this.logger.info(`using ${this.database.label}`);
  }

  /** Applies cronledger's migrations under an advisory lock; safe to call from every replica at boot. */
  async migrate(): Promise<{ applied: number }> {
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

  async enqueue<S extends z.ZodType>(job: JobReference<S>, payload?: z.input<S>, options?: EnqueueOptions): Promise<EnqueuedJob> {
    const request: EnqueueRequest = { job: job as JobReference, payload, ...(options === undefined ? {} : { options }) };
    const [result] = await enqueueJobs(this.database, this.jobs, [request], this.maxPayloadBytes);
    return result as EnqueuedJob;
  }

  /** Validates every payload first, then inserts all jobs in one statement. */
  async enqueueMany(requests: readonly EnqueueRequest[]): Promise<EnqueuedJob[]> {
    return enqueueJobs(this.database, this.jobs, requests, this.maxPayloadBytes);
  }

  /** One scheduler pass at `now` (default: the database clock). */
  async tick(options: TickOptions = {}): Promise<TickReport> {
    const started = performance.now();
    const report = await runTick(
      { database: this.database, entries: this.choresActive ? this.entriesWithChores : this.entries, namespace: this.namespace, logger: this.logger, memo: this.memo, deferred: this.deferred, clock: this.clock },
      options,
    );
    this.events.tickCompleted(report, (performance.now() - started) / 1000);
    return report;
  }

  /** Deletes ledger rows of this namespace that no current entry owns. */
  async pruneLedger(): Promise<number> {
    const rows = await pruneLedger(
      this.database,
      this.namespace,
      this.entriesWithChores.map((entry) => entry.ledgerKey),
    );
    this.events.pruned({ table: "schedule_state", rows });
    return rows;
  }

  async status(): Promise<SchedulerStatus> {
    const [clock] = await query<{ now_ms: number }>(this.database.db, sql`select (extract(epoch from now()) * 1000)::float8 as now_ms`);
    const databaseNow = new Date(clock?.now_ms ?? Date.now());
    const ledger = await query<{ key: string; slot_ms: number }>(
      this.database.db,
      sql`select key, (extract(epoch from last_enqueued_slot) * 1000)::float8 as slot_ms
          from cronledger.schedule_state where namespace = ${this.namespace}`,
    );
    const slots = new Map(ledger.map((row) => [row.key, new Date(row.slot_ms)]));
    const counts = await query<{ queue: string; status: string; n: number }>(
      this.database.db,
      sql`select queue, status, count(*)::int as n from cronledger.jobs group by queue, status`,
    );
    const queues: Record<string, Record<string, number>> = {};
    for (const row of counts) (queues[row.queue] ??= {})[row.status] = row.n;
    const view = (entry: ResolvedEntry, chore: boolean): EntryStatus => {
      const last = slots.get(entry.ledgerKey) ?? null;
      const next = entry.calendar.nextMs(Math.max(last?.getTime() ?? 0, databaseNow.getTime()));
      return {
        identity: entry.identity,
        key: entry.ledgerKey,
        jobName: entry.jobName,
        cron: entry.cron.source,
        timezone: entry.timezone,
        lastEnqueuedSlot: last,
        nextRunAt: next === null ? null : new Date(next),
        chore,
      };
    };
    return {
      databaseNow,
      namespace: this.namespace,
      warnings: this.warnings,
      queues,
      // The chores are listed unless `chores: false`, also in a process that never calls start():
      // like the app's entries, they are slots of the shared ledger that whichever replica runs
      // start() fires, and the process serving the admin page or `cronledger status` is often not
      // one of them. Hiding them there would hide whether the reaper fires at all; shown, a reap
      // entry whose last slot lags tells the operator that no replica runs the chores.
      entries: [...this.entries.map((entry) => view(entry, false)), ...this.choreEntries.map((entry) => view(entry, true))],
    };
  }

  /** Terminal failures (the failure tickets), newest first, without payloads and with errors redacted. */
  async failures(filter: FailureFilter = {}): Promise<FailurePage> {
    return listFailures(this.database, filter);
  }

  /** Re-enqueues failed job `id` as a new queued job; retrying the same failure twice returns the first retry. */
  async retryJob(id: number): Promise<RetriedJob> {
    return retryFailedJob(this.database, this.jobs, id);
  }

  /**
   * Runs jobs in this process. `once`: drains what is ready now and resolves
   * with a summary; otherwise runs until `stop()` and resolves then.
   */
  async work(options: WorkOptions = {}): Promise<WorkSummary> {
    const worker = this.createWorker(options);
    this.workers.add(worker);
    try {
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
    if (this.supervisor) throw new ConfigError("start() was already called on this Cronledger; call stop() first.");
    if (this.choreEntries.length > 0) this.choresActive = true;
    const supervisor = new Supervisor(
      { logger: this.logger, tick: () => this.tick(), createWorker: (workOptions) => this.createWorker(workOptions), close: () => this.close() },
      options,
    );
    // Throws on invalid options before anything runs; only a started supervisor is kept.
    supervisor.start();
    this.supervisor = supervisor;
  }

  /**
   * Graceful stop of `start()` and of running `work()` calls: no new claims,
   * running jobs get their grace period, the rest are aborted through
   * ctx.signal and returned to the queue without counting the attempt.
   */
  async stop(): Promise<WorkSummary | undefined> {
    const supervisor = this.supervisor;
    const [summary] = await Promise.all([supervisor?.stop(), ...[...this.workers].map((worker) => worker.stop())]);
    if (this.supervisor === supervisor) this.supervisor = undefined;
    return summary;
  }

  /** Returns running jobs whose heartbeat is older than the lease to the queue, or fails them when out of attempts. */
  async reap(options: { now?: Date } = {}): Promise<ReapReport> {
    const report = await reapStaleJobs(this.database, { leaseMs: this.leaseMs, ...options });
    if (report.requeued + report.failed > 0) this.logger.warn("reaped jobs whose worker stopped heartbeating", { ...report, leaseMs: this.leaseMs });
    return report;
  }

  /** The prune chore: stale ledger rows, then finished jobs older than their retention (in bounded batches). */
  async prune(options: { now?: Date } = {}): Promise<{ ledgerRows: number; jobRows: number }> {
    const ledgerRows = await this.pruneLedger();
    const jobRows = await pruneFinishedJobs(this.database, this.retention, options.now);
    this.events.pruned({ table: "jobs", rows: jobRows });
    return { ledgerRows, jobRows };
  }

  private createWorker(options: WorkOptions): Worker {
    const queues = new Set(["default", ...[...this.jobs.values()].map((job) => job.queue), ...this.entries.map((entry) => entry.queue)]);
    // A process that ticks the chores also runs them, whatever queues it was given: otherwise
    // `start({ queues: ["default"] })` would enqueue reap jobs nobody runs, and crashed jobs would stay running.
    const explicit = options.queues !== undefined && this.choresActive ? { queues: [...new Set([...options.queues, CHORE_QUEUE])] } : {};
    return new Worker(this, { ...options, ...explicit, defaultQueues: [...queues], defaultLeaseMs: this.leaseMs });
  }

  async close(): Promise<void> {
    await this.stop();
    if (this.ownsDatabase) await this.database.close();
  }
}

function isDatabase(value: DatabaseSetting | Database | undefined): value is Database {
  return typeof value === "object" && "db" in value && "kind" in value;
}

export function createCronledger(options: CronledgerOptions = {}): Cronledger {
  return new Cronledger(options);
}

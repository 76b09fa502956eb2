import type { z } from "zod";
import type { Database } from "../db/connection.js";
import { asExecutor, type Executor } from "../db/executor.js";
import { entryRuns, jobCounts, readyJobStats, type EntryRunRow } from "../db/sql/operators.js";
import type { DatabaseHealth } from "../db/health.js";
import { failUnregisteredJobs, jobsWaitingForWorker, pruneWorkers, type WaitingJobs } from "../db/sql/workers.js";
import type { CronledgerEvents } from "../events.js";
import type { Logger } from "../log.js";
import type { AttemptServices } from "./attempt.js";
import type { JobDefinition } from "./define-job.js";
import { cancelJob, type CancelledJob } from "./cancel.js";
import { enqueueJobs, type EnqueuedJob, type EnqueueManyOptions, type EnqueueOptions, type Enqueuer, type EnqueueRequest, type JobReference } from "./enqueue.js";
import { listFailures, type FailureFilter, type FailurePage } from "./failures.js";
import { reapStaleJobs, type ReapReport } from "./reaper.js";
import { pruneFinishedJobs, type ResolvedRetention } from "./retention.js";
import { retryFailedJob, type RetriedJob } from "./retry-failed.js";
import { listRetrying, type RetryingJob } from "./retrying.js";

export interface JobQueueOptions {
  readonly database: Database;
  /** The jobs this process can run, by name (chores included). */
  readonly jobs: ReadonlyMap<string, JobDefinition>;
  readonly events: CronledgerEvents;
  readonly logger: Logger;
  readonly leaseMs: number;
  readonly retention: ResolvedRetention;
  /** Largest stored JSON of an enqueued payload. */
  readonly maxPayloadBytes: number;
  /** The loaded schedule entry of a ledger key, for `ctx.schedule`. */
  readonly entryOf?: (ledgerKey: string) => { readonly identity: string; readonly entryKey: string | undefined } | undefined;
  /** Whether the database is reachable, as claims and heartbeats find out; logs an outage once. */
  readonly health: DatabaseHealth;
}

/** A worker row whose heartbeat is this old belongs to a worker that died without stopping: the prune chore removes it. */
export const DEAD_WORKER_MS = 3_600_000;

/** Job names that ready jobs wait on because no live worker knows them, with the instant the oldest became ready. */
export interface WaitingForWorker {
  readonly jobName: string;
  readonly count: number;
  readonly oldestSince: Date;
  /** How long the oldest has waited, by the database clock. */
  readonly waitedMs: number;
}

/**
 * The jobs side of cronledger: everything that writes or reads job rows
 * but a worker's own statements (src/jobs/worker-store.ts) goes through here
 * to the statements of src/db/sql/: the chores reap and prune through it;
 * the admin views read failures and counts.
 */
export class JobQueue implements Enqueuer, AttemptServices {
  readonly database: Database;
  readonly jobs: ReadonlyMap<string, JobDefinition>;
  readonly events: CronledgerEvents;
  readonly logger: Logger;
  readonly leaseMs: number;
  readonly health: DatabaseHealth;
  private readonly retention: ResolvedRetention;
  private readonly entries: JobQueueOptions["entryOf"];
  private readonly maxPayloadBytes: number;

  constructor(options: JobQueueOptions) {
    this.entries = options.entryOf;
    this.maxPayloadBytes = options.maxPayloadBytes;
    this.database = options.database;
    this.jobs = options.jobs;
    this.events = options.events;
    this.logger = options.logger;
    this.leaseMs = options.leaseMs;
    this.retention = options.retention;
    this.health = options.health;
  }

  /** The loaded entry behind a ledger key (a scheduled job's `ctx.schedule`). */
  entryOf(ledgerKey: string): { readonly identity: string; readonly entryKey: string | undefined } | undefined {
    return this.entries?.(ledgerKey);
  }

  get enqueuer(): Enqueuer {
    return this;
  }

  async enqueue<S extends z.ZodType>(job: JobReference<S>, payload?: z.input<S>, options: EnqueueOptions = {}): Promise<EnqueuedJob> {
    const { db, ...rest } = options;
    const [result] = await this.insert([{ job: job as JobReference, payload, options: rest }], db);
    return result as EnqueuedJob;
  }

  enqueueMany(requests: readonly EnqueueRequest[], options: EnqueueManyOptions = {}): Promise<EnqueuedJob[]> {
    return this.insert(requests, options.db);
  }

  /**
   * Validates every request, then inserts them all in one statement on `db`
   * (default: cronledger's own database; the application's transaction to
   * enqueue atomically with its own writes).
   */
  private insert(requests: readonly EnqueueRequest[], db: Executor | undefined): Promise<EnqueuedJob[]> {
    return enqueueJobs(this.executor(db), this.jobs, requests, this.maxPayloadBytes);
  }

  /** Where a write goes: the application's database or transaction when given (checked), else cronledger's own. */
  executor(db: Executor | undefined): Executor {
    return db === undefined ? this.database.db : asExecutor(db, "The `db` enqueue option");
  }

  /** Ready jobs that no live worker can run, by job name (src/db/sql/workers.ts). */
  async waitingForWorker(now?: Date): Promise<WaitingForWorker[]> {
    const rows: WaitingJobs[] = await jobsWaitingForWorker(this.database.db, now);
    return rows.map((row) => ({ jobName: row.job_name, count: row.count, oldestSince: new Date(row.oldest_ms), waitedMs: row.waited_ms }));
  }

  /**
   * The prune chore's share of the registry: fails jobs that no live worker
   * has known for `unregisteredAfterMs` (false: never), and forgets workers
   * that died without stopping.
   */
  async pruneRegistry(unregisteredAfterMs: number | false, now?: Date): Promise<{ failedUnregistered: number; workers: number }> {
    const failedUnregistered = unregisteredAfterMs === false ? 0 : await failUnregisteredJobs(this.database.db, unregisteredAfterMs, now);
    if (failedUnregistered > 0) {
      this.logger.warn("failed queued jobs that no running worker has registered (JobNotRegisteredError); see the failures list", {
        jobs: failedUnregistered,
        afterMs: unregisteredAfterMs,
      });
    }
    const workers = await pruneWorkers(this.database.db, DEAD_WORKER_MS);
    return { failedUnregistered, workers };
  }

  /** Returns running jobs whose heartbeat is older than the lease to the queue, or fails them when out of attempts. */
  async reap(now?: Date): Promise<ReapReport> {
    const report = await reapStaleJobs(this.database.db, { leaseMs: this.leaseMs, ...(now === undefined ? {} : { now }) });
    if (report.requeued + report.failed > 0) {
      this.logger.warn("reaped jobs whose worker stopped heartbeating", { requeued: report.requeued, failed: report.failed, leaseMs: this.leaseMs });
      this.events.jobsReaped(report);
    }
    // The per-job split is for the metrics' listener; callers get the counts.
    return { requeued: report.requeued, failed: report.failed };
  }

  /** Deletes finished jobs older than their retention, in bounded batches. */
  async pruneFinished(now?: Date): Promise<number> {
    const rows = await pruneFinishedJobs(this.database.db, this.retention, now);
    this.events.pruned({ table: "jobs", rows });
    return rows;
  }

  /** Terminal failures (the failure tickets), newest first, without payloads and with errors redacted. */
  failures(filter: FailureFilter = {}): Promise<FailurePage> {
    return listFailures(this.database.db, filter);
  }

  /** Re-enqueues failed job `id` as a new queued job; retrying the same failure twice returns the first retry. */
  retryFailed(id: number): Promise<RetriedJob> {
    return retryFailedJob(this.database.db, this.jobs, id);
  }

  /** Cancels a job that waits for its first run or a retry (see src/jobs/cancel.ts). */
  cancel(id: number): Promise<CancelledJob> {
    return cancelJob(this.database.db, id);
  }

  /** The `limit` most recent runs of each schedule key, newest slot first. */
  entryRuns(keys: readonly string[], limit: number): Promise<EntryRunRow[]> {
    return entryRuns(this.database.db, keys, limit);
  }

  /** Jobs waiting for a retry, soonest first, errors redacted. */
  retrying(limit: number): Promise<RetryingJob[]> {
    return listRetrying(this.database.db, limit);
  }

  /** Ready jobs per queue and the instant the oldest became due (at most `cap` counted per queue). */
  readyStats(queues: readonly string[], cap: number): Promise<{ queue: string; ready: number; oldest_ms: number | null; now_ms: number }[]> {
    return readyJobStats(this.database.db, queues, cap);
  }

  /** Job counts by queue, then status. */
  async counts(): Promise<Record<string, Record<string, number>>> {
    const queues: Record<string, Record<string, number>> = {};
    for (const row of await jobCounts(this.database.db)) (queues[row.queue] ??= {})[row.status] = row.n;
    return queues;
  }
}

import type { Database } from "../db/connection.js";
import type { Executor } from "../db/executor.js";
import {
  claimJobs,
  completeJobs,
  entryRuns,
  heartbeatJobs,
  jobCounts,
  JOBS_CHANNEL,
  readyJobStats,
  type ClaimedJob,
  type ClaimRequest,
  type CompletionRow,
  type EntryRunRow,
} from "../db/sql/jobs.js";
import type { CronledgerEvents } from "../events.js";
import type { Logger } from "../log.js";
import type { JobDefinition } from "./define-job.js";
import { cancelJob, type CancelledJob } from "./cancel.js";
import { enqueueJobs, type EnqueuedJob, type EnqueueRequest } from "./enqueue.js";
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
}

/**
 * The jobs side of cronledger: everything that writes or reads job rows
 * goes through here to the statements of src/db/sql/jobs.ts. Workers
 * (src/jobs/worker.ts) claim, complete and heartbeat through it; the chores
 * reap and prune through it; the admin views read failures and counts.
 */
export class JobQueue {
  readonly database: Database;
  readonly jobs: ReadonlyMap<string, JobDefinition>;
  readonly events: CronledgerEvents;
  readonly logger: Logger;
  readonly leaseMs: number;
  private readonly retention: ResolvedRetention;

  constructor(options: JobQueueOptions) {
    this.database = options.database;
    this.jobs = options.jobs;
    this.events = options.events;
    this.logger = options.logger;
    this.leaseMs = options.leaseMs;
    this.retention = options.retention;
  }

  /**
   * Validates every request, then inserts them all in one statement on
   * `executor` (default: cronledger's own database; the application's
   * transaction to enqueue atomically with its own writes).
   */
  enqueue(requests: readonly EnqueueRequest[], executor: Executor = this.database.db): Promise<EnqueuedJob[]> {
    return enqueueJobs(executor, this.jobs, requests);
  }

  claim(request: ClaimRequest): Promise<ClaimedJob[]> {
    return claimJobs(this.database.db, request);
  }

  complete(workerId: string, rows: readonly CompletionRow[], now?: Date): Promise<void> {
    return completeJobs(this.database.db, workerId, rows, now);
  }

  heartbeat(workerId: string, ids: readonly number[]): Promise<Set<number>> {
    return heartbeatJobs(this.database.db, workerId, ids);
  }

  /** Calls `onReady(queue)` whenever a queue gains ready jobs (LISTEN/NOTIFY); resolves with the way to stop. */
  listen(onReady: (queue: string) => void): Promise<() => Promise<void>> {
    return this.database.listen(JOBS_CHANNEL, onReady);
  }

  /** Returns running jobs whose heartbeat is older than the lease to the queue, or fails them when out of attempts. */
  async reap(now?: Date): Promise<ReapReport> {
    const report = await reapStaleJobs(this.database.db, { leaseMs: this.leaseMs, ...(now === undefined ? {} : { now }) });
    if (report.requeued + report.failed > 0) {
      this.logger.warn("reaped jobs whose worker stopped heartbeating", { requeued: report.requeued, failed: report.failed, leaseMs: this.leaseMs });
      this.events.jobsReaped(report);
    }
    return report;
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

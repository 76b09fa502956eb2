import type { Database } from "../db/connection.js";
import { reapStaleJobs, type ReapCounts } from "../db/sql/jobs.js";
import { ensureHistoryPartitions, pruneHistory } from "../db/sql/partitions.js";
import { cancelQueuedJob, entryRuns, jobCounts, readyJobStats, retryingJobs, type EntryRunRow } from "../db/sql/operators.js";
import { failUnregisteredJobs, jobsWaitingForWorker, pruneWorkers } from "../db/sql/workers.js";
import type { Duration } from "../duration.js";
import { JobNotCancellableError, JobNotFoundError } from "../errors.js";
import type { CronledgerEvents } from "../events.js";
import type { JobDefinition } from "../jobs/define-job.js";
import { describeRetryOverride, readStoredRetryPolicy } from "../jobs/retry-override.js";
import type { Logger } from "../log.js";
import { redact } from "../redact.js";
import { listFailures, type FailureFilter, type FailurePage } from "./failures.js";
import { retryFailedJob, type RetriedJob } from "./retry-failed.js";

/** A worker row whose heartbeat is this old belongs to a worker that died without stopping: the prune chore removes it. */
export const DEAD_WORKER_MS = 3_600_000;

export interface RetentionOptions {
  /** How long succeeded (and cancelled) jobs are kept after they finish; default 7 days. */
  readonly succeeded?: Duration;
  /** How long failed jobs (the failure tickets) are kept; default 7 days. */
  readonly failed?: Duration;
  /** Idempotency keys deleted per statement ahead of dropping a day of keyed jobs; default 1,000. */
  readonly batchSize?: number;
}

export interface ResolvedRetention {
  readonly succeededMs: number;
  readonly failedMs: number;
  readonly batchSize: number;
}

/**
 * Ready jobs of one name that no live worker can run (none serving their
 * queue has registered their name), with the instant the oldest became
 * ready: in the status, on the page and in the metrics' gauges.
 */
export interface WaitingForWorker {
  readonly jobName: string;
  readonly count: number;
  readonly oldestSince: Date;
  /** How long the oldest has waited, by the database clock. */
  readonly waitedMs: number;
}

export interface CancelledJob {
  readonly id: number;
  readonly jobName: string;
  /** What the job was doing: waiting for its first run, waiting for a retry, or already cancelled. */
  readonly was: "queued" | "retrying" | "cancelled";
  /** The attempts it had used, out of its budget. */
  readonly attempts: number;
  readonly maxAttempts: number;
  /** False when it was already cancelled (a second click): nothing changed. */
  readonly cancelled: boolean;
}

/** A job waiting for its next attempt after a failed one: what an operator may cancel. Never its payload. */
export interface RetryingJob {
  readonly id: number;
  readonly jobType: string;
  readonly queue: string;
  /** Attempts used so far, out of its budget. */
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly nextAttemptAt: Date;
  readonly scheduledFor: Date | null;
  /** The error of its last attempt, redacted. */
  readonly lastError: string | null;
  /** The retry policy given at enqueue instead of the job's; null: the job's own. */
  readonly retryOverride: string | null;
}

/** What `reap()` did: jobs returned to the queue, and jobs failed because their lost attempt was their last. */
export type ReapReport = Pick<ReapCounts, "requeued" | "failed">;

export interface OperationsOptions {
  readonly database: Database;
  /** The jobs this process knows, by name: a retried failure gets its job's current attempt budget. */
  readonly jobs: ReadonlyMap<string, JobDefinition>;
  readonly events: Pick<CronledgerEvents, "jobsReaped" | "jobsFailedUnregistered" | "pruned">;
  readonly logger: Logger;
  readonly leaseMs: number;
  readonly retention: ResolvedRetention;
}

/**
 * What operators read and do, one service over the SQL layer
 * (src/db/sql/operators.ts, jobs.ts and workers.ts): the failure tickets and
 * their retries, cancel, jobs waiting for a retry, entries' runs, counts,
 * ready-queue statistics, jobs waiting for a worker, and the chores' work on
 * jobs (reap, and prune of the registry and of finished jobs). The
 * `Cronledger` facade hands each of its operator methods to one method here;
 * the status (src/status/model.ts) and the metrics read through it too.
 */
export class Operations {
  private readonly db: Database["db"];

  constructor(private readonly options: OperationsOptions) {
    this.db = options.database.db;
  }

  /** Terminal failures (the failure tickets), newest first, without payloads and with errors redacted. */
  failures(filter: FailureFilter = {}): Promise<FailurePage> {
    return listFailures(this.db, filter);
  }

  /** Re-enqueues failed job `id` as a new queued job; retrying the same failure twice returns the first retry. */
  retryFailed(id: number): Promise<RetriedJob> {
    return retryFailedJob(this.db, this.options.jobs, id);
  }

  /**
   * Cancels a job that waits to run, for its first attempt or a retry: it
   * ends `cancelled` and is never claimed. Cancelling a cancelled job changes
   * nothing and says so; a running or finished job cannot be cancelled.
   */
  async cancel(id: number): Promise<CancelledJob> {
    const row = await cancelQueuedJob(this.db, id);
    if (row === undefined) throw new JobNotFoundError(id);
    const base = { id, jobName: row.job_name, attempts: row.attempts, maxAttempts: row.max_attempts };
    if (row.cancelled) return { ...base, was: row.attempts > 0 ? "retrying" : "queued", cancelled: true };
    if (row.status === "cancelled") return { ...base, was: "cancelled", cancelled: false };
    throw new JobNotCancellableError(id, row.status);
  }

  /** Jobs waiting for a retry, soonest first, errors redacted. */
  async retrying(limit: number): Promise<RetryingJob[]> {
    return (await retryingJobs(this.db, limit)).map((row) => ({
      id: row.id,
      jobType: row.job_name,
      queue: row.queue,
      attempts: row.attempts,
      maxAttempts: row.max_attempts,
      nextAttemptAt: new Date(row.run_at_ms),
      scheduledFor: row.scheduled_for_ms === null ? null : new Date(row.scheduled_for_ms),
      lastError: row.last_error === null ? null : redact(row.last_error),
      retryOverride: describeRetryOverride(readStoredRetryPolicy(row.retry_policy)),
    }));
  }

  /** The `limit` most recent runs of each schedule key, newest slot first (what the status makes runs of, src/status/runs.ts). */
  entryRuns(keys: readonly string[], limit: number): Promise<EntryRunRow[]> {
    return entryRuns(this.db, keys, limit);
  }

  /** Job counts by queue, then status. */
  async counts(): Promise<Record<string, Record<string, number>>> {
    const queues: Record<string, Record<string, number>> = {};
    for (const row of await jobCounts(this.db)) (queues[row.queue] ??= {})[row.status] = row.n;
    return queues;
  }

  /** Ready jobs per queue and the instant the oldest became due (at most `cap` counted per queue). */
  readyStats(queues: readonly string[], cap: number): Promise<{ queue: string; ready: number; oldest_ms: number | null; now_ms: number }[]> {
    return readyJobStats(this.db, queues, cap);
  }

  /** Ready jobs that no live worker can run, by job name (src/db/sql/workers.ts). */
  async waitingForWorker(now?: Date): Promise<WaitingForWorker[]> {
    const rows = await jobsWaitingForWorker(this.db, now);
    return rows.map((row) => ({ jobName: row.job_name, count: row.count, oldestSince: new Date(row.oldest_ms), waitedMs: row.waited_ms }));
  }

  /**
   * Takes back running jobs whose heartbeat is older than the lease:
   * requeued while they have attempts left (the lost attempt counts), failed
   * otherwise (reapStaleJobs in src/db/sql/jobs.ts).
   */
  async reap(now?: Date): Promise<ReapReport> {
    const { leaseMs } = this.options;
    const report = await reapStaleJobs(this.db, leaseMs, now);
    if (report.requeued + report.failed > 0) {
      this.options.logger.warn("reaped jobs whose worker stopped heartbeating", { requeued: report.requeued, failed: report.failed, leaseMs });
      this.options.events.jobsReaped(report);
    }
    // The per-job split is for the metrics' listener; callers get the counts.
    return { requeued: report.requeued, failed: report.failed };
  }

  /**
   * The prune chore's share of the registry: fails jobs whose name no worker
   * has registered for `unregisteredAfterMs` (false: never) and this process
   * does not define, and forgets workers gone for longer than that (at least
   * DEAD_WORKER_MS).
   */
  async pruneRegistry(unregisteredAfterMs: number | false, now?: Date): Promise<{ failedUnregistered: number; workers: number }> {
    const swept = unregisteredAfterMs === false ? { failed: 0, failedByJob: {} } : await failUnregisteredJobs(this.db, unregisteredAfterMs, [...this.options.jobs.keys()], now);
    const failedUnregistered = swept.failed;
    if (failedUnregistered > 0) {
      // Failure tickets like any other: the metrics' listener counts them in cronledger_failures_total.
      this.options.events.jobsFailedUnregistered(swept);
      this.options.logger.warn("failed queued jobs that no running worker has registered (JobNotRegisteredError); see the failures list", {
        jobs: failedUnregistered,
        afterMs: unregisteredAfterMs,
      });
    }
    const workers = await pruneWorkers(this.db, Math.max(DEAD_WORKER_MS, unregisteredAfterMs === false ? 0 : unregisteredAfterMs));
    return { failedUnregistered, workers };
  }

  /**
   * Removes finished jobs older than their retention and returns how many
   * went: whole days of the history are dropped (src/db/sql/partitions.ts),
   * never row by row, after the partitions of the days ahead are made.
   * Queued and running jobs are never touched. `now` overrides the database
   * clock for the cutoffs (tests).
   */
  async pruneFinished(now?: Date): Promise<number> {
    const { retention } = this.options;
    await ensureHistoryPartitions(this.db);
    const { rows: removed } = await pruneHistory(this.db, { succeededMs: retention.succeededMs, failedMs: retention.failedMs, batchSize: retention.batchSize, now });
    this.options.events.pruned({ table: "jobs", rows: removed });
    return removed;
  }
}

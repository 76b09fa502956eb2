// What operators read and do, as one service over the SQL layer. About 400 lines: each operator action (cancel
// and stop, retry, pause, resume, run now, the chores' reap and prune) is a few lines of mapping rows to domain
// types, and they share the entry and job shapes kept together here.
import type { Database } from "../db/connection.js";
import { pruneSupersededAttempts } from "../db/sql/completions.js";
import { reapStaleJobs, type ReapCounts } from "../db/sql/jobs.js";
import { ensureHistoryPartitions, pruneHistory } from "../db/sql/partitions.js";
import { pauseEntry, resumeEntry } from "../db/sql/ledger-rows.js";
import { triggerEntry, type TriggerInput } from "../db/sql/trigger.js";
import { jobsByIdempotencyKey } from "../db/sql/jobs.js";
import { cancelJob, entryRuns, jobCounts, readyJobStats, retryingJobs, runningJobs, type EntryRunRow } from "../db/sql/operators.js";
import { failUnregisteredJobs, jobsWaitingForWorker, pruneWorkers } from "../db/sql/workers.js";
import type { Duration } from "../duration.js";
import { JobNotCancellableError, JobNotFoundError } from "../errors.js";
import type { CronledgerEvents } from "../events.js";
import type { JobDefinition } from "../jobs/define-job.js";
import { describeRetryOverride, readStoredRetryPolicy } from "../jobs/retry-override.js";
import type { Logger } from "../log.js";
import { redact } from "../redact.js";
import type { Tracing } from "../tracing.js";
import { listFailures, type FailureFilter, type FailurePage } from "./failures.js";
import { retryFailedJob, type RetriedJob } from "./retry-failed.js";

/** Longest `by` and `reason` of a stop request kept. */
const MAX_STOP_TEXT = 500;

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
  /**
   * What the job was doing: waiting for its first run, waiting for a retry,
   * running (now asked to stop), already asked to stop (`stopping`), or
   * already cancelled.
   */
  readonly was: "queued" | "retrying" | "running" | "stopping" | "cancelled";
  /** The attempts it had used, out of its budget. */
  readonly attempts: number;
  readonly maxAttempts: number;
  /** False when this call changed nothing: already cancelled, or already asked to stop (the first request stands). */
  readonly cancelled: boolean;
  /**
   * For a running job: the stop request its worker acts on. Its `ctx.signal`
   * is aborted with a JobCancelledError carrying `requestedBy` and `reason`;
   * the job ends `cancelled` when the handler returns, or is failed as
   * killed if it still runs `graceMs` after its worker saw the request.
   */
  readonly stop: { readonly requestedAt: Date; readonly requestedBy: string; readonly reason: string | null; readonly graceMs: number } | null;
}

/** Who cancels, and why: stored with a running job's stop request, and read by its handler from `ctx.signal.reason`. */
export interface CancelRequest {
  /** The operator's surface and identity; default "api". */
  readonly by?: string;
  readonly reason?: string;
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

/** The entry an operator pauses, resumes or triggers: its ledger row's key and its job. */
export interface EntryRef {
  readonly identity: string;
  readonly key: string;
  readonly jobName: string;
}

/** What `pause()` and `resume()` did to an entry. */
export interface EntryPauseResult {
  readonly identity: string;
  readonly key: string;
  readonly jobName: string;
  /** Whether the entry is paused now. */
  readonly paused: boolean;
  /** False when nothing changed: it was paused already (a pause only replaced who and the note), or was not paused. */
  readonly changed: boolean;
  /** The pause set (for pause()) or cleared (for resume(); null if there was none). */
  readonly pausedAt: Date | null;
  readonly pausedBy: string | null;
  readonly note: string | null;
}

/** What `trigger()` did: the job it made (or the one an earlier request with the same id made), or why the entry's overlap policy skipped it. */
export interface TriggeredRun {
  readonly identity: string;
  readonly key: string;
  readonly jobName: string;
  readonly requestId: string;
  readonly by: string;
  /** The run-now's job; null when its overlap policy skipped it. */
  readonly jobId: number | null;
  /** False when the request id had been used already (a double click): `jobId` is that request's job. */
  readonly created: boolean;
  /** Set when the entry's overlap policy skipped it: why, and the history row recording it. */
  readonly skipped: { readonly reason: string; readonly detail: string; readonly jobId: number | null } | null;
  /** The instant it was triggered at (its job's slot). */
  readonly at: Date;
}

/** Longest note and `by` kept in the ledger row. */
export const MAX_PAUSE_NOTE_CHARS = 500;
export const MAX_OPERATOR_CHARS = 200;
const bounded = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** A running job, as an operator who may stop it sees it. Never its payload. */
export interface RunningJob {
  readonly id: number;
  readonly jobType: string;
  readonly queue: string;
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly startedAt: Date | null;
  readonly heartbeatAt: Date | null;
  /** The worker running it (`host:pid:random`). */
  readonly worker: string | null;
  readonly scheduledFor: Date | null;
  readonly scheduleKey: string | null;
  /** The stop request on it, once asked (`cancelJob`); its handler is being stopped. */
  readonly stop: { readonly requestedAt: Date; readonly requestedBy: string; readonly reason: string | null } | null;
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
  /** The namespace of the ledger rows an operator's pause writes. */
  readonly namespace: string;
  /** The stop grace workers give a handler asked to stop (createCronledger's `stopGrace`): reported with each stop request. */
  readonly stopGraceMs: number;
  /** With the `tracing` option: a run-now is a producer span whose context its job stores (src/tracing.ts). */
  readonly tracing?: Tracing | undefined;
}

const entryOf = (entry: EntryRef) => ({ identity: entry.identity, key: entry.key, jobName: entry.jobName });

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
  private readonly namespace: string;

  constructor(private readonly options: OperationsOptions) {
    this.db = options.database.db;
    this.namespace = options.namespace;
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
   * ends `cancelled` and is never claimed. A running job is asked to stop
   * (cancelJob in src/db/sql/operators.ts; its worker aborts its signal). A
   * repeat changes nothing and says so; a finished job cannot be cancelled.
   */
  async cancel(id: number, request: CancelRequest = {}): Promise<CancelledJob> {
    // Bounded like every stored reason: it is shown on the page and handed to the handler, not a document store.
    const by = (request.by ?? "api").slice(0, MAX_STOP_TEXT);
    const reason = request.reason === undefined || request.reason.trim() === "" ? null : request.reason.trim().slice(0, MAX_STOP_TEXT);
    let row = await cancelJob(this.db, id, { by, reason });
    // Queued or running in the statement's snapshot, yet neither cancelled nor asked to stop: it was claimed or finished meanwhile; look again.
    for (let again = 0; again < 3 && row !== undefined && !row.cancelled && row.stop_requested_at_ms === null && (row.status === "queued" || row.status === "held" || row.status === "running"); again += 1) {
      row = await cancelJob(this.db, id, { by, reason });
    }
    if (row === undefined) throw new JobNotFoundError(id);
    const base = { id, jobName: row.job_name, attempts: row.attempts, maxAttempts: row.max_attempts, stop: null };
    if (row.cancelled) return { ...base, was: row.attempts > 0 ? "retrying" : "queued", cancelled: true };
    if (row.stop_requested_at_ms !== null) {
      const stop = { requestedAt: new Date(row.stop_requested_at_ms), requestedBy: row.stop_requested_by ?? by, reason: row.stop_reason, graceMs: this.options.stopGraceMs };
      if (!row.already_stopping) this.options.logger.info("asked a running job to stop", { jobId: id, job: row.job_name, requestedBy: stop.requestedBy, reason: stop.reason });
      return { ...base, was: row.already_stopping ? "stopping" : "running", cancelled: !row.already_stopping, stop };
    }
    if (row.status === "cancelled") return { ...base, was: "cancelled", cancelled: false };
    throw new JobNotCancellableError(id, row.status);
  }

  /**
   * Pauses an entry in its ledger row (every replica, every later deploy
   * that keeps its identity): its slots are recorded as skipped until it is
   * resumed. The note is redacted and bounded like every stored reason.
   */
  async pause(entry: EntryRef, by: string, note: string | null): Promise<EntryPauseResult> {
    const cleanNote = note === null || note.trim() === "" ? null : bounded(redact(note.trim()), MAX_PAUSE_NOTE_CHARS);
    const row = await pauseEntry(this.db, { namespace: this.namespace, key: entry.key, jobName: entry.jobName, by: bounded(by, MAX_OPERATOR_CHARS), note: cleanNote });
    this.options.logger.info("schedule entry paused: its slots are recorded as skipped until it is resumed", { identity: entry.identity, by: row.paused_by, note: row.paused_note });
    return { ...entryOf(entry), paused: true, changed: row.changed, pausedAt: new Date(row.paused_at_ms), pausedBy: row.paused_by, note: row.paused_note };
  }

  /** Resumes a paused entry: the next slot fires as usual, never the paused ones. Resuming an entry that runs changes nothing and says so. */
  async resume(entry: EntryRef, by: string): Promise<EntryPauseResult> {
    const row = await resumeEntry(this.db, entry.key);
    if (row !== undefined) this.options.logger.info("schedule entry resumed", { identity: entry.identity, by: bounded(by, MAX_OPERATOR_CHARS) });
    return {
      ...entryOf(entry),
      paused: false,
      changed: row !== undefined,
      pausedAt: row === undefined ? null : new Date(row.paused_at_ms),
      pausedBy: row?.paused_by ?? null,
      note: row?.paused_note ?? null,
    };
  }

  /** Running jobs, longest-running first (what the page's Stop buttons are for); with `id`, that job alone if it runs. */
  async running(limit: number, id?: number): Promise<RunningJob[]> {
    return (await runningJobs(this.db, { limit, ...(id === undefined ? {} : { id }) })).map((row) => ({
      id: row.id,
      jobType: row.job_name,
      queue: row.queue,
      attempts: row.attempts,
      maxAttempts: row.max_attempts,
      startedAt: row.started_at_ms === null ? null : new Date(row.started_at_ms),
      heartbeatAt: row.heartbeat_at_ms === null ? null : new Date(row.heartbeat_at_ms),
      worker: row.locked_by,
      scheduledFor: row.scheduled_for_ms === null ? null : new Date(row.scheduled_for_ms),
      scheduleKey: row.schedule_key,
      stop:
        row.stop_requested_at_ms === null
          ? null
          : { requestedAt: new Date(row.stop_requested_at_ms), requestedBy: row.stop_requested_by ?? "unknown", reason: row.stop_reason === null ? null : redact(row.stop_reason) },
    }));
  }

  /**
   * Runs an entry now, outside its schedule, with its payload: one statement
   * in which the entry's overlap policy decides as for a slot, and the
   * request's key (`input.requestKey`: its id and the entry, not who sent
   * it) makes a second request with the same id return the first one's job.
   */
  async trigger(entry: EntryRef, request: { readonly requestId: string; readonly by: string }, input: TriggerInput): Promise<TriggeredRun> {
    const { tracing } = this.options;
    const row =
      tracing === undefined
        ? await triggerEntry(this.db, input)
        : await tracing.send(
            { operation: "trigger", jobs: [input], scheduleKey: input.key },
            (traceContextJson) => triggerEntry(this.db, { ...input, traceContextJson }),
            (made) => (made.job_id !== null ? [{ id: made.job_id, created: true }] : made.existing_id !== null ? [{ id: made.existing_id, created: false }] : []),
          );
    let jobId = row.existing_id ?? row.job_id;
    // Two requests with the same id at the same moment: the second's insert met the first's key; its job is the first's.
    if (jobId === null && row.skip_reason === null) jobId = (await jobsByIdempotencyKey(this.db, [input.jobName], [input.requestKey]))[0]?.id ?? null;
    const created = row.existing_id === null && row.job_id !== null;
    const skipped = row.skip_reason === null ? null : { reason: row.skip_reason, detail: row.skip_detail ?? row.skip_reason, jobId: row.skipped_job_id };
    this.options.logger.info(skipped ? "run-now skipped by the entry's overlap policy" : "schedule entry run now", {
      identity: entry.identity,
      by: request.by,
      requestId: request.requestId,
      jobId,
      ...(skipped ? { reason: skipped.detail } : {}),
    });
    return { ...entryOf(entry), requestId: request.requestId, by: request.by, jobId, created, skipped, at: new Date(row.slot_ms) };
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

  /** The `limit` most recent runs of each schedule key, newest slot first, from each key's floor on if given (what the status makes runs of, src/status/runs.ts). */
  entryRuns(keys: readonly string[], limit: number, floorsMs?: readonly (number | null)[]): Promise<EntryRunRow[]> {
    return entryRuns(this.db, keys, limit, floorsMs);
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
   * otherwise (reapStaleJobs in src/db/sql/jobs.ts). `sparedJobs` (the
   * jobs the live workers of the calling process hold) are never taken: a
   * process knows its own workers hold them, whatever their heartbeats said
   * while the database was out of reach.
   */
  async reap(now?: Date, sparedJobs: readonly number[] = []): Promise<ReapReport> {
    const { leaseMs } = this.options;
    const report = await reapStaleJobs(this.db, leaseMs, { now, sparedJobs });
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
    // An attempt superseded by another is kept as long as its job's history could be.
    await pruneSupersededAttempts(this.db, Math.max(retention.succeededMs, retention.failedMs), now);
    this.options.events.pruned({ table: "jobs", rows: removed });
    return removed;
  }
}

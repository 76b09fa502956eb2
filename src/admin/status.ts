import type { CronledgerMetrics } from "./metrics.js";
import type { CancelledJob } from "../jobs/cancel.js";
import type { FailureFilter, FailurePage } from "../jobs/failures.js";
import type { RetriedJob } from "../jobs/retry-failed.js";
import type { RetryingJob } from "../jobs/retrying.js";
import type { Logger } from "../log.js";
import type { JobStatus } from "../schema.js";
import type { BrokenEntry, EntryProblem, EntryRun, EntryState, RunKind, SchedulerStatus, StatusOptions } from "../status/model.js";

/** What the admin endpoints need of a ledger; a Cronledger has all of it, and so may anything else that is to be served. */
export interface AdminLedger {
  readonly namespace: string;
  readonly logger: Logger;
  /** Null when created with `metrics: false`. */
  readonly metrics: CronledgerMetrics | null;
  /** The status model; with `runs`, the recent runs of the page of entries the Schedule page shows. */
  status(options?: StatusOptions): Promise<SchedulerStatus>;
  failures(filter?: FailureFilter): Promise<FailurePage>;
  retryJob(id: number): Promise<RetriedJob>;
  cancelJob(id: number): Promise<CancelledJob>;
  /** Jobs waiting for a retry, soonest first. */
  retrying(options?: { limit?: number }): Promise<RetryingJob[]>;
}

export interface EntryProblemView {
  readonly code: string;
  readonly severity: "error" | "warning";
  readonly message: string;
  /** When a tick saw it; null for problems found when the schedule was loaded. */
  readonly at: string | null;
}

/** One run of an entry (a job row, never its payload). */
export interface RunView {
  readonly id: number;
  readonly kind: RunKind;
  readonly outcome: string | null;
  readonly attempts: number;
  readonly max_attempts: number;
  readonly scheduled_for: string;
  readonly run_at: string;
  readonly started_at: string | null;
  readonly finished_at: string | null;
  readonly retried: boolean;
  readonly late: boolean;
  readonly error: string | null;
}

export interface EntryView {
  readonly identity: string;
  readonly key: string;
  readonly job: string;
  readonly cron: string;
  readonly timezone: string;
  /** The last slot handled; null while none was (the entry never fired: see created_at). */
  readonly last_enqueued_slot: string | null;
  /** When its ledger row was created; null before any scheduler pass saw it. */
  readonly created_at: string | null;
  readonly next_run_at: string | null;
  /** ok, late, never_fired, failing, retrying, running, quarantined or waiting_for_worker (src/status/health.ts). */
  readonly state: EntryState;
  readonly reason: string;
  readonly latest_run: RunView | null;
  /** True for cronledger's own reap and prune chores, listed after the app's entries unless the ledger has `chores: false`. */
  readonly chore: boolean;
  /** The ledger row's quarantine: no replica fires the entry before `until`; null when it has none. */
  readonly quarantine: { readonly until: string; readonly reason: string; readonly count: number; readonly since: string | null } | null;
  readonly problems: readonly EntryProblemView[];
}

/** Ready jobs of one name that no live worker can run. */
export interface WaitingForWorkerView {
  readonly job: string;
  readonly count: number;
  /** When the oldest became ready. */
  readonly oldest_since: string;
}

export interface BrokenEntryView {
  readonly identity: string | null;
  readonly job: string | null;
  /** schedule[n] of an invalid entry that does not run; null for the others. */
  readonly invalid_index: number | null;
  readonly problems: readonly EntryProblemView[];
}

/** GET /admin/scheduler/status: the status model in snake_case with ISO instants, like the table columns operators query. */
export interface AdminStatus {
  readonly database_now: string;
  readonly namespace: string;
  readonly entries: readonly EntryView[];
  /** Entries with problems: load-time schedule warnings, entries that never fire again, quarantined entries (from the ledger), entries recent ticks repaired, and invalid entries. */
  readonly broken: readonly BrokenEntryView[];
  /** Invalid schedule entries that do not run (`invalidEntries: "quarantine"`), with their problems. */
  readonly invalid: readonly BrokenEntryView[];
  /** Job counts by queue, then status. */
  readonly queues: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** Job counts by status over all queues; every status is present. */
  readonly totals: Readonly<Record<JobStatus, number>>;
  /** Ready jobs waiting for a worker that knows them (none serving their queue has registered their name), by job name. */
  readonly waiting_for_worker: readonly WaitingForWorkerView[];
}

const iso = (date: Date | null) => (date === null ? null : date.toISOString());

const problemView = (problem: EntryProblem): EntryProblemView => ({ code: problem.code, severity: problem.severity, message: problem.message, at: iso(problem.at) });

const brokenView = (broken: BrokenEntry): BrokenEntryView => ({
  identity: broken.identity,
  job: broken.jobName,
  invalid_index: broken.invalidIndex,
  problems: broken.problems.map(problemView),
});

export function runView(run: EntryRun): RunView {
  return {
    id: run.jobId,
    kind: run.kind,
    outcome: run.outcome,
    attempts: run.attempts,
    max_attempts: run.maxAttempts,
    scheduled_for: run.scheduledFor.toISOString(),
    run_at: run.runAt.toISOString(),
    started_at: iso(run.startedAt),
    finished_at: iso(run.finishedAt),
    retried: run.retried,
    late: run.late,
    error: run.error,
  };
}

/** The JSON view of a status model. */
export function statusView(status: SchedulerStatus): AdminStatus {
  return {
    database_now: status.databaseNow.toISOString(),
    namespace: status.namespace,
    entries: status.entries.map((entry) => ({
      identity: entry.identity,
      key: entry.key,
      job: entry.jobName,
      cron: entry.cron,
      timezone: entry.timezone,
      last_enqueued_slot: iso(entry.lastEnqueuedSlot),
      created_at: iso(entry.createdAt),
      next_run_at: iso(entry.nextRunAt),
      state: entry.state,
      reason: entry.reason,
      latest_run: entry.latestRun === null ? null : runView(entry.latestRun),
      chore: entry.chore,
      quarantine:
        entry.quarantine === null
          ? null
          : { until: entry.quarantine.until.toISOString(), reason: entry.quarantine.reason, count: entry.quarantine.count, since: iso(entry.quarantine.since) },
      problems: entry.problems.map(problemView),
    })),
    broken: status.broken.map(brokenView),
    invalid: status.invalid.map(brokenView),
    queues: status.queues,
    totals: status.totals,
    waiting_for_worker: status.waitingForWorker.map((row) => ({ job: row.jobName, count: row.count, oldest_since: row.oldestSince.toISOString() })),
  };
}

/** GET /admin/scheduler/status for `ledger`. */
export async function adminStatus(ledger: Pick<AdminLedger, "status">): Promise<AdminStatus> {
  return statusView(await ledger.status());
}

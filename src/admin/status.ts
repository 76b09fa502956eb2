import type { CronledgerMetrics } from "./metrics.js";
import type { FailureFilter, FailurePage } from "../jobs/failures.js";
import type { RetriedJob } from "../jobs/retry-failed.js";
import type { Logger } from "../log.js";
import type { JobStatus } from "../schema.js";
import type { EntryProblem, SchedulerStatus } from "../status/model.js";

/** What the admin endpoints need of a ledger; a Cronledger has all of it, and so may anything else that is to be served. */
export interface AdminLedger {
  readonly namespace: string;
  readonly logger: Logger;
  /** Null when created with `metrics: false`. */
  readonly metrics: CronledgerMetrics | null;
  status(): Promise<SchedulerStatus>;
  failures(filter?: FailureFilter): Promise<FailurePage>;
  retryJob(id: number): Promise<RetriedJob>;
}

export interface EntryProblemView {
  readonly code: string;
  readonly severity: "error" | "warning";
  readonly message: string;
  /** When a tick saw it; null for problems found when the schedule was loaded. */
  readonly at: string | null;
}

export interface EntryView {
  readonly identity: string;
  readonly key: string;
  readonly job: string;
  readonly cron: string;
  readonly timezone: string;
  readonly last_enqueued_slot: string | null;
  readonly next_run_at: string | null;
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
  readonly problems: readonly EntryProblemView[];
}

/** GET /admin/scheduler/status: the status model in snake_case with ISO instants, like the table columns operators query. */
export interface AdminStatus {
  readonly database_now: string;
  readonly namespace: string;
  readonly entries: readonly EntryView[];
  /** Entries with problems: load-time schedule warnings, entries that never fire again, quarantined entries (from the ledger) and entries recent ticks repaired. */
  readonly broken: readonly BrokenEntryView[];
  /** Job counts by queue, then status. */
  readonly queues: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** Job counts by status over all queues; every status is present. */
  readonly totals: Readonly<Record<JobStatus, number>>;
  /** Ready jobs waiting for a worker that knows them (none serving their queue has registered their name), by job name. */
  readonly waiting_for_worker: readonly WaitingForWorkerView[];
}

const iso = (date: Date | null) => (date === null ? null : date.toISOString());

const problemView = (problem: EntryProblem): EntryProblemView => ({ code: problem.code, severity: problem.severity, message: problem.message, at: iso(problem.at) });

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
      next_run_at: iso(entry.nextRunAt),
      chore: entry.chore,
      quarantine:
        entry.quarantine === null
          ? null
          : { until: entry.quarantine.until.toISOString(), reason: entry.quarantine.reason, count: entry.quarantine.count, since: iso(entry.quarantine.since) },
      problems: entry.problems.map(problemView),
    })),
    broken: status.broken.map((broken) => ({ identity: broken.identity, job: broken.jobName, problems: broken.problems.map(problemView) })),
    queues: status.queues,
    totals: status.totals,
    waiting_for_worker: status.waitingForWorker.map((row) => ({ job: row.jobName, count: row.count, oldest_since: row.oldestSince.toISOString() })),
  };
}

/** GET /admin/scheduler/status for `ledger`. */
export async function adminStatus(ledger: Pick<AdminLedger, "status">): Promise<AdminStatus> {
  return statusView(await ledger.status());
}

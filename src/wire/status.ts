import type { JobStatus } from "../schema.js";
import type { BrokenEntry, EntryProblem, EntryRun, EntryState, RunKind, SchedulerStatus } from "../status/model.js";
import type { DynamicCounts } from "../schedule/schedules.js";
import { dynamicEntryDocument, type DynamicEntryDocument } from "./schedules.js";
import { iso, WIRE_VERSION, type Versioned } from "./version.js";

/** A problem of an entry. */
export interface ProblemDocument {
  readonly code: string;
  readonly severity: "error" | "warning";
  readonly message: string;
  /** When a tick saw it; null for problems found when the schedule was loaded. */
  readonly at: string | null;
}

/** One run of an entry (a job row, never its payload). */
export interface RunDocument {
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

export interface EntryDocument {
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
  /** ok, late, never_fired, failing, retrying, running, paused, quarantined or waiting_for_worker (src/status/health.ts). */
  readonly state: EntryState;
  readonly reason: string;
  readonly latest_run: RunDocument | null;
  /** True for cronledger's own reap and prune chores, listed after the app's entries unless the ledger has `chores: false`. */
  readonly chore: boolean;
  /** The ledger row's quarantine: no replica fires the entry before `until`; null when it has none. */
  readonly quarantine: { readonly until: string; readonly reason: string; readonly count: number; readonly since: string | null } | null;
  /** An operator's pause (state `paused`): its slots are recorded as skipped until it is resumed; null when it runs. */
  readonly pause: { readonly at: string; readonly by: string | null; readonly note: string | null } | null;
  readonly problems: readonly ProblemDocument[];
}

/** Ready jobs of one name that no live worker can run. */
export interface WaitingForWorkerDocument {
  readonly job: string;
  readonly count: number;
  /** When the oldest became ready. */
  readonly oldest_since: string;
}

export interface BrokenEntryDocument {
  readonly identity: string | null;
  readonly job: string | null;
  /** schedule[n] of an invalid entry that does not run; null for the others. */
  readonly invalid_index: number | null;
  readonly problems: readonly ProblemDocument[];
}

/** `GET /admin/scheduler/status` and `cronledger status --json`: the status model on the wire. */
export interface StatusDocument extends Versioned {
  readonly database_now: string;
  readonly namespace: string;
  readonly entries: readonly EntryDocument[];
  /** Entries with problems: load-time schedule warnings, entries that never fire again, quarantined entries (from the ledger), entries recent ticks repaired, and invalid entries. */
  readonly broken: readonly BrokenEntryDocument[];
  /** Invalid schedule entries that do not run (`invalidEntries: "quarantine"`), with their problems. */
  readonly invalid: readonly BrokenEntryDocument[];
  /** Job counts by queue, then status. */
  readonly queues: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** Job counts by status over all queues; every status is present. */
  readonly totals: Readonly<Record<JobStatus, number>>;
  /** Ready jobs waiting for a worker that knows them (none serving their queue has registered their name), by job name. */
  readonly waiting_for_worker: readonly WaitingForWorkerDocument[];
  /** The entries the application created at runtime (`ledger.schedules`): counts by state, and one page of them in key order (null when none was asked). */
  readonly dynamic: DynamicStatusDocument;
}

export interface DynamicStatusDocument {
  /** total stored; due now; paused; quarantined; never (no slot ahead). */
  readonly counts: DynamicCounts;
  readonly prefix: string;
  /** One page in key order; null when the status was not asked for one. */
  readonly entries: readonly DynamicEntryDocument[] | null;
  /** The `after` of the next page; null on the last (or without a page). */
  readonly next: string | null;
}

const problemDocument = (problem: EntryProblem): ProblemDocument => ({ code: problem.code, severity: problem.severity, message: problem.message, at: iso(problem.at) });

export const brokenEntryDocument = (broken: BrokenEntry): BrokenEntryDocument => ({
  identity: broken.identity,
  job: broken.jobName,
  invalid_index: broken.invalidIndex,
  problems: broken.problems.map(problemDocument),
});

function runDocument(run: EntryRun): RunDocument {
  return {
    id: run.jobId,
    kind: run.kind,
    outcome: run.outcome,
    attempts: run.attempts,
    max_attempts: run.maxAttempts,
    scheduled_for: iso(run.scheduledFor),
    run_at: iso(run.runAt),
    started_at: iso(run.startedAt),
    finished_at: iso(run.finishedAt),
    retried: run.retried,
    late: run.late,
    error: run.error,
  };
}

/** The status model as its document (the entries' `recentRuns`, the page's strips, are not part of it). */
export function statusDocument(status: SchedulerStatus): StatusDocument {
  return {
    version: WIRE_VERSION,
    database_now: iso(status.databaseNow),
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
      latest_run: entry.latestRun === null ? null : runDocument(entry.latestRun),
      chore: entry.chore,
      quarantine:
        entry.quarantine === null
          ? null
          : { until: iso(entry.quarantine.until), reason: entry.quarantine.reason, count: entry.quarantine.count, since: iso(entry.quarantine.since) },
      pause: entry.pause === null ? null : { at: iso(entry.pause.at), by: entry.pause.by, note: entry.pause.note },
      problems: entry.problems.map(problemDocument),
    })),
    broken: status.broken.map(brokenEntryDocument),
    invalid: status.invalid.map(brokenEntryDocument),
    queues: status.queues,
    totals: status.totals,
    waiting_for_worker: status.waitingForWorker.map((row) => ({ job: row.jobName, count: row.count, oldest_since: iso(row.oldestSince) })),
    dynamic: {
      counts: status.dynamic.counts,
      prefix: status.dynamic.prefix,
      entries: status.dynamic.page === null ? null : status.dynamic.page.entries.map(dynamicEntryDocument),
      next: status.dynamic.page?.next ?? null,
    },
  };
}

import type { ScheduleProblem } from "../errors.js";
import type { JobQueue } from "../jobs/queue.js";
import type { Scheduler } from "../schedule/scheduler.js";
import type { ResolvedEntry } from "../schedule/validate.js";
import { JOB_STATUSES, type JobStatus } from "../schema.js";
import type { EntryProblemTracker } from "./problems.js";

/**
 * The status of a ledger, built once per request from the scheduler's
 * entries and ledger rows, the queue's counts and the problems recent ticks
 * saw. Every view is a thin rendering of it: `ledger.status()` returns it,
 * the admin JSON (src/admin/status.ts) and the Schedule page
 * (src/admin/page.ts) show it in snake_case, `cronledger status` as text.
 */

export interface EntryProblem {
  readonly code: string;
  readonly severity: "error" | "warning";
  readonly message: string;
  /** When a tick saw it; null for problems found when the schedule was loaded. */
  readonly at: Date | null;
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
  readonly problems: readonly EntryProblem[];
}

/** A problem that belongs to no loaded entry (a load-time warning without an identity). */
export interface BrokenEntry {
  readonly identity: string | null;
  readonly jobName: string | null;
  readonly problems: readonly EntryProblem[];
}

export interface SchedulerStatus {
  readonly databaseNow: Date;
  readonly namespace: string;
  readonly entries: readonly EntryStatus[];
  /** Load-time schedule warnings (never_matches). */
  readonly warnings: readonly ScheduleProblem[];
  /** Entries with problems (load-time warnings, no upcoming slot, quarantined or repaired by a recent tick), then problems of no entry. */
  readonly broken: readonly BrokenEntry[];
  /** Job counts by queue, then status. */
  readonly queues: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** Job counts by status over all queues; every status is present. */
  readonly totals: Readonly<Record<JobStatus, number>>;
}

export interface StatusSources {
  readonly scheduler: Scheduler;
  readonly queue: JobQueue;
  readonly problems: EntryProblemTracker;
  /** List the chores (unless the ledger has `chores: false`). */
  readonly chores: boolean;
}

export async function buildStatus(sources: StatusSources): Promise<SchedulerStatus> {
  const { scheduler } = sources;
  const [ledger, queues] = await Promise.all([scheduler.ledger(), sources.queue.counts()]);
  // Per identity: load-time warnings, then what recent ticks saw.
  const loadProblems = new Map<string, EntryProblem[]>();
  const tickProblems = new Map<string, EntryProblem[]>();
  const add = (into: Map<string, EntryProblem[]>, identity: string, problem: EntryProblem) => into.set(identity, [...(into.get(identity) ?? []), problem]);
  // The chores are listed unless `chores: false`, also in a process that never calls start():
  // like the app's entries, they are slots of the shared ledger that whichever replica runs
  // start() fires, and the process serving the admin page or `cronledger status` is often not
  // one of them. Hiding them there would hide whether the reaper fires at all; shown, a reap
  // entry whose last slot lags tells the operator that no replica runs the chores.
  const listed = [...scheduler.entries.map((entry) => ({ entry, chore: false })), ...(sources.chores ? scheduler.choreEntries.map((entry) => ({ entry, chore: true })) : [])];
  const known = new Set(listed.map(({ entry }) => entry.identity));
  const unattached: BrokenEntry[] = [];
  for (const warning of scheduler.warnings) {
    const problem = { code: warning.code, severity: warning.severity, message: warning.message, at: null };
    if (warning.identity !== undefined && known.has(warning.identity)) add(loadProblems, warning.identity, problem);
    else unattached.push({ identity: warning.identity ?? null, jobName: warning.jobName ?? null, problems: [problem] });
  }
  for (const recent of sources.problems.recent()) {
    if (known.has(recent.identity)) add(tickProblems, recent.identity, { code: recent.code, severity: recent.severity, message: recent.message, at: recent.at });
  }

  const view = (entry: ResolvedEntry, chore: boolean): EntryStatus => {
    const slotMs = ledger.rows.get(entry.ledgerKey)?.slot_ms;
    const next = entry.calendar.nextMs(Math.max(slotMs ?? 0, ledger.nowMs));
    const loaded = loadProblems.get(entry.identity) ?? [];
    const noNextRun =
      next === null && !loaded.some((problem) => problem.code === "never_matches")
        ? [{ code: "no_next_run", severity: "warning" as const, message: "this entry has no upcoming slot; it will not fire again", at: null }]
        : [];
    return {
      identity: entry.identity,
      key: entry.ledgerKey,
      jobName: entry.jobName,
      cron: entry.cron.source,
      timezone: entry.timezone,
      lastEnqueuedSlot: slotMs === undefined ? null : new Date(slotMs),
      nextRunAt: next === null ? null : new Date(next),
      chore,
      problems: [...loaded, ...noNextRun, ...(tickProblems.get(entry.identity) ?? [])],
    };
  };
  const entries = listed.map(({ entry, chore }) => view(entry, chore));
  return {
    databaseNow: new Date(ledger.nowMs),
    namespace: scheduler.namespace,
    entries,
    warnings: scheduler.warnings,
    broken: [
      ...entries.filter((entry) => entry.problems.length > 0).map((entry) => ({ identity: entry.identity, jobName: entry.jobName, problems: entry.problems })),
      ...unattached,
    ],
    queues,
    totals: totalsOf(queues),
  };
}

function totalsOf(queues: Readonly<Record<string, Readonly<Record<string, number>>>>): Record<JobStatus, number> {
  const totals = Object.fromEntries(JOB_STATUSES.map((name) => [name, 0])) as Record<JobStatus, number>;
  for (const counts of Object.values(queues)) {
    for (const [name, count] of Object.entries(counts)) if (name in totals) totals[name as JobStatus] += count;
  }
  return totals;
}

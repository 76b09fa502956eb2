import type { Cronledger } from "../cronledger.js";
import { JOB_STATUSES, type JobStatus } from "../schema.js";

/** The parts of a ledger the admin endpoints read; any object with them can be served. */
export type AdminLedger = Pick<Cronledger, "status" | "failures" | "retryJob" | "metrics" | "entryProblems" | "namespace" | "logger">;

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
  readonly problems: readonly EntryProblemView[];
}

export interface BrokenEntryView {
  readonly identity: string | null;
  readonly job: string | null;
  readonly problems: readonly EntryProblemView[];
}

/** GET /admin/scheduler/status: snake_case, ISO instants, like the table columns operators query. */
export interface AdminStatus {
  readonly database_now: string;
  readonly namespace: string;
  readonly entries: readonly EntryView[];
  /** Entries with problems: load-time schedule warnings, entries that never fire again, and entries recent ticks quarantined or repaired. */
  readonly broken: readonly BrokenEntryView[];
  /** Job counts by queue, then status. */
  readonly queues: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** Job counts by status over all queues; every status is present. */
  readonly totals: Readonly<Record<JobStatus, number>>;
}

const iso = (date: Date | null | undefined) => (date ? date.toISOString() : null);

export async function adminStatus(ledger: AdminLedger): Promise<AdminStatus> {
  const status = await ledger.status();
  const problems = new Map<string, EntryProblemView[]>();
  const unattached: BrokenEntryView[] = [];
  const add = (identity: string, problem: EntryProblemView) => {
    const list = problems.get(identity) ?? [];
    list.push(problem);
    problems.set(identity, list);
  };
  const known = new Set(status.entries.map((entry) => entry.identity));
  for (const warning of status.warnings) {
    const view = { code: warning.code, severity: warning.severity, message: warning.message, at: null };
    if (warning.identity !== undefined && known.has(warning.identity)) add(warning.identity, view);
    else unattached.push({ identity: warning.identity ?? null, job: warning.jobName ?? null, problems: [view] });
  }
  for (const entry of status.entries) {
    if (entry.nextRunAt === null && !problems.get(entry.identity)?.some((problem) => problem.code === "never_matches")) {
      add(entry.identity, { code: "no_next_run", severity: "warning", message: "this entry has no upcoming slot; it will not fire again", at: null });
    }
  }
  for (const recent of ledger.entryProblems.recent()) {
    if (!known.has(recent.identity)) continue;
    add(recent.identity, { code: recent.code, severity: recent.severity, message: recent.message, at: recent.at.toISOString() });
  }

  const entries: EntryView[] = status.entries.map((entry) => ({
    identity: entry.identity,
    key: entry.key,
    job: entry.jobName,
    cron: entry.cron,
    timezone: entry.timezone,
    last_enqueued_slot: iso(entry.lastEnqueuedSlot),
    next_run_at: iso(entry.nextRunAt),
    chore: entry.chore,
    problems: problems.get(entry.identity) ?? [],
  }));
  const totals = Object.fromEntries(JOB_STATUSES.map((name) => [name, 0])) as Record<JobStatus, number>;
  for (const counts of Object.values(status.queues)) {
    for (const [name, count] of Object.entries(counts)) {
      if (name in totals) totals[name as JobStatus] += count;
    }
  }
  return {
    database_now: status.databaseNow.toISOString(),
    namespace: status.namespace,
    entries,
    broken: [
      ...entries.filter((entry) => entry.problems.length > 0).map((entry) => ({ identity: entry.identity, job: entry.job, problems: entry.problems })),
      ...unattached,
    ],
    queues: status.queues,
    totals,
  };
}

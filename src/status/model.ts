// The status document: its types (entries, broken entries, dynamic entries, the reads it takes) and its one builder,
// about 390 lines because the document and the function that fills it are read together; the parts that stand alone
// (health, runs, the wire form) live beside it in src/status/.
import type { LedgerRow } from "../db/sql/ledger.js";
import type { ScheduleProblem } from "../errors.js";
import type { WaitingForWorker } from "../operators/operations.js";
import { redact } from "../redact.js";
import type { InvalidScheduleEntry, Scheduler } from "../schedule/scheduler.js";
import type { DynamicCounts, DynamicScheduleEntry, DynamicSchedulePage, ScheduleListOptions } from "../schedule/schedules.js";
import type { ResolvedEntry } from "../schedule/validate.js";
import { JOB_STATUSES, type JobStatus } from "../schema.js";
import { entryHealth, overdueSlot, slotToleranceMs, type EntryRun, type EntryState } from "./health.js";
import type { EntryProblemTracker } from "./problems.js";
import { dynamicStrips } from "./dynamic-strips.js";
import { groupRuns, readRunRows, stateRun, stripFloors, type RunReader } from "./runs.js";

export type { EntryRun, EntryState, RunKind } from "./health.js";

/**
 * The status of a ledger: the one model of it, built once per request from
 * the scheduler's entries and one read of the ledger (its rows and the
 * database clock), the job counts, each entry's newest runs and the
 * problems recent ticks saw. `ledger.status()` returns it; the Schedule page
 * (src/admin/page.ts) and `cronledger status` render it; the JSON of the
 * HTTP API and of the CLI's `--json` is its wire form (src/wire/).
 */

export interface EntryProblem {
  readonly code: string;
  readonly severity: "error" | "warning";
  readonly message: string;
  /** When a tick saw it; null for problems found when the schedule was loaded. */
  readonly at: Date | null;
}

/** An entry's quarantine as its ledger row holds it: every replica defers the entry to `until`, and a successful claim clears it. */
export interface EntryQuarantine {
  /** No pass claims the entry before this instant. */
  readonly until: Date;
  /** The last failure, redacted and bounded. */
  readonly reason: string;
  /** Failures since the entry last fired. */
  readonly count: number;
  /** When this run of failures began. */
  readonly since: Date | null;
}

/** An operator's pause of an entry, as its ledger row holds it: every replica records the entry's slots as skipped until it is resumed. */
export interface EntryPause {
  readonly at: Date;
  /** Who paused it, as the surface reported it (the admin's `by`, the CLI's user). */
  readonly by: string | null;
  readonly note: string | null;
}

export interface EntryStatus {
  readonly identity: string;
  readonly key: string;
  readonly jobName: string;
  readonly cron: string;
  readonly timezone: string;
  /** The last slot handled (fired, or skipped as stale); null while none was: the entry never fired (see createdAt). */
  readonly lastEnqueuedSlot: Date | null;
  /** When its ledger row was created (first seen by a pass); null before any pass saw it. */
  readonly createdAt: Date | null;
  readonly nextRunAt: Date | null;
  /** What an operator alerts on (src/status/health.ts), and why in words. */
  readonly state: EntryState;
  readonly reason: string;
  /** Its newest run; null when no job of it exists (or retention deleted them). */
  readonly latestRun: EntryRun | null;
  /** One of cronledger's own chores (`cronledger.reap`, `cronledger.prune`), not an entry of the app's schedule. */
  readonly chore: boolean;
  /** Null unless the entry's ledger row is quarantined (its statement failed; shown by every replica's admin). */
  readonly quarantine: EntryQuarantine | null;
  /** Null unless an operator paused the entry (state `paused`). */
  readonly pause: EntryPause | null;
  readonly problems: readonly EntryProblem[];
  /**
   * Its most recent runs, newest first, when the status was asked for them
   * (`status({ runs })`: the Schedule page's strips); null otherwise.
   */
  readonly recentRuns: readonly EntryRun[] | null;
}

/** An entry with problems: a loaded one, an invalid one that does not run, or a load-time warning without an identity. */
export interface BrokenEntry {
  readonly identity: string | null;
  readonly jobName: string | null;
  /** Its position in the schedule when it is invalid and does not run (`invalidEntries: "quarantine"`); null otherwise. */
  readonly invalidIndex: number | null;
  readonly problems: readonly EntryProblem[];
}

export interface SchedulerStatus {
  readonly databaseNow: Date;
  readonly namespace: string;
  readonly entries: readonly EntryStatus[];
  /** Load-time schedule warnings (never_matches). */
  readonly warnings: readonly ScheduleProblem[];
  /** Entries with problems (load-time warnings, no upcoming slot, quarantined or repaired by a recent tick), then invalid entries that do not run, then problems of no entry. */
  readonly broken: readonly BrokenEntry[];
  /** Schedule entries left out because they are invalid (`invalidEntries: "quarantine"`), with their problems; also in `broken`. */
  readonly invalid: readonly BrokenEntry[];
  /** Job counts by queue, then status. */
  readonly queues: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** Job counts by status over all queues; every status is present. */
  readonly totals: Readonly<Record<JobStatus, number>>;
  /**
   * Ready jobs waiting for a worker that knows them, by job name: a rolling
   * deploy's new jobs until its workers are up, or jobs no deployed code has.
   */
  readonly waitingForWorker: readonly WaitingForWorker[];
  /**
   * The entries the application created at runtime (`ledger.schedules`):
   * their counts by state, always (a few counter rows and index ranges,
   * whatever is stored), and one page of them in key order when the status
   * was asked for it (`status({ dynamic })`); never all of them.
   */
  readonly dynamic: DynamicStatus;
}

/** The dynamic entries in a status: counts by state, and the page asked for (null when none was). */
export interface DynamicStatus {
  readonly counts: DynamicCounts;
  /** The page's key prefix ("" for every key). */
  readonly prefix: string;
  readonly page: DynamicStatusPage | null;
}

/** A page of dynamic entries in a status, each with its strip when one was asked for (`dynamic.runs`). */
export interface DynamicStatusPage extends DynamicSchedulePage {
  readonly entries: readonly DynamicEntryStatus[];
}

export interface DynamicEntryStatus extends DynamicScheduleEntry {
  /** Its most recent runs, newest first, as a static entry's `recentRuns` (the Schedule page's strip); null unless asked for. */
  readonly recentRuns: readonly EntryRun[] | null;
}

/** The page of dynamic entries a status lists: `ledger.schedules.list`'s options, and `runs` runs each for their strips (none by default). */
export interface DynamicStatusRequest extends ScheduleListOptions {
  readonly runs?: number | undefined;
}

/** What the status reads of the dynamic entries (`ledger.schedules`). */
export interface DynamicReads {
  counts(): Promise<DynamicCounts>;
  list(options: ScheduleListOptions): Promise<DynamicSchedulePage>;
}

/** What the status reads besides the ledger: job counts, jobs waiting for a worker, and entries' runs. */
export interface StatusReads extends RunReader {
  /** Job counts by queue, then status. */
  counts(): Promise<Record<string, Record<string, number>>>;
  waitingForWorker(): Promise<readonly WaitingForWorker[]>;
}

export interface StatusSources {
  readonly scheduler: Scheduler;
  readonly reads: StatusReads;
  readonly problems: EntryProblemTracker;
  /** List the chores (unless the ledger has `chores: false`). */
  readonly chores: boolean;
  /** The dynamic entries; without it the status counts none. */
  readonly dynamic?: DynamicReads | undefined;
}

/** The recent runs of one page of entries (the Schedule page's strips): `limit` runs each of page `page` of `perPage` entries in `state`. */
export interface StatusRunsRequest {
  readonly limit: number;
  /** Only entries in this state count for the pages; null or unset: every entry. */
  readonly state?: EntryState | null | undefined;
  /** 1-based; a page past the last is the last. */
  readonly page: number;
  readonly perPage: number;
}

export interface StatusOptions {
  /** Judge the entries at this instant instead of the database clock (tests, like `tick({ now })`). */
  readonly now?: Date | undefined;
  /** Load the recent runs of one page of entries too (`EntryStatus.recentRuns`: the runs of each entry's last `limit` slots, and its last finished run). */
  readonly runs?: StatusRunsRequest | undefined;
  /**
   * Load one page of the dynamic entries too (`dynamic.page`): keys with `prefix`, after `after`, `limit` of them (default
   * 100, at most 1000), and with `runs`, each one's last `runs` runs (`recentRuns`: one statement more, for that page only).
   */
  readonly dynamic?: DynamicStatusRequest | undefined;
}

const NO_DYNAMIC: DynamicCounts = { total: 0, due: 0, paused: 0, quarantined: 0, never: 0 };

/**
 * The dynamic entries' counts, and the page asked for: two statements sent together, each bounded whatever is stored;
 * then, when strips are asked for and the page has entries, their runs (one more, src/status/dynamic-strips.ts).
 */
async function readDynamic(reads: DynamicReads | undefined, runs: RunReader, request: DynamicStatusRequest | undefined, nowMs: number): Promise<DynamicStatus> {
  const prefix = request?.prefix ?? "";
  if (reads === undefined) return { counts: NO_DYNAMIC, prefix, page: null };
  const { runs: limit = 0, ...list } = request ?? {};
  const [counts, page] = await Promise.all([reads.counts(), request === undefined ? null : reads.list(list)]);
  if (page === null) return { counts, prefix, page };
  const strips = limit > 0 ? await dynamicStrips(runs, page.entries, limit, nowMs) : null;
  return { counts, prefix, page: { ...page, entries: page.entries.map((entry) => ({ ...entry, recentRuns: strips === null ? null : (strips.get(entry.ledgerKey) ?? []) })) } };
}

/** Page `page` (1-based, kept within 1 and the last page) of `perPage` items, and how many pages there are. */
export function pageOf<T>(items: readonly T[], page: number, perPage: number): { items: T[]; page: number; pages: number } {
  const pages = Math.max(1, Math.ceil(items.length / perPage));
  const current = Math.min(Math.max(1, Math.floor(page)), pages);
  return { items: items.slice((current - 1) * perPage, current * perPage), page: current, pages };
}

/**
 * The status model in a constant number of statements, whatever the number
 * of entries: the ledger with the database clock (one), the counts, the jobs
 * waiting for a worker, and the entries' runs (one, or two sent together
 * when a page's strips are asked for; a page filtered by state reads its
 * strips after the states are known, one more), and the dynamic entries'
 * counts, their page when asked for and that page's strips (one more).
 */
export async function buildStatus(sources: StatusSources, options: StatusOptions = {}): Promise<SchedulerStatus> {
  const { scheduler, reads } = sources;
  // The chores are listed unless `chores: false`, also in a process that never calls start():
  // like the app's entries, they are slots of the shared ledger that whichever replica runs
  // start() fires, and the process serving the admin page or `cronledger status` is often not
  // one of them. Hiding them there would hide whether the reaper fires at all; shown, a reap
  // entry whose last slot lags tells the operator that no replica runs the chores.
  const listed = [...scheduler.entries.map((entry) => ({ entry, chore: false })), ...(sources.chores ? scheduler.choreEntries.map((entry) => ({ entry, chore: true })) : [])];
  const listedEntries = listed.map(({ entry }) => entry);
  const request = options.runs;
  // Unfiltered, the page of entries is known before anything is read: its strips come with everyone's newest run.
  const early = request !== undefined && (request.state ?? null) === null ? pageOf(listedEntries, request.page, request.perPage).items : null;
  // The strips' floors are judged by the app's clock (the database's is read alongside); stripFloorMs's margin covers the difference.
  const floorNowMs = options.now?.getTime() ?? Date.now();
  const strips =
    request !== undefined && early !== null ? { keys: new Set(early.map((entry) => entry.ledgerKey)), limit: request.limit, entries: early, nowMs: floorNowMs } : undefined;
  const [ledger, queues, runRows, waiting, dynamic] = await Promise.all([
    scheduler.ledger(),
    reads.counts(),
    // The newest run of every entry (what its health is decided on), and the page's strips.
    readRunRows(reads, listedEntries.map((entry) => entry.ledgerKey), strips),
    // Job names whose ready jobs no live worker knows (the registry of workers, src/db/sql/workers.ts).
    reads.waitingForWorker(),
    // Its strips' floors and lateness are judged by the app's clock, as the static strips' floors are.
    readDynamic(sources.dynamic, reads, options.dynamic, floorNowMs),
  ]);
  const nowMs = options.now?.getTime() ?? ledger.nowMs;
  const runs = groupRuns(runRows, listedEntries, nowMs);
  const waitingByName = new Map(waiting.map((row) => [row.jobName, row]));
  // Rows held locked by another session, asked only of the overdue entries (one statement more when there are some): they say locked, not late.
  const overdue = listedEntries.filter((entry) => overdueSlot({ nowMs, ledger: ledgerInput(ledger.rows.get(entry.ledgerKey)), calendar: entry.calendar, jitterMs: entry.jitterMs }));
  const held = new Set(await scheduler.heldLedgerKeys(overdue.map((entry) => entry.ledgerKey)));
  // Per identity: load-time warnings, then what recent ticks saw.
  const loadProblems = new Map<string, EntryProblem[]>();
  const tickProblems = new Map<string, EntryProblem[]>();
  const add = (into: Map<string, EntryProblem[]>, identity: string, problem: EntryProblem) => into.set(identity, [...(into.get(identity) ?? []), problem]);
  const known = new Set(listed.map(({ entry }) => entry.identity));
  const unattached: BrokenEntry[] = [];
  for (const warning of scheduler.warnings) {
    const problem = { code: warning.code, severity: warning.severity, message: warning.message, at: null };
    if (warning.identity !== undefined && known.has(warning.identity)) add(loadProblems, warning.identity, problem);
    else unattached.push({ identity: warning.identity ?? null, jobName: warning.jobName ?? null, invalidIndex: null, problems: [problem] });
  }
  for (const recent of sources.problems.recent()) {
    if (known.has(recent.identity)) add(tickProblems, recent.identity, { code: recent.code, severity: recent.severity, message: recent.message, at: recent.at });
  }
  const invalid = scheduler.invalid.map(invalidEntry);
  const stripKeys = strips?.keys;

  const view = (entry: ResolvedEntry, chore: boolean): EntryStatus => {
    const row = ledger.rows.get(entry.ledgerKey);
    const slotMs = row?.slot_ms;
    const quarantine = quarantineOf(row);
    const pause = pauseOf(row);
    const next = entry.calendar.nextMs(Math.max(slotMs ?? 0, nowMs));
    const entryRuns = runs.get(entry.ledgerKey) ?? [];
    const latestRun = stateRun(entryRuns);
    const health = entryHealth({
      nowMs,
      ledger: ledgerInput(row),
      calendar: entry.calendar,
      jitterMs: entry.jitterMs,
      latestRun,
      quarantine,
      pause,
      waitingForWorker: waitingSince(latestRun, entry, nowMs, waitingByName.get(entry.jobName)),
      locked: held.has(entry.ledgerKey) ? { key: entry.ledgerKey } : null,
    });
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
      lastEnqueuedSlot: row?.handled ? new Date(row.slot_ms) : null,
      createdAt: row === undefined ? null : new Date(row.created_ms),
      nextRunAt: next === null ? null : new Date(next),
      state: health.state,
      reason: health.reason,
      latestRun,
      chore,
      quarantine,
      pause,
      problems: [...loaded, ...noNextRun, ...(quarantine === null ? [] : [quarantineProblem(quarantine)]), ...(tickProblems.get(entry.identity) ?? [])],
      recentRuns: stripKeys?.has(entry.ledgerKey) ? entryRuns : null,
    };
  };
  const viewed = listed.map(({ entry, chore }) => view(entry, chore));
  const entries = request !== undefined && early === null ? await withStrips(viewed, listed, request, reads, nowMs) : viewed;
  return {
    databaseNow: new Date(nowMs),
    namespace: scheduler.namespace,
    entries,
    warnings: scheduler.warnings,
    broken: [
      ...entries
        .filter((entry) => entry.problems.length > 0)
        .map((entry) => ({ identity: entry.identity, jobName: entry.jobName, invalidIndex: null, problems: entry.problems })),
      ...invalid,
      ...unattached,
    ],
    invalid,
    queues,
    totals: totalsOf(queues),
    waitingForWorker: waiting,
    dynamic,
  };
}

/** A page of the entries in one state gets its strips once the states are known: one more statement, for that page only. */
async function withStrips(
  entries: readonly EntryStatus[],
  listed: readonly { readonly entry: ResolvedEntry }[],
  request: StatusRunsRequest,
  reads: RunReader,
  nowMs: number,
): Promise<EntryStatus[]> {
  const shown = pageOf(
    entries.filter((entry) => entry.state === request.state),
    request.page,
    request.perPage,
  ).items;
  const keys = new Set(shown.map((entry) => entry.key));
  const shownEntries = listed.map(({ entry }) => entry).filter((entry) => keys.has(entry.ledgerKey));
  const stripKeys = [...keys];
  const runs = groupRuns(await reads.entryRuns(stripKeys, request.limit, stripFloors(stripKeys, shownEntries, request.limit, nowMs)), shownEntries, nowMs);
  return entries.map((entry) => (keys.has(entry.key) ? { ...entry, recentRuns: runs.get(entry.key) ?? [] } : entry));
}

/** A schedule entry that is invalid and does not run, as the status lists it (in `invalid` and `broken`). */
export function invalidEntry(entry: InvalidScheduleEntry): BrokenEntry {
  return {
    identity: entry.identity,
    jobName: entry.jobName,
    invalidIndex: entry.index,
    problems: entry.problems.map((problem) => ({ code: problem.code, severity: problem.severity, message: problem.message, at: null })),
  };
}

function quarantineOf(row: LedgerRow | undefined): EntryQuarantine | null {
  if (row === undefined || row.quarantined_until_ms === null) return null;
  return {
    until: new Date(row.quarantined_until_ms),
    reason: redact(row.quarantine_reason ?? "(no reason recorded)"),
    count: row.quarantine_count,
    since: row.quarantined_since_ms === null ? null : new Date(row.quarantined_since_ms),
  };
}

function pauseOf(row: LedgerRow | undefined): EntryPause | null {
  if (row === undefined || row.paused_at_ms === null) return null;
  return { at: new Date(row.paused_at_ms), by: row.paused_by, note: row.paused_note === null ? null : redact(row.paused_note) };
}

/** A quarantined entry is broken, in every replica's status: the problem carries the ledger's reason. */
function quarantineProblem(quarantine: EntryQuarantine): EntryProblem {
  const times = quarantine.count === 1 ? "once" : `${quarantine.count} times`;
  return {
    code: "quarantined",
    severity: "error",
    message: `failed ${times}; deferred until ${quarantine.until.toISOString()}: ${quarantine.reason}`,
    at: quarantine.since,
  };
}

/**
 * Since when the entry's jobs have waited for a worker that knows their job:
 * no live worker registers its job name (`waiting`, the jobs of that name no
 * live worker can run), its newest run is still queued, and the oldest of
 * them has been ready for longer than the entry's tolerance, so a job a
 * rollout is about to serve does not flap the state. The oldest, not the
 * newest: an entry firing every few seconds always has a job younger than
 * its tolerance.
 */
function waitingSince(run: EntryRun | null, entry: ResolvedEntry, nowMs: number, waiting: WaitingForWorker | undefined): { since: Date; count: number } | null {
  if (waiting === undefined || run === null || (run.kind !== "queued" && run.kind !== "retrying")) return null;
  const sinceMs = Math.min(waiting.oldestSince.getTime(), run.runAt.getTime());
  return nowMs - sinceMs >= slotToleranceMs(entry.calendar, run.scheduledFor.getTime()) ? { since: new Date(sinceMs), count: waiting.count } : null;
}

const ledgerInput = (row: LedgerRow | undefined) => (row === undefined ? null : { slotMs: row.slot_ms, createdMs: row.created_ms, handled: row.handled });

function totalsOf(queues: Readonly<Record<string, Readonly<Record<string, number>>>>): Record<JobStatus, number> {
  const totals = Object.fromEntries(JOB_STATUSES.map((name) => [name, 0])) as Record<JobStatus, number>;
  for (const counts of Object.values(queues)) {
    for (const [name, count] of Object.entries(counts)) if (name in totals) totals[name as JobStatus] += count;
  }
  return totals;
}

/**
 * The deploy plan: what the running system will do with a new schedule,
 * from the live ledger, the live workers and the live jobs (read by
 * src/db/sql/deploy.ts) and the new config's resolved entries. Pure: the
 * ledger is the state, the config the desired state, the plan their
 * difference. Slots come from upcoming.ts, so the plan's first fires are
 * the ones `cronledger next` prints and the pass fires. See docs/decisions.md,
 * "Upcoming slots and the deploy plan", for what each kind means. A little
 * over 350 lines: every kind of change and what each row carries, in one place.
 */
import { readDeployState, type DeployJobGroup, type DeployLedgerRow, type DeployRead } from "../db/sql/deploy.js";
import type { Executor } from "../db/executor.js";
import { dynamicOrphansIfStored } from "../db/sql/dynamic.js";
import { MAX_KEY_LENGTH } from "../keys.js";
import { parseCron } from "./cron.js";
import { fireTime } from "./plan.js";
import { slotCalendar, type SlotCalendar } from "./slot-calendar.js";
import { duration, localTime, upcomingSlots, type UpcomingSlot } from "./upcoming.js";
import type { ResolvedEntry } from "./validate.js";

export type PlanKind = "added" | "unchanged" | "retimed" | "rekeyed";

/** The parts of a ledger row's identity, read back from its key (null when the key was bounded to a digest). */
export interface RowIdentity {
  readonly jobName: string;
  readonly entryKey: string | undefined;
  readonly cron: string;
  readonly timezone: string;
}

/** A live ledger row as the plan sees it. */
export interface PlanRow {
  readonly key: string;
  readonly jobName: string;
  readonly identity: RowIdentity | null;
  /** The last slot handled, or while `handled` (updated since created, as the status reads it) is false the row's creation. */
  readonly lastSlotMs: number;
  readonly handled: boolean;
  readonly updatedMs: number;
  /** Live jobs of this row (its `schedule_key`). */
  readonly queued: number;
  readonly running: number;
  readonly carried: CarriedState;
}

/** What a row holds besides its ledger value, which a new version of the same identity inherits. */
export interface CarriedState {
  readonly paused: { readonly atMs: number; readonly by: string | null; readonly note: string | null } | null;
  /** A quarantine still running at the read. */
  readonly quarantine: { readonly untilMs: number; readonly count: number; readonly reason: string | null } | null;
  /** Queued jobs of the row that no live worker can run. */
  readonly waitingForWorker: number;
}

/** Slots due when the new version first ticks: the latest fires at once inside the catch-up window, or is skipped as stale. */
export interface Overdue {
  readonly slotMs: number;
  readonly stale: boolean;
  /** Earlier missed slots the pass passes over (it fires only the latest due slot); capped at 1,000. */
  readonly passedOver: number;
}

/** Across a change of timing: the last slot of the old timing, the first of the new, and whether a run is skipped or doubled. */
export interface SwitchCheck {
  readonly lastOldMs: number | null;
  readonly firstNewMs: number | null;
  readonly verdict: "ok" | "doubled" | "skipped" | "unknown";
  readonly message: string;
}

export interface PlanEntry {
  readonly kind: PlanKind;
  readonly entry: ResolvedEntry;
  readonly chore: boolean;
  /** unchanged: the entry's own row; retimed/rekeyed: the old identity's row, which retires. */
  readonly row: PlanRow | null;
  /** The first slot the new version fires after the overdue one, if any. */
  readonly first: UpcomingSlot | null;
  readonly overdue: Overdue | null;
  /** When the overdue slot is handled: the switch, or the end of a quarantine that outlasts it. */
  readonly overdueAtMs: number | null;
  readonly switchCheck: SwitchCheck | null;
  /** retimed/rekeyed: when the old row can be pruned at the earliest. */
  readonly retiresAtMs: number | null;
  /** Whether a live worker registers the entry's job name now. */
  readonly served: boolean;
}

export interface RemovedRow {
  readonly row: PlanRow;
  readonly chore: boolean;
  readonly retiresAtMs: number;
  readonly servedByLiveWorker: boolean;
  readonly servedByNewConfig: boolean;
}

export interface DroppedJobName {
  readonly jobName: string;
  readonly queued: number;
  readonly running: number;
}

export interface DeployPlan {
  readonly namespace: string;
  /** The database clock when the live state was read. */
  readonly nowMs: number;
  /** The switch: when the new version is assumed to take over (its first tick); default the database clock. */
  readonly atMs: number;
  readonly graceMs: number;
  readonly entries: readonly PlanEntry[];
  readonly removed: readonly RemovedRow[];
  /** Job names live workers register (or removed rows schedule) that the new config does not: their jobs wait for a worker that never comes. */
  readonly droppedJobNames: readonly DroppedJobName[];
  /** Job names the new config schedules that no live worker registers yet: their jobs wait until the new workers start. */
  readonly unservedJobNames: readonly string[];
  readonly liveWorkers: number;
  /** The plan retires ledger rows of the application's entries (removed, retimed, re-keyed). */
  readonly retiresRows: boolean;
  readonly dropsJobNames: boolean;
  /**
   * Dynamic entries (`ledger.schedules`) whose job the new config does not
   * define, by job name: after the deploy they fire jobs no worker runs.
   * Null when they were not read (no dynamic entries' table yet).
   */
  readonly dynamicOrphans: DynamicOrphans | null;
  /** Some dynamic entries would be orphaned: like a dropped job name, it needs approval. */
  readonly orphansDynamicEntries: boolean;
}

/** Stored dynamic entries of job names a config does not define. */
export interface DynamicOrphans {
  readonly total: number;
  readonly byJob: Readonly<Record<string, number>>;
}

export interface DeployPlanInput {
  readonly namespace: string;
  /** The new config's entries, chores included. */
  readonly entries: readonly ResolvedEntry[];
  /** The job names of cronledger's chores: their entries are shown apart, always served, and never need approval on their own. */
  readonly choreJobNames: ReadonlySet<string>;
  /** Every job name the new config registers, chores included. */
  readonly jobNames: ReadonlySet<string>;
  readonly state: DeployRead;
  readonly atMs?: number | undefined;
  readonly graceMs: number;
  /** The dynamic entries the new config's job names would orphan, when read. */
  readonly dynamicOrphans?: DynamicOrphans | null | undefined;
}

const MAX_PASSED_OVER = 1_000;
const DIGEST_KEY = /~[0-9a-f]{64}$/;

export function planDeploy(input: DeployPlanInput): DeployPlan {
  const { state } = input;
  const atMs = input.atMs ?? state.nowMs;
  const liveNames = new Set(state.workers.flatMap((worker) => worker.job_names));
  const jobsByKey = groupBy(state.jobs, (group) => group.schedule_key ?? "");
  const rows = state.rows.map((row) => planRow(row, input, jobsByKey.get(row.key) ?? []));
  const rowsByKey = new Map(rows.map((row) => [row.key, row]));
  const entryKeys = new Set(input.entries.map((entry) => entry.ledgerKey));
  const unmatched = new Set(rows.filter((row) => !entryKeys.has(row.key)));
  const reported = new Map(state.rows.map((row) => [row.key, row.reported_ms ?? Number.NEGATIVE_INFINITY]));
  const retiresAt = (row: PlanRow) => Math.max(row.updatedMs, reported.get(row.key) ?? Number.NEGATIVE_INFINITY, atMs) + input.graceMs;

  const entries = input.entries.map((entry): PlanEntry => {
    const chore = input.choreJobNames.has(entry.jobName);
    // Every worker runs the chores, whatever names it registers.
    const served = chore || liveNames.has(entry.jobName);
    const own = rowsByKey.get(entry.ledgerKey);
    if (own) {
      // A quarantine that outlasts the switch holds the entry until it ends: the pass looks at it then.
      const quarantineUntil = own.carried.quarantine?.untilMs ?? Number.NEGATIVE_INFINITY;
      const firstLook = Math.max(atMs, quarantineUntil);
      const overdue = overdueAt(entry, own.lastSlotMs, firstLook);
      const after = Math.max(own.lastSlotMs, overdue?.slotMs ?? Number.NEGATIVE_INFINITY);
      const first = upcomingSlots(entry, firstLook, 1, after).slots[0] ?? null;
      return { kind: "unchanged", entry, chore, row: own, first, overdue, overdueAtMs: overdue === null ? null : firstLook, switchCheck: null, retiresAtMs: null, served };
    }
    // A new identity: its row is created by the first pass, at that instant, so nothing before it fires.
    const first = upcomingSlots(entry, atMs, 1, atMs).slots[0] ?? null;
    const previous = predecessor(entry, unmatched);
    if (!previous) return { kind: "added", entry, chore, row: null, first, overdue: null, overdueAtMs: null, switchCheck: null, retiresAtMs: null, served };
    unmatched.delete(previous.row);
    return {
      kind: previous.kind,
      entry,
      chore,
      row: previous.row,
      first,
      overdue: null,
      overdueAtMs: null,
      switchCheck: switchCheck(entry, previous.row, atMs),
      retiresAtMs: retiresAt(previous.row),
      served,
    };
  });

  const removed = [...unmatched].map((row): RemovedRow => ({
    row,
    chore: input.choreJobNames.has(row.jobName),
    retiresAtMs: retiresAt(row),
    servedByLiveWorker: liveNames.has(row.jobName),
    servedByNewConfig: input.jobNames.has(row.jobName),
  }));

  const droppedNames = new Set([...liveNames, ...removed.map((item) => item.row.jobName)].filter((name) => !input.jobNames.has(name)));
  const droppedJobNames = [...droppedNames].sort().map((jobName) => {
    const groups = state.jobs.filter((group) => group.job_name === jobName);
    return { jobName, queued: sum(groups.map((group) => group.queued)), running: sum(groups.map((group) => group.running)) };
  });
  const unservedJobNames = [...new Set(input.entries.map((entry) => entry.jobName))].filter((name) => !liveNames.has(name) && !input.choreJobNames.has(name)).sort();

  return {
    namespace: input.namespace,
    nowMs: state.nowMs,
    atMs,
    graceMs: input.graceMs,
    entries,
    removed,
    droppedJobNames,
    unservedJobNames,
    liveWorkers: state.workers.length,
    // A chore's row retiring (its cron changed in the config) is cronledger's own housekeeping: no person need approve it.
    retiresRows: removed.some((item) => !item.chore) || entries.some((item) => !item.chore && (item.kind === "retimed" || item.kind === "rekeyed")),
    dropsJobNames: droppedJobNames.length > 0,
    dynamicOrphans: input.dynamicOrphans ?? null,
    orphansDynamicEntries: (input.dynamicOrphans?.total ?? 0) > 0,
  };
}

function planRow(row: DeployLedgerRow, input: DeployPlanInput, groups: readonly DeployJobGroup[]): PlanRow {
  const queued = sum(groups.map((group) => group.queued));
  const live = input.state.workers;
  const servedGroup = (name: string, queue: string) => live.some((worker) => worker.job_names.includes(name) && worker.queues.includes(queue));
  const waiting = sum(groups.filter((group) => !servedGroup(group.job_name, group.queue)).map((group) => group.queued));
  return {
    key: row.key,
    jobName: row.job_name,
    identity: identityOf(input.namespace, row.key),
    lastSlotMs: row.slot_ms,
    handled: row.updated_ms !== row.created_ms,
    updatedMs: row.updated_ms,
    queued,
    running: sum(groups.map((group) => group.running)),
    carried: {
      paused: row.paused_ms === null ? null : { atMs: row.paused_ms, by: row.paused_by, note: row.paused_note },
      quarantine:
        row.quarantined_until_ms !== null && row.quarantined_until_ms > input.state.nowMs
          ? { untilMs: row.quarantined_until_ms, count: row.quarantine_count, reason: row.quarantine_reason }
          : null,
      waitingForWorker: waiting,
    },
  };
}

/**
 * A row's identity read back from its key, `namespace|job|key|cron|zone`
 * (src/schedule/identity.ts). Entry keys, crons and zones hold no `|`; a job
 * name may, so the parts are taken from the right. A key bounded to a
 * digest (longer than 255 characters) cannot be read back.
 */
export function identityOf(namespace: string, key: string): RowIdentity | null {
  if (key.length === MAX_KEY_LENGTH && DIGEST_KEY.test(key)) return null;
  const prefix = `${namespace}|`;
  if (!key.startsWith(prefix)) return null;
  const parts = key.slice(prefix.length).split("|");
  if (parts.length < 4) return null;
  const timezone = parts.pop() as string;
  const cron = parts.pop() as string;
  const entryKey = parts.pop() as string;
  return { jobName: parts.join("|"), entryKey: entryKey === "" ? undefined : entryKey, cron, timezone };
}

/** The unmatched row a new identity replaces: the same job and key with another timing (retimed), or the same job and timing under another key (re-keyed). */
function predecessor(entry: ResolvedEntry, rows: ReadonlySet<PlanRow>): { kind: "retimed" | "rekeyed"; row: PlanRow } | undefined {
  const candidates = [...rows].filter((row) => row.identity !== null && row.identity.jobName === entry.jobName);
  const retimed = candidates.find((row) => row.identity?.entryKey === entry.entryKey);
  if (retimed) return { kind: "retimed", row: retimed };
  const rekeyed = candidates.find((row) => row.identity?.cron === entry.cron.canonical && row.identity.timezone === entry.timezone);
  return rekeyed ? { kind: "rekeyed", row: rekeyed } : undefined;
}

/** The slot the first pass at `atMs` finds due after ledger value `ledgerMs`, if any, as the pass decides it (src/db/sql/ledger.ts). */
export function overdueAt(entry: ResolvedEntry, ledgerMs: number, atMs: number): Overdue | null {
  let slot = entry.calendar.latestMs(atMs);
  while (slot !== null && fireTime(entry, slot) > atMs) slot = entry.calendar.latestMs(slot - 1);
  if (slot === null || slot <= ledgerMs) return null;
  let passedOver = 0;
  for (let cursor = entry.calendar.nextMs(ledgerMs); cursor !== null && cursor < slot && passedOver < MAX_PASSED_OVER; cursor = entry.calendar.nextMs(cursor)) passedOver += 1;
  return { slotMs: slot, stale: slot < atMs - entry.catchUpWindowMs, passedOver };
}

/**
 * Whether switching from the old row's timing to the entry's at `atMs`
 * skips or doubles a run, judged on the two timings: the old version fires
 * its slots up to the switch and the new one from it (never retroactively). Doubled: the
 * last old run and the first new one are closer than half a period of
 * either timing; skipped: they are further apart than one and a half of the
 * longer period.
 */
function switchCheck(entry: ResolvedEntry, row: PlanRow, atMs: number): SwitchCheck {
  const zone = entry.timezone;
  const firstNew = entry.calendar.nextMs(atMs);
  const old = row.identity === null ? null : oldCalendar(row.identity);
  if (old === null) return { lastOldMs: row.lastSlotMs, firstNewMs: firstNew, verdict: "unknown", message: "the old timing cannot be read back from its ledger key (bounded to a digest): check the switch by hand" };
  // The old timing's last slot before the switch (its row's value may be a creation instant, not a slot).
  const lastOld = old.latestMs(atMs) ?? row.lastSlotMs;
  const oldNext = old.nextMs(atMs);
  const newPrevious = entry.calendar.latestMs(atMs);
  if (firstNew === null) return { lastOldMs: lastOld, firstNewMs: null, verdict: "skipped", message: "the new timing never fires" };
  const shown = (ms: number) => localTime(zone, ms);
  const between = firstNew - lastOld;
  const newGap = newPrevious === null ? Number.POSITIVE_INFINITY : firstNew - newPrevious;
  const oldGap = oldNext === null ? Number.POSITIVE_INFINITY : oldNext - lastOld;
  if (between < Math.min(newGap, oldGap) / 2) {
    return {
      lastOldMs: lastOld,
      firstNewMs: firstNew,
      verdict: "doubled",
      message: `runs twice across the switch: the old timing's ${shown(lastOld)} and the new timing's ${shown(firstNew)} are ${duration(between)} apart (a period is ${duration(Math.min(newGap, oldGap))})`,
    };
  }
  if (between > Math.max(Number.isFinite(newGap) ? newGap : 0, Number.isFinite(oldGap) ? oldGap : 0) * 1.5) {
    const missed = [newPrevious === null ? null : `the new timing's ${shown(newPrevious)} is before the switch`, oldNext === null ? null : `the old timing's ${shown(oldNext)} after it`].filter(Boolean);
    return {
      lastOldMs: lastOld,
      firstNewMs: firstNew,
      verdict: "skipped",
      message: `skips a run across the switch: nothing fires for ${duration(between)}, between the old timing's ${shown(lastOld)} and the new timing's ${shown(firstNew)} (${missed.join(", ")})`,
    };
  }
  return { lastOldMs: lastOld, firstNewMs: firstNew, verdict: "ok", message: `no run skipped or doubled: the old timing last fires ${shown(lastOld)}, the new one first ${shown(firstNew)}` };
}

/** Old timings repeat across rows (a bulk retime): one calendar per timing, as validation shares them. */
const oldCalendars = new Map<string, SlotCalendar | null>();

function oldCalendar(identity: RowIdentity): SlotCalendar | null {
  const timing = `${identity.cron}|${identity.timezone}`;
  if (!oldCalendars.has(timing)) {
    let calendar: SlotCalendar | null = null;
    try {
      calendar = slotCalendar(parseCron(identity.cron), { timezone: identity.timezone });
    } catch {
      // A key this version cannot read back (another release's cron grammar): the switch is reported as unknown.
    }
    if (oldCalendars.size >= 10_000) oldCalendars.clear();
    oldCalendars.set(timing, calendar);
  }
  return oldCalendars.get(timing) ?? null;
}

function groupBy<T>(items: readonly T[], keyOf: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const group = groups.get(key);
    if (group) group.push(item);
    else groups.set(key, [item]);
  }
  return groups;
}

function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}

/** Reads the live state (one read-only statement) and plans `input`'s entries against it. */
export async function readDeployPlan(executor: Executor, input: Omit<DeployPlanInput, "state">): Promise<DeployPlan> {
  const [state, dynamicOrphans] = await Promise.all([readDeployState(executor, input.namespace), dynamicOrphansIfStored(executor, input.namespace, [...input.jobNames])]);
  return planDeploy({ ...input, state, dynamicOrphans });
}

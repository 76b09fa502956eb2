/**
 * An entry's health: one state an operator can alert on, and the reason in
 * words, decided from plain inputs (the ledger row, the entry's calendar,
 * the database clock, its latest run, quarantine and whether its job waits
 * for a worker). Pure, so every view (status JSON, Schedule page, CLI,
 * metrics) shows the same verdict and the rules are unit-tested alone
 * (test/entry-health.test.ts). The precedence and the tolerance are in
 * docs/decisions.md.
 */

/** The states, most urgent first: when several hold, the first one is the entry's state. */
export const ENTRY_STATES = ["paused", "quarantined", "locked", "late", "failing", "waiting_for_worker", "retrying", "running", "never_fired", "ok"] as const;
export type EntryState = (typeof ENTRY_STATES)[number];

/** What one job row of an entry (one run) looks like to the status. */
export type RunKind = "succeeded" | "skipped" | "failed" | "retrying" | "running" | "queued" | "held" | "cancelled";

export interface EntryRun {
  readonly jobId: number;
  readonly kind: RunKind;
  /** `skip` / `noop` for a succeeded run that ended as a business outcome. */
  readonly outcome: string | null;
  readonly attempts: number;
  readonly maxAttempts: number;
  /** The slot it ran for. */
  readonly scheduledFor: Date;
  /** When it became (or becomes) ready: the slot's fire time, or its next attempt for a retrying run. */
  readonly runAt: Date;
  readonly startedAt: Date | null;
  readonly finishedAt: Date | null;
  /** It took more than one attempt (or is waiting for another). */
  readonly retried: boolean;
  /** It started, or is still waiting to start, more than the entry's tolerance after its slot's fire time. */
  readonly late: boolean;
  /** The first part of its stored error, redacted: failed and retrying runs only. */
  readonly error: string | null;
}

export interface HealthInput {
  /** The database clock. */
  readonly nowMs: number;
  /** The entry's ledger row; null before any pass has seen the entry. `handled`: a slot was claimed, skipped or repaired since it was created. */
  readonly ledger: { readonly slotMs: number; readonly createdMs: number; readonly handled: boolean } | null;
  readonly calendar: { nextMs(afterMs: number): number | null };
  /** The entry's jitter bound: a slot fires at most this long after it. */
  readonly jitterMs: number;
  /** Its newest run (highest slot, then newest job). */
  readonly latestRun: EntryRun | null;
  /** Left out of passes until `until` because its slot could not be enqueued. */
  readonly quarantine?: { readonly until: Date; readonly reason: string; readonly count?: number } | null;
  /** An operator's pause in its ledger row: its slots are recorded as skipped until it is resumed. */
  readonly pause?: { readonly at: Date; readonly by: string | null; readonly note: string | null } | null;
  /**
   * Its jobs wait for a worker that knows its job (true, or since when the
   * oldest has been ready and how many wait: of its job name, however many
   * newer jobs its slots keep adding).
   */
  readonly waitingForWorker?: boolean | { readonly since: Date; readonly count?: number } | null;
  /** Its ledger row is held locked by another session (checked only for an overdue entry), with the row's key for the runbook. */
  readonly locked?: { readonly key: string } | null;
}

export interface EntryHealth {
  readonly state: EntryState;
  readonly reason: string;
}

/** Never late before this: a pass runs at the fire time, and a slow or retried pass must not look like a stopped ticker. */
export const MIN_LATE_TOLERANCE_MS = 30_000;
/** Never more lenient than this: an hourly or daily entry whose slot is five minutes overdue is not being ticked. */
export const MAX_LATE_TOLERANCE_MS = 5 * 60_000;

/**
 * How long after its fire time a slot may stay unhandled before its entry is
 * late: half the period, at least 30 s, at most 5 minutes. An every-minute
 * entry is late 30 s after a missed slot; a 15-second one after 30 s; an
 * hourly or daily one after 5 minutes.
 */
export function lateToleranceMs(periodMs: number): number {
  return Math.min(MAX_LATE_TOLERANCE_MS, Math.max(MIN_LATE_TOLERANCE_MS, periodMs / 2));
}

/** The tolerance of slot `slotMs`: from the gap to the slot after it. */
export function slotToleranceMs(calendar: HealthInput["calendar"], slotMs: number): number {
  const after = calendar.nextMs(slotMs);
  return lateToleranceMs(after === null ? Number.POSITIVE_INFINITY : after - slotMs);
}

/** "45s", "12m", "3h 5m", "2d 4h": how long, as an operator reads it. */
export function describeDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 === 0 || m >= 10 ? `${m}m` : `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return m % 60 === 0 ? `${h}h` : `${h}h ${m % 60}m`;
  const d = Math.floor(h / 24);
  return h % 24 === 0 ? `${d}d` : `${d}d ${h % 24}h`;
}

const iso = (ms: number | Date) => new Date(ms).toISOString();

/** The first slot the ledger has not handled, when it is overdue beyond its tolerance. */
export function overdueSlot(input: Pick<HealthInput, "nowMs" | "ledger" | "calendar" | "jitterMs">): { slotMs: number; overdueMs: number; toleranceMs: number } | null {
  if (input.ledger === null) return null;
  const slotMs = input.calendar.nextMs(input.ledger.slotMs);
  if (slotMs === null) return null;
  const toleranceMs = slotToleranceMs(input.calendar, slotMs);
  const overdueMs = input.nowMs - (slotMs + input.jitterMs);
  return overdueMs >= toleranceMs ? { slotMs, overdueMs, toleranceMs } : null;
}

function runLabel(run: EntryRun): string {
  return `job #${run.jobId} for slot ${iso(run.scheduledFor)}`;
}

function withError(text: string, error: string | null): string {
  return error === null || error === "" ? text : `${text}: ${error}`;
}

/** The entry's state and why, by the precedence of ENTRY_STATES. */
export function entryHealth(input: HealthInput): EntryHealth {
  const { latestRun: run, quarantine, pause } = input;
  if (pause) {
    // Paused first: its slots are skipped on purpose, so it is neither late nor failing because of them.
    const note = pause.note === null || pause.note === "" ? "" : `: ${pause.note}`;
    return { state: "paused", reason: `paused by ${pause.by ?? "an operator"} at ${iso(pause.at)}${note}; its slots are recorded as skipped until it is resumed` };
  }
  if (quarantine) {
    const times = quarantine.count !== undefined && quarantine.count > 1 ? ` (${quarantine.count} times in a row)` : "";
    return { state: "quarantined", reason: `left out of scheduler passes until ${iso(quarantine.until)}${times}: ${quarantine.reason}` };
  }
  const overdue = overdueSlot(input);
  if (overdue && input.locked) {
    return {
      state: "locked",
      reason:
        `slot ${iso(overdue.slotMs)} is ${describeDuration(overdue.overdueMs)} past its fire time: its ledger row (key ${input.locked.key}) is held locked ` +
        "by another session (an open transaction?), so passes skip it while the other entries fire; it fires once the lock goes " +
        "(find the holder: select pid, state, xact_start, query from pg_stat_activity where state = 'idle in transaction')",
    };
  }
  if (overdue) {
    return {
      state: "late",
      reason:
        `slot ${iso(overdue.slotMs)} is ${describeDuration(overdue.overdueMs)} past its fire time and not handled ` +
        `(tolerance ${describeDuration(overdue.toleranceMs)}): no scheduler is ticking this namespace, or its passes fail`,
    };
  }
  if (run?.kind === "failed") {
    return { state: "failing", reason: withError(`its latest run, ${runLabel(run)}, failed for good after ${run.attempts}/${run.maxAttempts} attempts`, run.error) };
  }
  const waiting = input.waitingForWorker;
  if (waiting && run !== null && (run.kind === "queued" || run.kind === "retrying")) {
    const since = typeof waiting === "object" ? ` since ${iso(waiting.since)}` : "";
    const count = typeof waiting === "object" ? (waiting.count ?? 1) : 1;
    const others = count > 1 ? ` (${count} of its job's jobs wait, the oldest ready${since})` : since === "" ? "" : ` (ready${since})`;
    return {
      state: "waiting_for_worker",
      reason: `${runLabel(run)} waits${others} and no worker has claimed it: no running worker knows this job or serves its queue, or all of them are busy`,
    };
  }
  if (run?.kind === "retrying") {
    return {
      state: "retrying",
      reason: withError(`attempt ${run.attempts}/${run.maxAttempts} of ${runLabel(run)} failed; the next attempt is due at ${iso(run.runAt)}`, run.error),
    };
  }
  if (run?.kind === "running") {
    return { state: "running", reason: `${runLabel(run)} is running since ${iso(run.startedAt ?? run.runAt)} (attempt ${run.attempts}/${run.maxAttempts})` };
  }
  const next = input.calendar.nextMs(Math.max(input.ledger?.slotMs ?? 0, input.nowMs));
  const nextText = next === null ? "it has no upcoming slot" : `its next slot is ${iso(next)}`;
  if (run === null && input.ledger === null) {
    return { state: "never_fired", reason: `no scheduler pass has seen it yet (it has no ledger row); ${nextText}` };
  }
  if (run === null && !input.ledger?.handled) {
    return { state: "never_fired", reason: `created at ${iso(input.ledger?.createdMs ?? input.nowMs)} and no slot has come due since; ${nextText}` };
  }
  const latest = run === null ? "" : `; its latest run, ${runLabel(run)}, ${describeRunKind(run)}`;
  return { state: "ok", reason: `${nextText}${latest}` };
}

function describeRunKind(run: EntryRun): string {
  switch (run.kind) {
    case "succeeded":
      return run.retried ? `succeeded after ${run.attempts} attempts` : "succeeded";
    case "skipped":
      return run.outcome === "paused" || run.outcome === "overlap" ? `was skipped (${run.outcome})` : `ended as ${run.outcome ?? "skip"}`;
    case "cancelled":
      return "was cancelled";
    case "queued":
      return `is queued for ${iso(run.runAt)}`;
    case "held":
      return "waits for the running job of this entry to end (its overlap policy)";
    default:
      return run.kind;
  }
}

import type { EntryRunRow } from "../db/sql/operators.js";
import { redact } from "../redact.js";
import type { ResolvedEntry } from "../schedule/validate.js";
import { slotToleranceMs, type EntryRun, type RunKind } from "./health.js";

/** An error as a run shows it: redacted, its first line, at most this long (the failures view has the whole of it). */
const RUN_ERROR_CHARS = 300;

/** Where the runs come from: the newest `limit` job rows of each schedule key, finished at or after its floor if given (entryRuns in src/db/sql/operators.ts). */
export interface RunReader {
  entryRuns(keys: readonly string[], limit: number, floorsMs?: readonly (number | null)[]): Promise<EntryRunRow[]>;
}

/**
 * How long before its slot a run may finish and still be found by a strip:
 * a slot's job is made when the slot is due (by the app's clock, which the
 * database's may trail by seconds) and finishes after that, so an hour is
 * margin only. A day partition is the unit read, so the margin costs little.
 */
const FLOOR_MARGIN_MS = 3_600_000;

/**
 * The oldest finish a strip of `limit` runs needs: `limit` slots back from
 * now, less the margin. The strip shows the runs of the entry's last `limit`
 * slots (and its last finished run, whatever its age), so the history is
 * read from that day on only: days of older runs are never opened, and the
 * strip's cost follows the entry's cadence, not the history's length
 * (docs/decisions.md, "Run strips read the days of their slots"). Null when
 * the calendar has fewer slots (never matches): the whole history.
 */
export function stripFloorMs(entry: Pick<ResolvedEntry, "calendar">, limit: number, nowMs: number): number | null {
  let slot: number | null = nowMs;
  for (let count = 0; count < limit && slot !== null; count++) slot = entry.calendar.latestMs(count === 0 ? slot : slot - 1);
  return slot === null ? null : slot - FLOOR_MARGIN_MS;
}

/** The floors (stripFloorMs) of `keys`' entries, in key order: null for a key no entry has. */
export function stripFloors(keys: readonly string[], entries: readonly Pick<ResolvedEntry, "ledgerKey" | "calendar">[], limit: number, nowMs: number): (number | null)[] {
  const byKey = new Map(entries.map((entry) => [entry.ledgerKey, entry]));
  return keys.map((key) => {
    const entry = byKey.get(key);
    return entry === undefined ? null : stripFloorMs(entry, limit, nowMs);
  });
}

function kindOf(row: EntryRunRow): RunKind {
  switch (row.status) {
    case "succeeded":
      return row.outcome === "skip" || row.outcome === "noop" ? "skipped" : "succeeded";
    case "skipped":
      // A slot its entry's pause or overlap policy skipped: recorded, never run.
      return "skipped";
    case "queued":
      return row.attempts > 0 ? "retrying" : "queued";
    case "held":
      // Made by the entry's overlap policy while an earlier run runs: it starts when that one ends.
      return "held";
    case "running":
    case "failed":
    case "cancelled":
      return row.status;
    default:
      return "queued";
  }
}

function shortError(error: string | null): string | null {
  if (error === null) return null;
  const line = redact(error).split("\n", 1)[0] ?? "";
  return line.length > RUN_ERROR_CHARS ? `${line.slice(0, RUN_ERROR_CHARS - 1)}…` : line;
}

/**
 * One job row of an entry as a run. A run is late when its first attempt
 * started (or, still waiting, would start now) more than the entry's
 * tolerance after the slot's fire time; later attempts start late by design.
 */
export function toEntryRun(row: EntryRunRow, entry: Pick<ResolvedEntry, "calendar" | "jitterMs">, nowMs: number): EntryRun {
  const kind = kindOf(row);
  const firstStart = row.attempts <= 1 ? (row.started_at_ms ?? (kind === "queued" || kind === "held" ? nowMs : null)) : null;
  const lateBy = firstStart === null ? 0 : firstStart - (row.scheduled_for_ms + entry.jitterMs);
  return {
    jobId: row.id,
    kind,
    outcome: row.outcome,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    scheduledFor: new Date(row.scheduled_for_ms),
    runAt: new Date(row.run_at_ms),
    startedAt: row.started_at_ms === null ? null : new Date(row.started_at_ms),
    finishedAt: row.finished_at_ms === null ? null : new Date(row.finished_at_ms),
    retried: row.attempts > 1 || kind === "retrying",
    late: lateBy >= slotToleranceMs(entry.calendar, row.scheduled_for_ms),
    error: shortError(row.last_error),
  };
}

/**
 * The job rows of the entries with `keys`: the newest `strips.limit` of the
 * keys in `strips.keys` (from the day of their floor on, stripFloorMs), the
 * newest one of every other key. Each row is read
 * once: the two key sets go out as two statements at the same time, or as
 * one when a set is empty.
 */
export async function readRunRows(
  reader: RunReader,
  keys: readonly string[],
  strips?: { readonly keys: ReadonlySet<string>; readonly limit: number; readonly entries: readonly ResolvedEntry[]; readonly nowMs: number },
): Promise<EntryRunRow[]> {
  if (strips === undefined || strips.limit <= 1) return reader.entryRuns(keys, 1);
  const latestOnly = keys.filter((key) => !strips.keys.has(key));
  const stripKeys = keys.filter((key) => strips.keys.has(key));
  const recentRuns = () => reader.entryRuns(stripKeys, strips.limit, stripFloors(stripKeys, strips.entries, strips.limit, strips.nowMs));
  if (latestOnly.length === 0) return recentRuns();
  if (stripKeys.length === 0) return reader.entryRuns(latestOnly, 1);
  const [recent, latest] = await Promise.all([recentRuns(), reader.entryRuns(latestOnly, 1)]);
  return [...recent, ...latest];
}

/** Job rows as runs, by ledger key, newest first (the order entryRuns returns them in); rows of other keys are left out. */
export function groupRuns(rows: readonly EntryRunRow[], entries: readonly Pick<ResolvedEntry, "ledgerKey" | "calendar" | "jitterMs">[], nowMs: number): Map<string, EntryRun[]> {
  const byKey = new Map(entries.map((entry) => [entry.ledgerKey, entry]));
  const runs = new Map<string, EntryRun[]>();
  for (const row of rows) {
    const entry = byKey.get(row.schedule_key);
    if (entry === undefined) continue;
    const list = runs.get(row.schedule_key) ?? [];
    list.push(toEntryRun(row, entry, nowMs));
    runs.set(row.schedule_key, list);
  }
  return runs;
}

/**
 * The run an entry's state is decided from: its newest, unless that is a slot
 * its overlap policy skipped because a job of it is live (running, queued or
 * retrying): then that job, so a `skip` entry reads running for as long as its
 * job runs instead of flipping to ok at every skipped slot.
 */
export function stateRun(runs: readonly EntryRun[]): EntryRun | null {
  const newest = runs[0] ?? null;
  if (newest === null || newest.kind !== "skipped" || newest.outcome !== "overlap") return newest;
  return runs.find((run) => run.kind === "running" || run.kind === "queued" || run.kind === "retrying") ?? newest;
}

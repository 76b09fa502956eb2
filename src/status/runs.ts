import type { EntryRunRow } from "../db/sql/operators.js";
import type { JobQueue } from "../jobs/queue.js";
import { redact } from "../redact.js";
import type { ResolvedEntry } from "../schedule/validate.js";
import { slotToleranceMs, type EntryRun, type RunKind } from "./health.js";

/** An error as a run shows it: redacted, its first line, at most this long (the failures view has the whole of it). */
const RUN_ERROR_CHARS = 300;

function kindOf(row: EntryRunRow): RunKind {
  switch (row.status) {
    case "succeeded":
      return row.outcome === "skip" || row.outcome === "noop" ? "skipped" : "succeeded";
    case "queued":
      return row.attempts > 0 ? "retrying" : "queued";
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
  const firstStart = row.attempts <= 1 ? (row.started_at_ms ?? (kind === "queued" ? nowMs : null)) : null;
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

/** The `limit` most recent runs of each entry, newest first, by ledger key (one statement; see entryRuns in src/db/sql/jobs.ts). */
export async function loadEntryRuns(queue: JobQueue, entries: readonly ResolvedEntry[], limit: number, nowMs: number | Promise<number>): Promise<Map<string, EntryRun[]>> {
  const byKey = new Map(entries.map((entry) => [entry.ledgerKey, entry]));
  const clock = Promise.resolve(nowMs);
  // Awaited below; until then its failure must not count as unhandled (the caller sees it through its own await).
  clock.catch(() => undefined);
  const rows = await queue.entryRuns([...byKey.keys()], limit);
  const now = await clock;
  const runs = new Map<string, EntryRun[]>();
  for (const row of rows) {
    const entry = byKey.get(row.schedule_key);
    if (entry === undefined) continue;
    const list = runs.get(row.schedule_key) ?? [];
    list.push(toEntryRun(row, entry, now));
    runs.set(row.schedule_key, list);
  }
  return runs;
}

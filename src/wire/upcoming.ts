import type { InvalidScheduleEntry } from "../schedule/scheduler.js";
import type { UpcomingEntry, UpcomingSlot } from "../schedule/upcoming.js";
import { iso, WIRE_VERSION, type Versioned } from "./version.js";

/** A note on a slot or an entry: a stable code and a sentence for people. */
export interface NoteDocument {
  readonly code: string;
  readonly message: string;
}

/** One upcoming slot of an entry. */
export interface UpcomingSlotDocument {
  /** The instant the cron names, UTC. */
  readonly slot: string;
  /** When the pass fires it: the slot plus the entry's jitter, UTC. */
  readonly fires_at: string;
  /** The slot's wall time in the entry's zone, with its offset (`2026-03-29T03:30:00+02:00`). */
  readonly local: string;
  readonly notes: readonly NoteDocument[];
}

/** One entry's upcoming slots. */
export interface UpcomingEntryDocument {
  readonly identity: string;
  readonly key: string | null;
  readonly job: string;
  readonly cron: string;
  readonly timezone: string;
  readonly jitter_ms: number;
  readonly catch_up_window_ms: number;
  readonly notes: readonly NoteDocument[];
  readonly slots: readonly UpcomingSlotDocument[];
}

/** `cronledger next --json`: the next fire times of the chosen entries from `from`. */
export interface NextDocument extends Versioned {
  readonly from: string;
  readonly entries: readonly UpcomingEntryDocument[];
  /** Invalid entries of the config, left out of `entries` (the command then exits 1): schedule[index], its job and its problems. */
  readonly invalid: readonly InvalidEntryDocument[];
}

export interface InvalidEntryDocument {
  readonly index: number;
  readonly job: string | null;
  readonly problems: readonly NoteDocument[];
}

export function upcomingEntryDocument(upcoming: UpcomingEntry): UpcomingEntryDocument {
  const { entry } = upcoming;
  return {
    identity: entry.identity,
    key: entry.entryKey ?? null,
    job: entry.jobName,
    cron: entry.cron.source,
    timezone: entry.timezone,
    jitter_ms: entry.jitterMs,
    catch_up_window_ms: entry.catchUpWindowMs,
    notes: upcoming.notes.map((note) => ({ code: note.code, message: note.message })),
    slots: upcoming.slots.map(upcomingSlotDocument),
  };
}

export function upcomingSlotDocument(slot: UpcomingSlot): UpcomingSlotDocument {
  return {
    slot: iso(new Date(slot.slotMs)),
    fires_at: iso(new Date(slot.fireMs)),
    local: slot.local,
    notes: slot.notes.map((note) => ({ code: note.code, message: note.message })),
  };
}

export function nextDocument(fromMs: number, entries: readonly UpcomingEntry[], invalid: readonly InvalidScheduleEntry[] = []): NextDocument {
  return {
    version: WIRE_VERSION,
    from: iso(new Date(fromMs)),
    entries: entries.map(upcomingEntryDocument),
    invalid: invalid.map((entry) => ({ index: entry.index, job: entry.jobName, problems: entry.problems.map((problem) => ({ code: problem.code, message: problem.message })) })),
  };
}

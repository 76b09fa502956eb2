/**
 * Upcoming slots: an entry's next fire times from an instant, with notes
 * where its calendar is unusual (a wall time a DST change skips or repeats,
 * the jitter, a catch-up window shorter than the gap between slots). Pure,
 * and built on the ticker's own calendar (slot-calendar.ts) and fire time
 * (plan.ts), so what `cronledger next`, the Schedule page's upcoming list
 * and the deploy plan show is what the pass will fire
 * (test/next-slots.test.ts ticks through DST changes and compares).
 */
import { DAY, zoneFor, type Transition } from "./civil-time.js";
import { fireTime } from "./plan.js";
import { slotCalendar, type SlotCalendar } from "./slot-calendar.js";
import type { ResolvedEntry } from "./validate.js";

export type SlotNoteCode = "shifted" | "skipped_wall_times" | "repeated_once" | "repeated_twice";
export type EntryNoteCode = "jitter" | "catch_up_shorter_than_gap";

export interface Note<C extends string> {
  readonly code: C;
  readonly message: string;
}

export interface UpcomingSlot {
  /** The slot (the instant the cron names), epoch ms. */
  readonly slotMs: number;
  /** When the pass fires it: the slot plus the entry's deterministic jitter. */
  readonly fireMs: number;
  /** The slot's wall time in the entry's zone, `2026-03-29T03:30:00+02:00`. */
  readonly local: string;
  readonly notes: readonly Note<SlotNoteCode>[];
}

export interface UpcomingEntry {
  readonly entry: ResolvedEntry;
  readonly fromMs: number;
  readonly slots: readonly UpcomingSlot[];
  readonly notes: readonly Note<EntryNoteCode>[];
}

/** Wall-clock calendars (the cron read in UTC, where no DST exists), one per canonical timing. */
const wallCalendars = new Map<string, SlotCalendar>();

/**
 * The first `count` slots of `entry` whose fire time is after `fromMs`, in
 * firing order. A slot before `fromMs` whose jittered fire time is after it
 * is included: it has not fired yet. `afterSlotMs`: only slots after it (a
 * ledger value; a new entry's row starts at the instant it is created, so
 * it never fires a slot before that).
 */
export function upcomingSlots(entry: ResolvedEntry, fromMs: number, count: number, afterSlotMs = Number.NEGATIVE_INFINITY): UpcomingEntry {
  const slots: UpcomingSlot[] = [];
  const wall = wallCalendarOf(entry);
  for (let cursor = Math.max(fromMs - entry.jitterMs - 1, afterSlotMs); slots.length < count; ) {
    const slotMs = entry.calendar.nextMs(cursor);
    if (slotMs === null) break;
    cursor = slotMs;
    const fireMs = fireTime(entry, slotMs);
    if (fireMs <= fromMs) continue;
    slots.push({ slotMs, fireMs, local: localTime(entry.timezone, slotMs), notes: slotNotes(entry, wall, slotMs) });
  }
  return { entry, fromMs, slots, notes: entryNotes(entry) };
}

function wallCalendarOf(entry: ResolvedEntry): SlotCalendar {
  const key = `${entry.cron.canonical}|${entry.cron.wildcardHour}`;
  let calendar = wallCalendars.get(key);
  if (!calendar) {
    calendar = slotCalendar(entry.cron, { timezone: "UTC" });
    wallCalendars.set(key, calendar);
  }
  return calendar;
}

/** Whether the cron names this wall time (wall times encoded as UTC instants). */
function namesWallTime(wall: SlotCalendar, wallMs: number): boolean {
  return wall.nextMs(wallMs - 1) === wallMs;
}

function slotNotes(entry: ResolvedEntry, wall: SlotCalendar, slotMs: number): Note<SlotNoteCode>[] {
  const zone = zoneFor(entry.timezone);
  const offset = zone.offsetAt(slotMs);
  const wallMs = slotMs + offset;
  const notes: Note<SlotNoteCode>[] = [];
  for (const transition of transitionsNear(entry.timezone, slotMs)) {
    const jump = transition.after - transition.before;
    if (jump > 0) {
      // Spring forward: wall times in [at+before, at+after) do not exist that day.
      const gapStart = transition.at + transition.before;
      const gapEnd = transition.at + transition.after;
      if (!namesWallTime(wall, wallMs) && slotMs >= transition.at && slotMs < transition.at + jump) {
        const intended = slotMs + transition.before;
        notes.push({
          code: "shifted",
          message: `${clockOf(intended)} does not exist on ${dateOf(intended)} in ${entry.timezone} (clocks jump from ${clockOf(gapStart)} to ${clockOf(gapEnd)}): fires at ${clockOf(wallMs)}${offsetText(offset)} instead`,
        });
      } else if (entry.cron.wildcardHour && slotMs >= transition.at && slotMs - transition.at < DAY) {
        // A wildcard hour runs on real time: the gap's wall times are not fired at all. Noted on the first slot after it.
        const previous = entry.calendar.latestMs(slotMs - 1);
        const skipped = wall.nextMs(gapStart - 1);
        if ((previous === null || previous < transition.at) && skipped !== null && skipped < gapEnd) {
          notes.push({
            code: "skipped_wall_times",
            message: `${clockOf(skipped)} does not exist on ${dateOf(skipped)} in ${entry.timezone} (clocks jump from ${clockOf(gapStart)} to ${clockOf(gapEnd)}): the wall times in the gap do not fire; this is the first slot after it`,
          });
        }
      }
    } else if (jump < 0) {
      // Fall back: wall times in [at+after, at+before) happen twice.
      if (wallMs >= transition.at + transition.after && wallMs < transition.at + transition.before) {
        const first = wallMs - transition.before;
        const second = wallMs - transition.after;
        const both = entry.calendar.latestMs(first) === first && entry.calendar.latestMs(second) === second;
        const which = slotMs === first ? "first" : "second";
        const offsets = `${offsetText(transition.before)}, then ${offsetText(transition.after)}`;
        notes.push(
          both
            ? { code: "repeated_twice", message: `${clockOf(wallMs)} happens twice on ${dateOf(wallMs)} in ${entry.timezone} (${offsets}): fires both times; this is the ${which}` }
            : { code: "repeated_once", message: `${clockOf(wallMs)} happens twice on ${dateOf(wallMs)} in ${entry.timezone} (${offsets}): fires once, at the first (${offsetText(transition.before)})` },
        );
      }
    }
  }
  return notes;
}

function entryNotes(entry: ResolvedEntry): Note<EntryNoteCode>[] {
  const notes: Note<EntryNoteCode>[] = [];
  if (entry.jitterMs > 0) {
    notes.push({ code: "jitter", message: `each slot fires 0 to ${duration(entry.jitterMs)} after it (jitter), at an instant fixed per slot that every replica agrees on` });
  }
  const gap = entry.calendar.shortestGapMs();
  if (Number.isFinite(gap) && entry.catchUpWindowMs < gap) {
    notes.push({
      code: "catch_up_shorter_than_gap",
      message: `the catch-up window (${duration(entry.catchUpWindowMs)}) is shorter than the gap between slots (${duration(gap)}): a slot not fired within ${duration(entry.catchUpWindowMs)} of its time (every process down) is skipped, not fired late, and the next run is the next slot`,
    });
  }
  return notes;
}

/** The zone's transitions within a day either side of `ms`. */
function transitionsNear(timezone: string, ms: number): Transition[] {
  const zone = zoneFor(timezone);
  const found: Transition[] = [];
  for (let from = ms - DAY; ; ) {
    const transition = zone.firstTransitionIn(from, ms + DAY);
    if (!transition) return found;
    found.push(transition);
    from = transition.at + 1;
  }
}

/** An instant as wall time in `timezone` with its offset: `2026-03-29T03:30:00+02:00`. */
export function localTime(timezone: string, ms: number): string {
  const offset = zoneFor(timezone).offsetAt(ms);
  return `${new Date(ms + offset).toISOString().slice(0, 19)}${offsetText(offset)}`;
}

function offsetText(offsetMs: number): string {
  const minutes = Math.round(Math.abs(offsetMs) / 60_000);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${offsetMs < 0 ? "-" : "+"}${pad(Math.floor(minutes / 60))}:${pad(minutes % 60)}`;
}

/** A wall time (encoded as a UTC instant) as `02:30`, with seconds when it has them. */
function clockOf(wallMs: number): string {
  const text = new Date(wallMs).toISOString().slice(11, 19);
  return text.endsWith(":00") ? text.slice(0, 5) : text;
}

function dateOf(wallMs: number): string {
  return new Date(wallMs).toISOString().slice(0, 10);
}

/** "30s", "2m", "1h30m", "1d": durations as a user writes them. */
export function duration(ms: number): string {
  const parts: string[] = [];
  let rest = Math.round(ms);
  for (const [unit, size] of [["d", DAY], ["h", 3_600_000], ["m", 60_000], ["s", 1_000]] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  if (rest > 0 || parts.length === 0) parts.push(`${rest}ms`);
  return parts.join("");
}

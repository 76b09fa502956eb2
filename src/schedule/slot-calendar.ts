/**
 * The slot calendar: "first slot after t" and "latest slot at or before t"
 * for a cron in a time zone, with the DST rules of the README's "Catch-up and
 * DST" (a fixed-hour slot in a spring-forward gap fires once, shifted; a
 * repeated wall time at fall-back fires once, at its first occurrence; a
 * wildcard hour fires at every real instant). The two directions are one
 * algorithm walked forwards and backwards over the zone's offset regimes,
 * and they must agree instant for instant, so they stay side by side here;
 * the zone's offsets and the civil-date arithmetic are in civil-time.ts.
 */
import { cronFieldSets, parseCron } from "./cron.js";
import { assertTimezone } from "./timezone.js";
import type { CronFieldSets, ParsedCron } from "./cron.js";
import { civilFromDays, DAY, daysInMonth, SECOND, weekdayOf, zoneFor } from "./civil-time.js";

export interface SlotCalendar {
  readonly cron: ParsedCron;
  readonly timezone: string;
  /** First slot strictly after `after`. */
  next(after: Date | number): Date | null;
  /** Last slot at or before `atOrBefore`. */
  latest(atOrBefore: Date | number): Date | null;
  nextMs(afterMs: number): number | null;
  latestMs(atOrBeforeMs: number): number | null;
  /** Smallest gap between consecutive slots, estimated from the wall-clock sequence; Infinity when it never fires. */
  shortestGapMs(): number;
}

/** Gaps and folds last less than a day, so an older transition cannot shape a later slot. */
const LOOKBACK = 2 * DAY;
/** Every day pattern repeats within 400 Gregorian years; not matching in that span means never. */
const SEARCH_DAYS = 146_097 + 1;
const GAP_SAMPLE_SLOTS = 1_000;
const GAP_SAMPLE_FROM = Date.UTC(2001, 0, 1);

export function slotCalendar(cron: string | ParsedCron, options: { timezone?: string } = {}): SlotCalendar {
  const parsed = typeof cron === "string" ? parseCron(cron) : cron;
  const timezone = options.timezone ?? "UTC";
  assertTimezone(timezone);
  const wall = parsed.neverMatches ? null : new WallClockMatcher(cronFieldSets(parsed));
  const zone = isUtc(timezone) ? null : zoneFor(timezone);
  const fixedHour = !parsed.wildcardHour;
  let shortestGap: number | undefined;

  const nextMs = (afterMs: number): number | null => {
    if (!wall) return null;
    let from = Math.floor(checkMs(afterMs)) + 1;
    if (!zone) return wall.firstAtOrAfter(from);

    // Walk the offset regimes (spans between transitions) from the one that
    // holds `from`; within a regime wall time is a plain shift of UTC.
    let start = zone.lastTransitionIn(from - LOOKBACK, from);
    let offset = start ? start.after : zone.offsetAt(from);
    for (;;) {
      let gapSlot = Infinity;
      let regularFrom = from;
      if (start && fixedHour) {
        if (start.before > offset) {
          // Fall-back: wall times just after the transition repeat ones
          // already fired before it; a fixed-hour entry fires only the first.
          regularFrom = Math.max(from, start.at + (start.before - offset));
        } else {
          // Spring-forward: wall times in the gap fire at the wall time
          // shifted by the gap, i.e. read with the offset before it.
          const wallTime = wall.firstAtOrAfter(Math.max(from, start.at) + start.before);
          if (wallTime !== null && wallTime < start.at + offset) gapSlot = wallTime - start.before;
        }
      }
      const wallTime = wall.firstAtOrAfter(regularFrom + offset);
      if (wallTime === null) return gapSlot === Infinity ? null : gapSlot;
      const regular = wallTime - offset;
      const end = zone.firstTransitionIn(from + 1, regular);
      if (!end) return Math.min(regular, gapSlot);
      // Gap slots sit within the gap's length after `start`, long before `end`.
      if (gapSlot !== Infinity) return gapSlot;
      from = end.at;
      start = end;
      offset = end.after;
    }
  };

  const latestMs = (atOrBeforeMs: number): number | null => {
    if (!wall) return null;
    let until = Math.floor(checkMs(atOrBeforeMs));
    if (!zone) return wall.lastAtOrBefore(until);

    // The mirror image of nextMs: walk regimes backwards from the one that
    // holds `until`, applying the same fall-back and spring-forward rules.
    let offset = zone.offsetAt(until);
    for (;;) {
      const wallTime = wall.lastAtOrBefore(until + offset);
      const regular = wallTime === null ? null : wallTime - offset;
      const start = zone.lastTransitionIn((regular ?? until) - LOOKBACK, until);
      // No transition shortly before the candidate: the regime covers it plainly.
      if (!start) return regular;
      let best: number | null = null;
      if (regular !== null && regular >= start.at) {
        const repeatsEnd = fixedHour && start.before > offset ? start.at + (start.before - offset) : start.at;
        if (regular >= repeatsEnd) best = regular;
      }
      if (fixedHour && start.before < offset) {
        const gapWall = wall.lastAtOrBefore(Math.min(until + start.before, start.at + offset - 1));
        if (gapWall !== null && gapWall >= start.at + start.before) {
          best = Math.max(best ?? -Infinity, gapWall - start.before);
        }
      }
      if (best !== null) return best;
      if (regular === null) return null;
      until = start.at - 1;
      offset = start.before;
    }
  };

  return Object.freeze({
    cron: parsed,
    timezone,
    nextMs,
    latestMs,
    next: (after: Date | number) => toDate(nextMs(typeof after === "number" ? after : after.getTime())),
    latest: (atOrBefore: Date | number) =>
      toDate(latestMs(typeof atOrBefore === "number" ? atOrBefore : atOrBefore.getTime())),
    shortestGapMs: () => (shortestGap ??= wall ? wall.shortestGap() : Infinity),
  });
}

function toDate(ms: number | null): Date | null {
  return ms === null ? null : new Date(ms);
}

function checkMs(ms: number): number {
  if (!Number.isFinite(ms)) throw new RangeError(`Expected a valid Date or epoch milliseconds, got ${ms}`);
  return ms;
}

function isUtc(timezone: string): boolean {
  return /^(?:utc|etc\/utc|etc\/uct|uct|gmt|etc\/gmt|etc\/gmt[+-]0|etc\/zulu|zulu|universal|etc\/universal)$/i.test(
    timezone,
  );
}

/**
 * Matches the cron against wall-clock times encoded as if they were UTC
 * instants (no DST there), at second resolution, without allocating.
 */
class WallClockMatcher {
  private readonly secondNext: Int8Array;
  private readonly secondPrev: Int8Array;
  private readonly minuteNext: Int8Array;
  private readonly minutePrev: Int8Array;
  private readonly hourNext: Int8Array;
  private readonly hourPrev: Int8Array;
  private readonly months: Uint8Array;
  private readonly daysOfMonth: Uint8Array;
  private readonly daysOfWeek: Uint8Array;
  private readonly lastWeekdays: Uint8Array;
  private readonly firstTime: number;
  private readonly lastTime: number;

  constructor(private readonly sets: CronFieldSets) {
    [this.secondNext, this.secondPrev] = lookups(sets.second, 60);
    [this.minuteNext, this.minutePrev] = lookups(sets.minute, 60);
    [this.hourNext, this.hourPrev] = lookups(sets.hour, 24);
    this.months = mask(sets.month, 13);
    this.daysOfMonth = mask(sets.dayOfMonth, 32);
    this.daysOfWeek = mask(sets.dayOfWeek, 7);
    this.lastWeekdays = mask(sets.lastWeekdayOfMonth, 7);
    this.firstTime = this.timeAtOrAfter(0);
    this.lastTime = this.timeAtOrBefore(86_399);
  }

  /** First matching wall time at or after `wallMs`. */
  firstAtOrAfter(wallMs: number): number | null {
    const seconds = Math.ceil(wallMs / SECOND);
    let day = Math.floor(seconds / 86_400);
    let time = this.timeAtOrAfter(seconds - day * 86_400);
    let { year, month, date } = civilFromDays(day);
    let weekday = weekdayOf(day);
    let length = daysInMonth(year, month);
    for (let steps = 0; steps < SEARCH_DAYS; steps++) {
      if (this.months[month] !== 1) {
        const skip = length - date + 1;
        day += skip;
        weekday = (weekday + skip) % 7;
        date = 1;
        if (++month > 12) {
          month = 1;
          year++;
        }
        length = daysInMonth(year, month);
        time = this.firstTime;
        continue;
      }
      if (time >= 0 && this.dayMatches(date, weekday, length)) return (day * 86_400 + time) * SECOND;
      day++;
      weekday = (weekday + 1) % 7;
      if (++date > length) {
        date = 1;
        if (++month > 12) {
          month = 1;
          year++;
        }
        length = daysInMonth(year, month);
      }
      time = this.firstTime;
    }
    return null;
  }

  /** Last matching wall time at or before `wallMs`. */
  lastAtOrBefore(wallMs: number): number | null {
    const seconds = Math.floor(wallMs / SECOND);
    let day = Math.floor(seconds / 86_400);
    let time = this.timeAtOrBefore(seconds - day * 86_400);
    let { year, month, date } = civilFromDays(day);
    let weekday = weekdayOf(day);
    let length = daysInMonth(year, month);
    for (let steps = 0; steps < SEARCH_DAYS; steps++) {
      if (this.months[month] !== 1) {
        day -= date;
        weekday = (((weekday - date) % 7) + 7) % 7;
        if (--month < 1) {
          month = 12;
          year--;
        }
        length = daysInMonth(year, month);
        date = length;
        time = this.lastTime;
        continue;
      }
      if (time >= 0 && this.dayMatches(date, weekday, length)) return (day * 86_400 + time) * SECOND;
      day--;
      weekday = (weekday + 6) % 7;
      if (--date < 1) {
        if (--month < 1) {
          month = 12;
          year--;
        }
        length = daysInMonth(year, month);
        date = length;
      }
      time = this.lastTime;
    }
    return null;
  }

  shortestGap(): number {
    let previous = this.firstAtOrAfter(GAP_SAMPLE_FROM);
    let shortest = Infinity;
    for (let count = 1; previous !== null && count < GAP_SAMPLE_SLOTS; count++) {
      const current = this.firstAtOrAfter(previous + SECOND);
      if (current === null) break;
      shortest = Math.min(shortest, current - previous);
      previous = current;
    }
    return shortest;
  }

  /** Mirrors cron-parser's day rule, including `L`, `5L` and `1#2`. */
  private dayMatches(date: number, weekday: number, length: number): boolean {
    const sets = this.sets;
    if (sets.days === "all") return true;
    const byMonthDay = this.daysOfMonth[date] === 1 || (sets.lastDayOfMonth && date === length);
    if (byMonthDay && sets.days !== "dow") return true;
    if (sets.days === "dom") return false;
    return (
      (this.daysOfWeek[weekday] === 1 && (sets.nthWeekday === 0 || Math.ceil(date / 7) === sets.nthWeekday)) ||
      (this.lastWeekdays[weekday] === 1 && date > length - 7)
    );
  }

  /** Seconds into the day of the first matching time at or after `second`, or -1. */
  private timeAtOrAfter(second: number): number {
    const hour = Math.floor(second / 3_600);
    const minute = Math.floor((second % 3_600) / 60);
    let h = this.hourNext[hour] ?? -1;
    if (h === hour) {
      let m = this.minuteNext[minute] ?? -1;
      if (m === minute) {
        const s = this.secondNext[second % 60] ?? -1;
        if (s >= 0) return hour * 3_600 + minute * 60 + s;
        m = this.minuteNext[minute + 1] ?? -1;
      }
      if (m >= 0) return hour * 3_600 + m * 60 + (this.secondNext[0] ?? 0);
      h = this.hourNext[hour + 1] ?? -1;
    }
    if (h < 0) return -1;
    return h * 3_600 + (this.minuteNext[0] ?? 0) * 60 + (this.secondNext[0] ?? 0);
  }

  /** Seconds into the day of the last matching time at or before `second`, or -1. */
  private timeAtOrBefore(second: number): number {
    const hour = Math.floor(second / 3_600);
    const minute = Math.floor((second % 3_600) / 60);
    let h = this.hourPrev[hour] ?? -1;
    if (h === hour) {
      let m = this.minutePrev[minute] ?? -1;
      if (m === minute) {
        const s = this.secondPrev[second % 60] ?? -1;
        if (s >= 0) return hour * 3_600 + minute * 60 + s;
        m = minute > 0 ? (this.minutePrev[minute - 1] ?? -1) : -1;
      }
      if (m >= 0) return hour * 3_600 + m * 60 + (this.secondPrev[59] ?? 0);
      h = hour > 0 ? (this.hourPrev[hour - 1] ?? -1) : -1;
    }
    if (h < 0) return -1;
    return h * 3_600 + (this.minutePrev[59] ?? 0) * 60 + (this.secondPrev[59] ?? 0);
  }
}

/** next[i] = smallest member >= i, prev[i] = largest member <= i, -1 when none; next has a sentinel at `size`. */
function lookups(values: readonly number[], size: number): [Int8Array, Int8Array] {
  const next = new Int8Array(size + 1).fill(-1);
  const prev = new Int8Array(size).fill(-1);
  const members = mask(values, size);
  for (let i = size - 1, found = -1; i >= 0; i--) next[i] = found = members[i] === 1 ? i : found;
  for (let i = 0, found = -1; i < size; i++) prev[i] = found = members[i] === 1 ? i : found;
  return [next, prev];
}

function mask(values: readonly number[], size: number): Uint8Array {
  const result = new Uint8Array(size);
  for (const value of values) result[value] = 1;
  return result;
}

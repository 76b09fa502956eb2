/**
 * Civil time for the slot calendar (src/schedule/slot-calendar.ts): proleptic
 * Gregorian dates from day numbers, and each zone's UTC offsets as per-year
 * transition tables built once from Intl, so the calendar's hot path never
 * formats a date.
 */

export const SECOND = 1_000;
export const DAY = 86_400_000;

/** Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm). */
export function civilFromDays(days: number): { year: number; month: number; date: number } {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1_460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const shifted = Math.floor((5 * dayOfYear + 2) / 153);
  const month = shifted < 10 ? shifted + 3 : shifted - 9;
  return {
    year: yearOfEra + era * 400 + (month <= 2 ? 1 : 0),
    month,
    date: dayOfYear - Math.floor((153 * shifted + 2) / 5) + 1,
  };
}

export function weekdayOf(days: number): number {
  return (((days + 4) % 7) + 7) % 7;
}

export function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

export interface Transition {
  /** First instant (epoch ms) on the new offset. */
  readonly at: number;
  /** Offsets (wall minus UTC, ms) before and after. */
  readonly before: number;
  readonly after: number;
}

interface ZoneYear {
  readonly start: number;
  readonly end: number;
  /** Offset in force just before `start`. */
  readonly initial: number;
  readonly transitions: readonly Transition[];
}

const zones = new Map<string, Zone>();

export function zoneFor(timezone: string): Zone {
  let zone = zones.get(timezone);
  if (!zone) {
    zone = new Zone(timezone);
    zones.set(timezone, zone);
  }
  return zone;
}

/**
 * A zone's UTC offsets as per-year transition tables, built once from Intl so
 * the hot path never formats a date.
 */
export class Zone {
  private readonly format: Intl.DateTimeFormat;
  private readonly years = new Map<number, ZoneYear>();
  private recent: ZoneYear | undefined;

  constructor(timezone: string) {
    this.format = new Intl.DateTimeFormat("en-US", {
      timeZone: timezone,
      hourCycle: "h23",
      era: "short",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
  }

  offsetAt(ms: number): number {
    const year = this.yearOf(ms);
    let offset = year.initial;
    for (const transition of year.transitions) {
      if (transition.at > ms) break;
      offset = transition.after;
    }
    return offset;
  }

  /** The first transition with from <= at <= to. */
  firstTransitionIn(from: number, to: number): Transition | null {
    if (to < from) return null;
    for (let year = this.yearOf(from); year.start <= to; year = this.yearOf(year.end)) {
      for (const transition of year.transitions) {
        if (transition.at > to) return null;
        if (transition.at >= from) return transition;
      }
    }
    return null;
  }

  /** The last transition with from <= at <= to. */
  lastTransitionIn(from: number, to: number): Transition | null {
    if (to < from) return null;
    for (let year = this.yearOf(to); year.end > from; year = this.yearOf(year.start - 1)) {
      for (let index = year.transitions.length - 1; index >= 0; index--) {
        const transition = year.transitions[index];
        if (!transition || transition.at > to) continue;
        return transition.at >= from ? transition : null;
      }
    }
    return null;
  }

  private yearOf(ms: number): ZoneYear {
    const recent = this.recent;
    if (recent && ms >= recent.start && ms < recent.end) return recent;
    const year = civilFromDays(Math.floor(ms / DAY)).year;
    let table = this.years.get(year);
    if (!table) {
      table = this.buildYear(year);
      this.years.set(year, table);
    }
    this.recent = table;
    return table;
  }

  /**
   * Samples the offset daily and bisects each change to the second; offset
   * changes that cancel out within a day are not seen (tzdb has none).
   */
  private buildYear(year: number): ZoneYear {
    const start = yearStart(year);
    const end = yearStart(year + 1);
    const initial = this.rawOffset(start - SECOND);
    const transitions: Transition[] = [];
    let previousAt = start - SECOND;
    let previousOffset = initial;
    for (let at = start; previousAt < end - SECOND; at = Math.min(at + DAY, end - SECOND)) {
      const offset = this.rawOffset(at);
      this.bisect(previousAt, previousOffset, at, offset, transitions);
      previousAt = at;
      previousOffset = offset;
    }
    return { start, end, initial, transitions };
  }

  private bisect(lowAt: number, lowOffset: number, highAt: number, highOffset: number, into: Transition[]): void {
    if (lowOffset === highOffset) return;
    let low = lowAt;
    let high = highAt;
    while (high - low > SECOND) {
      const middle = low + Math.floor((high - low) / (2 * SECOND)) * SECOND;
      if (this.rawOffset(middle) === lowOffset) low = middle;
      else high = middle;
    }
    const after = this.rawOffset(high);
    into.push({ at: high, before: lowOffset, after });
    this.bisect(high, after, highAt, highOffset, into);
  }

  private rawOffset(ms: number): number {
    const instant = Math.floor(ms / SECOND) * SECOND;
    const fields = { era: "", year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
    for (const part of this.format.formatToParts(instant)) {
      if (part.type === "era") fields.era = part.value;
      else if (part.type in fields) (fields as Record<string, unknown>)[part.type] = Number(part.value);
    }
    const wall = new Date(0);
    wall.setUTCFullYear(fields.era === "BC" ? 1 - fields.year : fields.year, fields.month - 1, fields.day);
    wall.setUTCHours(fields.hour, fields.minute, fields.second);
    return wall.getTime() - instant;
  }
}

function yearStart(year: number): number {
  return daysFromCivil(year) * DAY;
}

/** Days from 1970-01-01 to January 1st of `year`. */
function daysFromCivil(year: number): number {
  const y = year - 1;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + 306;
  return era * 146_097 + dayOfEra - 719_468;
}

import type { DynamicScheduleEntry } from "../schedule/schedules.js";
import { slotCalendar, type SlotCalendar } from "../schedule/slot-calendar.js";
import type { EntryRun } from "./health.js";
import { groupRuns, stripFloors, type RunReader } from "./runs.js";

/**
 * The run strips of one page of dynamic entries (`ledger.schedules`): the
 * same runs a static entry's strip shows (its last `limit` slots' jobs and
 * its last finished run, src/status/runs.ts), read for the page's keys only,
 * in one statement (entryRuns, src/db/sql/operators.ts) once the page is
 * known. Never for every stored entry: a strip per entry of a million is
 * the 200,000-rows-at-10,000-entries cost docs/benchmarks.md measured at
 * 3.1-4.6 s ("Status, Schedule page and /metrics at scale"), a million
 * times 20 rows here. By ledger key; none for an empty page.
 */
export async function dynamicStrips(reader: RunReader, entries: readonly DynamicScheduleEntry[], limit: number, nowMs: number): Promise<Map<string, EntryRun[]>> {
  const readable = entries.flatMap((entry) => {
    const calendar = calendarOf(entry);
    return calendar === null ? [] : [{ ledgerKey: entry.ledgerKey, calendar, jitterMs: entry.jitterMs }];
  });
  if (readable.length === 0 || limit < 1) return new Map();
  const keys = readable.map((entry) => entry.ledgerKey);
  const rows = await reader.entryRuns(keys, limit, stripFloors(keys, readable, limit, nowMs));
  return groupRuns(rows, readable, nowMs);
}

/**
 * Calendars by cron and zone, kept across requests: building one measured about 1 ms here (50 of them 37-150 ms on the
 * shared 2-core VM, 2026-12-06), most of a page's strip cost, and a page refreshes every 15 s with the same entries,
 * which often share a cron. Bounded: emptied when full.
 */
const calendars = new Map<string, SlotCalendar | null>();
const CALENDAR_CACHE_LIMIT = 1_000;

/** The entry's calendar, from its stored canonical cron and zone (validated when it was upserted); null if it no longer parses. */
function calendarOf(entry: DynamicScheduleEntry): SlotCalendar | null {
  const key = `${entry.cron}|${entry.timezone}`;
  const cached = calendars.get(key);
  if (cached !== undefined) return cached;
  let calendar: SlotCalendar | null;
  try {
    calendar = slotCalendar(entry.cron, { timezone: entry.timezone });
  } catch {
    // A zone the runtime's tz data dropped since the upsert: the row is listed without a strip rather than failing the page.
    calendar = null;
  }
  if (calendars.size >= CALENDAR_CACHE_LIMIT) calendars.clear();
  calendars.set(key, calendar);
  return calendar;
}

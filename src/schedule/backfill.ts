import type { Executor } from "../db/executor.js";
import { backfillSlots, type BackfillRow } from "../db/sql/backfill.js";
import { BackfillTooLargeError, InvalidArgumentError } from "../errors.js";
import type { Tracing } from "../tracing.js";
import { DAY, zoneFor } from "./civil-time.js";
import { backfillIdempotencyKey } from "./identity.js";
import { slotCalendar } from "./slot-calendar.js";
import type { ResolvedEntry } from "./validate.js";

/**
 * An operator's backfill of one entry's missed slots (after an outage
 * longer than its catch-up window, say): the slots of a range, from the
 * same slot calendar as the ticker, with notes where DST shifted or
 * repeated a wall time; the statement that enqueues them is
 * src/db/sql/backfill.ts. Temporal Schedules' backfill is the model: the
 * operator names a range, every slot in it runs once, and slots that
 * already ran are not run again.
 */

/** Slots a backfill may cover without `force`: an hour of a per-second entry would be 3,600 jobs, a week of a per-10-minutes one is 1,008. */
export const BACKFILL_CAP = 1_000;
/** Slots a backfill may cover even with `force`: one statement, planned in memory. Split larger ranges. */
export const BACKFILL_LIMIT = 100_000;

export interface BackfillOptions {
  /** First instant of the range (inclusive): a Date, epoch ms, or an ISO string with its offset or `Z`. */
  readonly from: Date | number | string;
  /** Last instant of the range (inclusive). */
  readonly to: Date | number | string;
  /** List the slots and what would become of each; write nothing. */
  readonly dryRun?: boolean;
  /** At most this many slots: the earliest ones, or the latest with `latest`. */
  readonly max?: number;
  /** Take the latest slots of the range (`max` of them, 1 when `max` is not given). */
  readonly latest?: boolean;
  /** Allow more than BACKFILL_CAP slots (up to BACKFILL_LIMIT). */
  readonly force?: boolean;
}

/** What became of one slot. */
export interface BackfilledSlot {
  readonly slot: Date;
  /** The slot's wall time in the entry's zone, with its offset: `2026-03-08 03:30 UTC-04:00`. */
  readonly wallTime: string;
  /** A shifted or repeated wall time (DST); null for an ordinary slot. */
  readonly dstNote: string | null;
  /** `enqueued` / `would_enqueue` (dry run), `exists` (it has a job already), `ahead` (after the ledger: the ticker's). */
  readonly outcome: BackfillRow["outcome"];
  readonly jobId: number | null;
}

export interface BackfillResult {
  /** The entry's ledger key (the status's `key`, the jobs' `schedule_key`). */
  readonly key: string;
  readonly entryKey: string | null;
  readonly jobName: string;
  readonly from: Date;
  readonly to: Date;
  readonly dryRun: boolean;
  /** The entry's ledger value the statement read: slots after it are the ticker's. Null: no pass has seen the entry yet. */
  readonly ledgerAt: Date | null;
  readonly slots: readonly BackfilledSlot[];
  /** Slots of the range left out by `max` / `latest`. */
  readonly omitted: number;
  readonly enqueued: number;
  readonly existing: number;
  readonly ahead: number;
}

function instant(value: Date | number | string, option: "from" | "to"): number {
  if (typeof value === "string" && !/(Z|[+-]\d\d:?\d\d)$/i.test(value.trim())) {
    throw new InvalidArgumentError(`${option} must be an instant with its offset or Z (2026-05-01T09:00:00Z), so it means the same everywhere (got ${JSON.stringify(value)}).`);
  }
  const ms = value instanceof Date ? value.getTime() : typeof value === "number" ? value : Date.parse(value);
  if (!Number.isFinite(ms)) throw new InvalidArgumentError(`${option} is not a valid instant (got ${JSON.stringify(String(value))}).`);
  return ms;
}

/** The slots of [fromMs, toMs] that a backfill covers, oldest first, and how many of the range's slots it leaves out. */
export function planBackfill(entry: ResolvedEntry, fromMs: number, toMs: number, options: Pick<BackfillOptions, "max" | "latest" | "force"> = {}): { slots: number[]; omitted: number } {
  if (toMs < fromMs) throw new InvalidArgumentError("to must not be before from.");
  const { max, latest = false, force = false } = options;
  if (max !== undefined && (!Number.isInteger(max) || max < 1)) throw new InvalidArgumentError(`max must be a positive integer (got ${String(max)}).`);
  const limit = force ? BACKFILL_LIMIT : BACKFILL_CAP;
  const want = max ?? (latest ? 1 : undefined);
  if (want !== undefined && want > limit) throw tooLarge(want, force);
  const slots: number[] = [];
  if (latest) {
    // Walked backwards from the end, so the latest few of a huge range cost only themselves.
    for (let slot = entry.calendar.latestMs(toMs); slot !== null && slot >= fromMs && slots.length < (want ?? 1); slot = entry.calendar.latestMs(slot - 1)) slots.push(slot);
    slots.reverse();
  } else {
    const bound = want ?? limit + 1;
    for (let slot = entry.calendar.nextMs(fromMs - 1); slot !== null && slot <= toMs && slots.length < bound; slot = entry.calendar.nextMs(slot)) slots.push(slot);
    if (want === undefined && slots.length > limit) throw tooLarge(slots.length, force);
  }
  return { slots, omitted: want === undefined ? 0 : countRange(entry, fromMs, toMs, BACKFILL_LIMIT) - slots.length };
}

/** The range's slots, counted up to `limit` (BACKFILL_LIMIT: beyond it the count stops mattering). */
function countRange(entry: ResolvedEntry, fromMs: number, toMs: number, limit: number): number {
  let n = 0;
  for (let slot = entry.calendar.nextMs(fromMs - 1); slot !== null && slot <= toMs && n <= limit; slot = entry.calendar.nextMs(slot)) n += 1;
  return n;
}

function tooLarge(slots: number, force: boolean): BackfillTooLargeError {
  return new BackfillTooLargeError({ slots, limit: force ? BACKFILL_LIMIT : BACKFILL_CAP, forced: force });
}

function offsetText(offsetMs: number): string {
  const sign = offsetMs < 0 ? "-" : "+";
  const minutes = Math.abs(offsetMs) / 60_000;
  return `UTC${sign}${String(Math.floor(minutes / 60)).padStart(2, "0")}:${String(minutes % 60).padStart(2, "0")}`;
}

function wallText(wallMs: number): string {
  return new Date(wallMs).toISOString().slice(0, 16).replace("T", " ");
}

/** A slot as its wall time in the entry's zone and, where DST shaped it, why it is where it is. */
export function describeSlot(entry: ResolvedEntry, slotMs: number, utcCalendar = slotCalendar(entry.cron)): { wallTime: string; dstNote: string | null } {
  const zone = entry.timezone === "UTC" || entry.timezone === "Etc/UTC" ? null : zoneFor(entry.timezone);
  const offset = zone?.offsetAt(slotMs) ?? 0;
  const wallTime = `${wallText(slotMs + offset)} ${offsetText(offset)}`;
  const transition = zone?.firstTransitionIn(slotMs - DAY, slotMs + DAY) ?? null;
  if (transition === null) return { wallTime, dstNote: null };
  const jump = transition.after - transition.before;
  if (jump > 0 && slotMs >= transition.at && slotMs < transition.at + jump && utcCalendar.latestMs(slotMs + offset) !== slotMs + offset) {
    // The cron's wall time fell in the spring-forward gap; the calendar fired it shifted by the gap.
    return { wallTime, dstNote: `shifted: ${wallText(slotMs + offset - jump)} did not exist (DST gap), so this slot fires at ${wallText(slotMs + offset)}` };
  }
  if (jump < 0 && slotMs >= transition.at + jump && slotMs < transition.at + -jump) {
    const first = slotMs < transition.at;
    const rest = entry.cron.wildcardHour ? "both occurrences are slots" : "the second occurrence is not a slot";
    return { wallTime, dstNote: `repeated wall time ${wallText(slotMs + offset)} (DST fall-back): its ${first ? "first" : "second"} occurrence; ${rest}` };
  }
  return { wallTime, dstNote: null };
}

/** Plans and runs (or, dry, lists) a backfill of `entry` in one statement. */
export async function runBackfill(executor: Executor, namespace: string, entry: ResolvedEntry, options: BackfillOptions, tracing?: Tracing): Promise<BackfillResult> {
  const fromMs = instant(options.from, "from");
  const toMs = instant(options.to, "to");
  const { slots, omitted } = planBackfill(entry, fromMs, toMs, options);
  const dryRun = options.dryRun ?? false;
  const input = {
    ledgerKey: entry.ledgerKey,
    jobName: entry.jobName,
    queue: entry.queue,
    payloadJson: entry.payloadJson,
    priority: entry.priority,
    maxAttempts: entry.maxAttempts ?? entry.job.retry.maxAttempts,
    slots: slots.map((slotMs) => ({ slotMs, idempotencyKey: backfillIdempotencyKey(namespace, entry.identity, slotMs) })),
    dryRun,
  };
  // With tracing, a backfill that writes is one producer span; its context is stored with every job it makes.
  const write = (traceContextJson: string | null) => backfillSlots(executor, { ...input, traceContextJson });
  const rows =
    slots.length === 0
      ? []
      : tracing === undefined || dryRun
        ? await write(null)
        : await tracing.send(
            { operation: "backfill", jobs: slots.map(() => entry), scheduleKey: entry.ledgerKey },
            write,
            (made) => made.flatMap((row) => (row.outcome === "enqueued" && row.job_id !== null ? [{ id: row.job_id, created: true }] : [])),
          );
  const utc = slotCalendar(entry.cron);
  const described = rows.map((row) => ({ slot: new Date(row.slot_ms), ...describeSlot(entry, row.slot_ms, utc), outcome: row.outcome, jobId: row.job_id }));
  const ledgerMs = rows[0]?.ledger_ms ?? null;
  const count = (...outcomes: BackfillRow["outcome"][]) => described.filter((slot) => outcomes.includes(slot.outcome)).length;
  return {
    key: entry.ledgerKey,
    entryKey: entry.entryKey ?? null,
    jobName: entry.jobName,
    from: new Date(fromMs),
    to: new Date(toMs),
    dryRun,
    ledgerAt: ledgerMs === null ? null : new Date(ledgerMs),
    slots: described,
    omitted,
    enqueued: count("enqueued", "would_enqueue"),
    existing: count("exists"),
    ahead: count("ahead"),
  };
}

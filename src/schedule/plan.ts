import { jitterMs } from "./jitter.js";
import type { ResolvedEntry } from "./validate.js";

/**
 * The pure half of a scheduler pass: which entries it must look at and which
 * of their slots can be due, decided from what the process remembers and an
 * estimate of the database clock, with no I/O. The statement that follows
 * (src/db/sql/ledger.ts, run by src/schedule/tick.ts) picks among these
 * candidates by the clock it actually reads.
 */

/**
 * What this process last saw of each entry: its ledger value and the fire
 * time of the first slot after it. Ledger values only move forward, so an
 * entry whose memoized next fire is still ahead cannot be due: an idle pass
 * reads no ledger rows and does no cron arithmetic.
 */
export type FireMemo = Map<string, { readonly ledgerMs: number; readonly nextFireMs: number }>;

/**
 * How far the database clock may be from this process's estimate of it when
 * a pass plans its candidate slots; beyond it, the pass plans again at the
 * clock it read (a second statement, after a clock jump or a long stall).
 */
export const CLOCK_MARGIN_MS = 2_000;

/** When a slot fires: the slot plus the entry's deterministic jitter for it. */
export function fireTime(entry: Pick<ResolvedEntry, "identity" | "jitterMs">, slotMs: number): number {
  return entry.jitterMs > 0 ? slotMs + jitterMs(entry.identity, slotMs, entry.jitterMs) : slotMs;
}

/** Fire time of the first slot after `ledgerMs`, or Infinity for an entry that never fires again. */
export function nextFireAfter(entry: ResolvedEntry, ledgerMs: number): number {
  const next = entry.calendar.nextMs(ledgerMs);
  return next === null ? Number.POSITIVE_INFINITY : fireTime(entry, next);
}

/**
 * What one statement of a pass covers: the entries it reads, and the span
 * the database clock must read within for their candidate slots to hold.
 */
export interface Plan {
  readonly lowMs: number;
  readonly highMs: number;
  /** The fixed instant of `tick({ now })`; null means the database clock. */
  readonly exactMs: number | null;
  readonly entries: readonly ResolvedEntry[];
}

export interface PlanInput {
  readonly entries: readonly ResolvedEntry[];
  readonly memo: FireMemo;
  /** Entries sitting out a quarantine, with the instant it ends. */
  readonly deferredUntil: ReadonlyMap<string, number>;
  /** `tick({ now })`; null for the database clock. */
  readonly exactMs: number | null;
  /** The best estimate of the database clock: the host clock plus the offset last measured, or a clock just read. */
  readonly estimateMs: number;
  /**
   * The earliest fire time over every entry, as the last pass left it
   * (earliestFire), when nothing has changed since: a span that ends before
   * it plans nothing without looking at each entry.
   */
  readonly horizonMs?: number | undefined;
}

/**
 * Entries the pass must look at: unknown ones, and those whose memoized next
 * fire may have come by the end of the span. Quarantined entries sit out
 * until their deferral ends.
 */
export function planPass(input: PlanInput): Plan {
  const marginMs = input.exactMs === null ? CLOCK_MARGIN_MS : 0;
  const estimateMs = input.exactMs ?? input.estimateMs;
  const highMs = estimateMs + marginMs;
  // At 100,000 entries, looking at each entry (two map lookups) cost more than the idle pass's statement.
  if (input.horizonMs !== undefined && highMs < input.horizonMs) return { lowMs: estimateMs - marginMs, highMs, exactMs: input.exactMs, entries: [] };
  const entries = input.entries.filter((entry) => {
    const deferredUntil = input.deferredUntil.get(entry.ledgerKey);
    if (deferredUntil !== undefined && estimateMs < deferredUntil) return false;
    const seen = input.memo.get(entry.ledgerKey);
    return seen === undefined || seen.nextFireMs <= highMs;
  });
  return { lowMs: estimateMs - marginMs, highMs, exactMs: input.exactMs, entries };
}

/** The instant a plan expects the clock at: its fixed instant, or the middle of its span. */
export function planInstant(plan: Plan): number {
  return plan.exactMs ?? (plan.lowMs + plan.highMs) / 2;
}

/**
 * The slots that can be the entry's due slot while the clock reads anywhere
 * in [low, high]: the latest whose fire time is at or before `low`, and
 * every later one whose fire time is at or before `high`. The statement
 * picks the latest of them whose fire time has come by the clock it reads;
 * with `tick({ now })` the span is one instant and one slot.
 */
export function candidateSlots(entry: ResolvedEntry, lowMs: number, highMs: number): number[] {
  const slots: number[] = [];
  let first = entry.calendar.latestMs(lowMs);
  // Jitter can put a slot's fire time after `low` although the slot itself is before it.
  if (first !== null && fireTime(entry, first) > lowMs) first = entry.calendar.latestMs(first - 1);
  if (first !== null) slots.push(first);
  for (let cursor = first ?? lowMs - entry.jitterMs - 1; ; ) {
    const next = entry.calendar.nextMs(cursor);
    if (next === null || fireTime(entry, next) > highMs) break;
    slots.push(next);
    cursor = next;
  }
  return slots;
}

/** The slot a plan expects to be due for `entry` (the latest candidate whose fire time has come by the plan's instant). */
export function expectedDueSlot(entry: ResolvedEntry, plan: Plan): number {
  const at = planInstant(plan);
  return candidateSlots(entry, plan.lowMs, plan.highMs).filter((slotMs) => fireTime(entry, slotMs) <= at).at(-1) ?? at;
}

/**
 * Earliest upcoming fire time over the entries the process remembers (an
 * entry in quarantine counts from the end of its deferral) and `upcomingMs`
 * (slots seen in lost races); null when nothing will fire.
 */
export function nextFireAt(input: Pick<PlanInput, "entries" | "memo" | "deferredUntil">, upcomingMs: number): number | null {
  const earliest = Math.min(earliestFire(input).earliestMs, upcomingMs);
  return Number.isFinite(earliest) ? earliest : null;
}

/**
 * The earliest fire time over the entries the process remembers (an entry in
 * quarantine counting from the end of its deferral), and whether it
 * remembers every entry: only then is it a horizon no entry can be due
 * before (an entry without a memo must be planned by every pass).
 */
export function earliestFire(input: Pick<PlanInput, "entries" | "memo" | "deferredUntil">): { earliestMs: number; complete: boolean } {
  let earliestMs = Number.POSITIVE_INFINITY;
  let known = 0;
  for (const entry of input.entries) {
    const seen = input.memo.get(entry.ledgerKey);
    if (seen === undefined) continue;
    known += 1;
    const deferredUntil = input.deferredUntil.get(entry.ledgerKey) ?? Number.NEGATIVE_INFINITY;
    earliestMs = Math.min(earliestMs, Math.max(seen.nextFireMs, deferredUntil));
  }
  return { earliestMs, complete: known === input.entries.length };
}

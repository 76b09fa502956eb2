import { quarantineEntry } from "../db/sql/ledger.js";
import { rootMessage } from "../db/transient.js";
import { redact } from "../redact.js";
import { expectedDueSlot, planInstant, type Plan } from "./plan.js";
import { outcome, type PassResult, type TickContext } from "./pass.js";
import type { ResolvedEntry } from "./validate.js";

/**
 * The entries a pass leaves for later, and why: quarantined (their own
 * statement failed; the deferral is kept in their ledger row, so every
 * replica honours it) and locked (another session holds their ledger row).
 * Both stay due; src/schedule/tick.ts decides when, these record it.
 */

/** How long a quarantined entry stays out of the pass before it is tried again. */
export const QUARANTINE_DEFERRAL_MS = 60_000;
/** A row found locked is waited for this long (once per lock), in a second statement, before its entry is reported as locked. */
export const LOCK_WAIT_MS = 1_000;
/** A due entry whose row stays locked is tried again this much later. */
export const LOCKED_RETRY_MS = 1_000;
/** A row still locked on a later pass is logged as a warning, at most this often per entry. */
const LOCKED_WARNING_INTERVAL_MS = 60_000;

/** A due entry whose row another session held locked, and the slot it was due for. */
export interface LockedEntry {
  readonly entry: ResolvedEntry;
  readonly slotMs: number;
}

/**
 * A due entry whose row another session has held for longer than
 * LOCK_WAIT_MS: reported, logged (at most once a minute per entry while the
 * lock lasts) and left out of passes for LOCKED_RETRY_MS; later passes skip
 * it without waiting until the lock goes. It stays due, and fires once on
 * the first pass after the lock is released.
 */
export function lockedRow(context: TickContext, held: LockedEntry, nowMs: number, into: PassResult, upcoming: { ms: number }): void {
  const { memory, logger } = context;
  const { entry } = held;
  into.locked.push(outcome(entry, held.slotMs));
  memory.deferred.set(entry.ledgerKey, nowMs + LOCKED_RETRY_MS);
  upcoming.ms = Math.min(upcoming.ms, nowMs + LOCKED_RETRY_MS);
  let seen = memory.locked.get(entry.ledgerKey);
  if (seen === undefined) {
    seen = { sinceMs: nowMs, warnedAtMs: undefined };
    memory.locked.set(entry.ledgerKey, seen);
  }
  if (seen.warnedAtMs !== undefined && nowMs - seen.warnedAtMs < LOCKED_WARNING_INTERVAL_MS) return;
  seen.warnedAtMs = nowMs;
  logger.warn("ledger row is held locked by another session (an open transaction?); its entry is skipped until the lock goes, the other entries still fire", {
    job: entry.jobName,
    identity: entry.identity,
    key: entry.ledgerKey,
    lockedSince: new Date(seen.sinceMs).toISOString(),
  });
}

/**
 * Quarantines an entry whose statement failed: its ledger row records until
 * when (QUARANTINE_DEFERRAL_MS later), why and how many times, so every
 * replica defers it to the same instant and every admin shows it; this
 * process caches the instant. If even that write fails, the deferral is
 * only this process's.
 */
export async function quarantine(context: TickContext, plan: Plan, entry: ResolvedEntry, error: unknown, into: PassResult): Promise<void> {
  const reason = redact(rootMessage(error));
  const slot = expectedDueSlot(entry, plan);
  let stored: { until_ms: number; count: number } | undefined;
  try {
    stored = await quarantineEntry(context.executor, {
      namespace: context.namespace,
      key: entry.ledgerKey,
      jobName: entry.jobName,
      exactNow: plan.exactMs === null ? null : new Date(plan.exactMs),
      knownLedgerMs: context.memory.memo.get(entry.ledgerKey)?.ledgerMs ?? null,
      deferralMs: QUARANTINE_DEFERRAL_MS,
      reason: redact(`slot ${new Date(slot).toISOString()} could not be enqueued (phase enqueue): ${rootMessage(error)}`),
    });
  } catch (writeError) {
    context.logger.warn("could not record the quarantine in the ledger; deferring the entry in this process only", { identity: entry.identity, error: redact(rootMessage(writeError)) });
  }
  const untilMs = stored?.until_ms ?? planInstant(plan) + QUARANTINE_DEFERRAL_MS;
  const quarantined = { ...outcome(entry, slot), phase: "enqueue" as const, error: reason, until: new Date(untilMs), count: stored?.count ?? 1 };
  context.logger.error("schedule entry quarantined: its slot is deferred to a later pass", {
    job: entry.jobName,
    identity: entry.identity,
    phase: quarantined.phase,
    slot: quarantined.slot.toISOString(),
    until: quarantined.until.toISOString(),
    failures: quarantined.count,
    error: quarantined.error,
  });
  into.quarantined.push(quarantined);
  context.memory.deferred.set(entry.ledgerKey, untilMs);
}

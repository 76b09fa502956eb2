import { quarantineEntry } from "../db/sql/ledger-rows.js";
import { rootMessage } from "../db/transient.js";
import { hasStatementConflict, isCancelled, isLockTimeout } from "../error-chain.js";
import { redact } from "../redact.js";
import { expectedDueSlot, planInstant } from "./plan.js";
import { outcome, type Findings, type Pass } from "./pass.js";
import type { ResolvedEntry } from "./validate.js";

/**
 * The entries a pass leaves for later, and why: set aside (their own
 * statement failed for a reason a retry can fix; retried alone with a
 * backoff), quarantined (their own statement failed for good, or a fourth
 * time; the deferral is kept in their ledger row, so every replica honours
 * it) and locked (another session holds their ledger row). All stay due;
 * src/schedule/tick.ts decides when; these record it in the pass's memory
 * and return what the pass reports (Findings).
 */

/** How long a quarantined entry stays out of the pass before it is tried again. */
export const QUARANTINE_DEFERRAL_MS = 60_000;
/** A row found locked is waited for this long (once per lock), in a second statement, before its entry is reported as locked. */
export const LOCK_WAIT_MS = 1_000;
/**
 * How long the pass's statement waits for any lock other than its ledger rows'
 * (its job insert's: an application trigger's row lock, an idempotency key
 * another transaction is inserting) before it fails with 55P03 and its entries
 * are tried in parts to find the one that waits (src/schedule/tick.ts).
 */
export const OTHER_LOCK_WAIT_MS = 500;
/** An entry set aside is retried alone this many times (after 1, 3 and 9 s) before it is quarantined. */
export const SET_ASIDE_RETRIES = 3;
const setAsideDelayMs = (failures: number) => 1_000 * 3 ** (failures - 1);
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
export function lockedRow(pass: Pass, held: LockedEntry, nowMs: number): Findings {
  const { memory, context } = pass;
  const { logger } = context;
  const { entry } = held;
  const found = { locked: [outcome(entry, held.slotMs)], upcomingMs: nowMs + LOCKED_RETRY_MS };
  memory.deferred.set(entry.ledgerKey, nowMs + LOCKED_RETRY_MS);
  let seen = memory.locked.get(entry.ledgerKey);
  if (seen === undefined) {
    seen = { sinceMs: nowMs, warnedAtMs: undefined };
    memory.locked.set(entry.ledgerKey, seen);
  }
  if (seen.warnedAtMs !== undefined && nowMs - seen.warnedAtMs < LOCKED_WARNING_INTERVAL_MS) return found;
  seen.warnedAtMs = nowMs;
  logger.warn("ledger row is held locked by another session (an open transaction?); its entry is skipped until the lock goes, the other entries still fire", {
    job: entry.jobName,
    identity: entry.identity,
    // Not `key`: a field of that name is redacted as a secret, and the runbook asks for this one.
    ledgerKey: entry.ledgerKey,
    lockedSince: new Date(seen.sinceMs).toISOString(),
  });
  return found;
}

/**
 * A failure a retry can fix, yet one entry's alone (its statement failed with
 * it and succeeded without it): a serialization failure or deadlock (40001,
 * 40P01, e.g. raised by an application trigger), a lock wait past its bound
 * (55P03) or a statement cancelled by the pass timeout (57014).
 */
export function isRetryableEntryFailure(error: unknown): boolean {
  return hasStatementConflict(error) || isLockTimeout(error) || isCancelled(error);
}

/**
 * An entry whose own statement failed, found by src/schedule/tick.ts's
 * isolation while every other due entry fired. A failure a retry can fix
 * sets it aside: left out of passes for 1, 3, then 9 s and then run alone in
 * its own statement (TickMemory.suspects), so it never holds up the others;
 * the fourth failure in a row, or any failure a retry cannot fix, quarantines
 * it with the entry named in the reason. A claim of one of its slots clears both.
 */
export async function setAside(pass: Pass, entry: ResolvedEntry, error: unknown): Promise<Findings> {
  const { memory, plan } = pass;
  const failures = (memory.suspects.get(entry.ledgerKey)?.failures ?? 0) + 1;
  memory.suspects.set(entry.ledgerKey, { failures });
  if (!isRetryableEntryFailure(error) || failures > SET_ASIDE_RETRIES) return quarantine(pass, entry, error);
  const retryAtMs = planInstant(plan) + setAsideDelayMs(failures);
  memory.deferred.set(entry.ledgerKey, retryAtMs);
  const slot = expectedDueSlot(entry, plan);
  const set = { ...outcome(entry, slot), error: redact(rootMessage(error)), retryAt: new Date(retryAtMs), failures };
  pass.context.logger.warn("schedule entry set aside: its own statement failed with a retryable error; the other entries fired, it is retried alone", {
    job: entry.jobName,
    identity: entry.identity,
    ledgerKey: entry.ledgerKey,
    slot: set.slot.toISOString(),
    retryAt: set.retryAt.toISOString(),
    failures,
    error: set.error,
  });
  return { setAside: [set], upcomingMs: retryAtMs };
}

/**
 * Quarantines an entry whose statement failed: its ledger row records until
 * when (QUARANTINE_DEFERRAL_MS later), why and how many times, so every
 * replica defers it to the same instant and every admin shows it; this
 * process caches the instant. If even that write fails, the deferral is
 * only this process's.
 */
export async function quarantine(pass: Pass, entry: ResolvedEntry, error: unknown): Promise<Findings> {
  const { context, plan } = pass;
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
      reason: redact(`entry ${entry.identity}: slot ${new Date(slot).toISOString()} could not be enqueued (phase enqueue): ${rootMessage(error)}`),
    });
  } catch (writeError) {
    context.logger.warn("could not record the quarantine in the ledger; deferring the entry in this process only", { identity: entry.identity, error: redact(rootMessage(writeError)) });
  }
  const untilMs = stored?.until_ms ?? planInstant(plan) + QUARANTINE_DEFERRAL_MS;
  const quarantined = { ...outcome(entry, slot), phase: "enqueue" as const, error: reason, until: new Date(untilMs), count: stored?.count ?? 1 };
  context.logger.error("schedule entry quarantined: its slot is deferred to a later pass", {
    job: entry.jobName,
    identity: entry.identity,
    ledgerKey: entry.ledgerKey,
    phase: quarantined.phase,
    slot: quarantined.slot.toISOString(),
    until: quarantined.until.toISOString(),
    failures: quarantined.count,
    error: quarantined.error,
  });
  context.memory.deferred.set(entry.ledgerKey, untilMs);
  context.memory.quarantined.add(entry.ledgerKey);
  return { quarantined: [quarantined] };
}

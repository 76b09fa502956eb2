// One scheduler pass over the ledger. Longer than most files because the pass and its failure
// handling belong together: the transient-error retry, the lock-skip-then-wait, the entry-by-entry
// isolation that quarantines one bad entry, and turning the statement's rows into outcomes.
// Planning (which entries, which slots) is pure and lives in src/schedule/plan.ts.
import { diagnoseDatabaseError } from "../db/diagnose.js";
import { isConnectionLoss } from "../db/health.js";
import { runPass, type PassRow } from "../db/sql/ledger.js";
import { isTransientDatabaseError, rootMessage } from "../db/transient.js";
import { Backoff } from "../backoff.js";
import { isCancelled, isLockTimeout } from "../error-chain.js";
import { TickError, type TickPhase } from "../errors.js";
import { redact } from "../redact.js";
import type { SkipReason, TickReport } from "../events.js";
import { LOCK_WAIT_MS, lockedRow, quarantine, type LockedEntry } from "./deferrals.js";
import { slotIdempotencyKey } from "./identity.js";
import { emptyResult, outcome, type PassResult, type TickContext, type TickOptions } from "./pass.js";
import { candidateSlots, earliestFire, expectedDueSlot, fireTime, nextFireAfter, planInstant, planPass, type Plan } from "./plan.js";
import type { ResolvedEntry } from "./validate.js";

/** Ledger values further in the future than this are corrupt, not clock skew. */
export const FUTURE_LEDGER_TOLERANCE_MS = 5 * 60_000;
export const TICK_RETRIES = 3;
/** Waits before the retries of a pass that hit a transient error: 100, 300, 900 ms. */
const retryBackoff = () => new Backoff({ initialMs: 100, factor: 3, maxMs: 900 });

/** An error tagged with the phase (and entry) of the pass it came from. */
class PhaseError extends Error {
  constructor(
    readonly phase: TickPhase,
    readonly entry: string | undefined,
    readonly original: unknown,
  ) {
    super(rootMessage(original));
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * One scheduler pass. Transient database errors retry the whole pass: every
 * write is guarded by the ledger value it read, so a retry after an
 * unacknowledged commit finds the slot already claimed and adds nothing.
 */
export async function runTick(context: TickContext, options: TickOptions = {}): Promise<TickReport> {
  const statementsBefore = context.statements.count;
  const backoff = retryBackoff();
  for (let attempt = 1; ; attempt += 1) {
    try {
      const report = await tickOnce(context, options);
      return { ...report, statements: context.statements.count - statementsBefore, attempts: attempt };
    } catch (error) {
      const phaseError = error instanceof PhaseError ? error : new PhaseError("pass", undefined, error);
      if (isCancelled(phaseError.original)) {
        // Not retried here: a statement stuck behind a lock would only be stuck again. The next pass tries.
        const limit = context.passTimeoutMs === undefined ? "its time limit" : `its timeout (passTimeout, ${context.passTimeoutMs} ms)`;
        throw new TickError(
          phaseError.phase,
          phaseError.entry,
          phaseError.original,
          attempt,
          `the statement ran longer than ${limit} and was cancelled (transient: a lock held elsewhere, or an overloaded server)`,
        );
      }
      if (!isTransientDatabaseError(phaseError.original) || attempt > TICK_RETRIES) {
        throw new TickError(phaseError.phase, phaseError.entry, phaseError.original, attempt, phaseError.message);
      }
      // A lost database is logged once by whoever runs the ticks (src/db/health.ts); anything else here.
      const log = isConnectionLoss(phaseError.original) ? context.logger.debug : context.logger.warn;
      log.call(context.logger, "tick hit a transient database error; retrying", { phase: phaseError.phase, attempt, error: redact(phaseError.message) });
      await sleep(backoff.next());
    }
  }
}

async function tickOnce(context: TickContext, options: TickOptions): Promise<Omit<TickReport, "statements" | "attempts">> {
  const { memory } = context;
  const result = emptyResult();
  const upcoming = { ms: Number.POSITIVE_INFINITY };
  const exactMs = options.now?.getTime() ?? null;
  const horizon = memory.horizon?.entries === context.entries ? memory.horizon : undefined;
  const plan = (estimateMs: number, horizonMs?: number) =>
    planPass({ entries: context.entries, memo: memory.memo, deferredUntil: memory.deferred, exactMs, estimateMs, horizonMs });
  let current = plan(Date.now() + (memory.clockOffsetMs ?? 0), horizon?.earliestMs);
  let planned = current.entries.length;
  let nowMs = await runPlan(context, current, result, upcoming);
  if (nowMs < current.lowMs || nowMs > current.highMs) {
    // The database clock was not where this process expected: plan again at the clock it read, looking at every entry.
    current = plan(nowMs);
    planned += current.entries.length;
    nowMs = await runPlan(context, current, result, upcoming);
  }
  for (const [key, until] of memory.deferred) if (until <= nowMs) memory.deferred.delete(key);
  // A pass that looked at no entry changed nothing: the horizon holds, and the earliest fire needs no look at each entry either.
  const earliest = planned === 0 && horizon !== undefined ? { earliestMs: horizon.earliestMs, complete: true } : earliestFire({ entries: context.entries, memo: memory.memo, deferredUntil: memory.deferred });
  memory.horizon = earliest.complete ? { entries: context.entries, earliestMs: earliest.earliestMs } : undefined;
  const next = Math.min(earliest.earliestMs, upcoming.ms);
  return { now: new Date(nowMs), ...result, nextFireAt: Number.isFinite(next) ? new Date(next) : null };
}

/**
 * The plan's statement, which skips rows other sessions hold locked; then,
 * for rows found locked that were not locked at the last pass, a second
 * statement that waits for them up to LOCK_WAIT_MS. A row's lock usually
 * belongs to another replica's pass in flight, which commits within
 * milliseconds: waiting for it gives the answer the race deserves (lost, or
 * this replica's claim if the other one lost too). A lock that outlasts the
 * wait is someone else's (an open transaction): the entry is reported as
 * locked and skipped until the lock goes, while every other entry has fired
 * in the first statement.
 */
async function runPlan(context: TickContext, plan: Plan, into: PassResult, upcoming: { ms: number }): Promise<number> {
  const { memory } = context;
  const first = await runEntries(context, plan, plan.entries, into, upcoming, null);
  const fresh = first.locked.filter(({ entry }) => !memory.locked.has(entry.ledgerKey));
  for (const held of first.locked) if (memory.locked.has(held.entry.ledgerKey)) lockedRow(context, held, first.nowMs, into, upcoming);
  if (fresh.length === 0) return first.nowMs;
  const second = await runEntries(
    context,
    plan,
    fresh.map(({ entry }) => entry),
    into,
    upcoming,
    LOCK_WAIT_MS,
  );
  for (const held of second.locked) lockedRow(context, held, second.nowMs, into, upcoming);
  return second.nowMs;
}

/**
 * `entries` in one statement; if that fails for a reason other than the
 * connection, entry by entry, so one bad entry cannot stop the others. Each
 * statement is its own transaction: no BEGIN/COMMIT around it, because
 * postgres.js 3.4.9 crashes the process (an uncaught TypeError, porsager/postgres#1208)
 * when a connection drops inside `begin()`, as it does when PostgreSQL
 * restarts. A statement whose client dies while it runs is aborted by the
 * server (`client_connection_check_interval`, see src/db/connection.ts) or
 * completes whole: never a claim without its job. `lockWaitMs` null: rows
 * held by other sessions are skipped and returned as locked; a number: they
 * are waited for that long, and the entries whose wait ran out come back locked.
 */
async function runEntries(
  context: TickContext,
  plan: Plan,
  entries: readonly ResolvedEntry[],
  into: PassResult,
  upcoming: { ms: number },
  lockWaitMs: number | null,
): Promise<{ nowMs: number; locked: LockedEntry[] }> {
  const locked: LockedEntry[] = [];
  const lockTimedOut = (error: unknown) => lockWaitMs !== null && isLockTimeout(error);
  try {
    return { nowMs: await runStatement(context, plan, entries, into, upcoming, locked, lockWaitMs), locked };
  } catch (error) {
    if (lockTimedOut(error)) return { nowMs: planInstant(plan), locked: entries.map((entry) => ({ entry, slotMs: expectedDueSlot(entry, plan) })) };
    // A connection problem (refused, wrong password...) is no entry's fault: the pass fails, nothing is quarantined.
    if (isTransientDatabaseError(error) || diagnoseDatabaseError(error) || isCancelled(error) || entries.length === 0) throw new PhaseError("pass", undefined, error);
    context.logger.warn("tick statement failed; retrying entries one by one to isolate the failure", { error: redact(rootMessage(error)) });
  }
  let nowMs: number | undefined;
  for (const entry of entries) {
    try {
      nowMs = await runStatement(context, plan, [entry], into, upcoming, locked, lockWaitMs);
    } catch (error) {
      if (lockTimedOut(error)) locked.push({ entry, slotMs: expectedDueSlot(entry, plan) });
      else if (isTransientDatabaseError(error) || diagnoseDatabaseError(error) || isCancelled(error)) throw new PhaseError("enqueue", entry.identity, error);
      else await quarantine(context, plan, entry, error, into);
    }
  }
  return { nowMs: nowMs ?? planInstant(plan), locked };
}

/** Runs the statement for `entries` and takes in its rows; returns the clock it read. Rows found locked go to `locked`. */
async function runStatement(
  context: TickContext,
  plan: Plan,
  entries: readonly ResolvedEntry[],
  into: PassResult,
  upcoming: { ms: number },
  locked: LockedEntry[],
  lockWaitMs: number | null,
): Promise<number> {
  const sentAtMs = Date.now();
  const rows = await runPass(context.executor, { ...passInput(context, plan, entries), lockWaitMs });
  return absorb(context, plan, entries, rows, sentAtMs, into, upcoming, locked);
}

/** The statement's arguments: each entry with what the process remembers of it, and every candidate slot. */
function passInput(context: TickContext, plan: Plan, entries: readonly ResolvedEntry[]) {
  const slots = entries.flatMap((entry) =>
    candidateSlots(entry, plan.lowMs, plan.highMs).map((slotMs) => ({
      key: entry.ledgerKey,
      slotMs,
      fireMs: fireTime(entry, slotMs),
      idempotencyKey: slotIdempotencyKey(context.namespace, entry.identity, slotMs),
    })),
  );
  return {
    namespace: context.namespace,
    exactNow: plan.exactMs === null ? null : new Date(plan.exactMs),
    lowMs: plan.lowMs,
    highMs: plan.highMs,
    futureToleranceMs: FUTURE_LEDGER_TOLERANCE_MS,
    entries: entries.map((entry) => ({
      key: entry.ledgerKey,
      jobName: entry.jobName,
      catchUpWindowMs: entry.catchUpWindowMs,
      knownLedgerMs: context.memory.memo.get(entry.ledgerKey)?.ledgerMs ?? null,
      queue: entry.queue,
      payloadJson: entry.payloadJson,
      priority: entry.priority,
      maxAttempts: entry.job.retry.maxAttempts,
      overlap: entry.overlap,
    })),
    slots,
  };
}

/** Turns the statement's rows into outcomes and memo updates; returns the clock it read. */
function absorb(
  context: TickContext,
  plan: Plan,
  entries: readonly ResolvedEntry[],
  rows: readonly PassRow[],
  sentAtMs: number,
  into: PassResult,
  upcoming: { ms: number },
  locked: LockedEntry[],
): number {
  const nowMs = rows[0]?.now_ms ?? plan.exactMs ?? sentAtMs;
  const { memory, logger } = context;
  if (plan.exactMs === null) memory.clockOffsetMs = nowMs - sentAtMs;
  // The statement's own entries: one when a failed pass is retried entry by entry.
  const byKey = new Map(entries.map((entry) => [entry.ledgerKey, entry]));
  const remember = (entry: ResolvedEntry, ledgerMs: number) => {
    const seen = memory.memo.get(entry.ledgerKey);
    if (seen?.ledgerMs !== ledgerMs) memory.memo.set(entry.ledgerKey, { ledgerMs, nextFireMs: nextFireAfter(entry, ledgerMs) });
  };
  for (const row of rows) {
    const entry = row.key === null ? undefined : byKey.get(row.key);
    if (entry === undefined) continue;
    if (row.quarantined_until_ms !== null && row.quarantined_until_ms > nowMs) {
      // Quarantined by this or another replica: every replica waits for the same instant.
      memory.deferred.set(entry.ledgerKey, row.quarantined_until_ms);
    }
    if (row.locked) {
      locked.push({ entry, slotMs: row.slot_ms ?? row.old_ms ?? nowMs });
      continue;
    }
    memory.locked.delete(entry.ledgerKey);
    if (row.created_ms !== null) {
      into.created += 1;
      remember(entry, row.created_ms);
    } else if (row.old_ms === null || (row.old_ms > nowMs + FUTURE_LEDGER_TOLERANCE_MS && !row.repaired)) {
      // Another replica created or repaired the row meanwhile: read it again next pass.
      memory.memo.delete(entry.ledgerKey);
    } else if (row.repaired) {
      logger.warn("ledger value was in the future; repaired it to now so the entry keeps firing", {
        identity: entry.identity,
        from: new Date(row.old_ms).toISOString(),
        to: new Date(nowMs).toISOString(),
      });
      into.repaired.push({ identity: entry.identity, key: entry.ledgerKey, jobName: entry.jobName, from: new Date(row.old_ms), to: new Date(nowMs) });
      remember(entry, nowMs);
    } else if (row.slot_ms === null) {
      remember(entry, row.old_ms);
    } else if (!row.claimed) {
      // Another replica moved the ledger after this statement's snapshot.
      memory.memo.delete(entry.ledgerKey);
      upcoming.ms = Math.min(upcoming.ms, nextFireAfter(entry, row.slot_ms));
      into.lostRace.push(outcome(entry, row.slot_ms));
    } else {
      remember(entry, row.slot_ms);
      if (row.stale) into.skippedStale.push(outcome(entry, row.slot_ms));
      else if (row.skip_reason !== null) into.skipped.push({ ...outcome(entry, row.slot_ms), ...skipOf(row), jobId: row.skipped_job_id });
      else into.enqueued.push({ ...outcome(entry, row.slot_ms), jobId: row.job_id });
    }
  }
  return nowMs;
}

/** A skipped slot's reason as the pass's row gives it (src/db/sql/slot-policy.ts). */
function skipOf(row: PassRow): { reason: SkipReason; detail: string } {
  return { reason: row.skip_reason === "paused" ? "paused" : "overlap", detail: row.skip_detail ?? row.skip_reason ?? "" };
}

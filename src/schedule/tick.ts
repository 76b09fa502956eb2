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
import { isRetryableEntryFailure, LOCK_WAIT_MS, lockedRow, OTHER_LOCK_WAIT_MS, setAside, type LockedEntry } from "./deferrals.js";
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
    watchQuarantined(context, planPass({ entries: context.entries, memo: memory.memo, deferredUntil: memory.deferred, exactMs, estimateMs, horizonMs }));
  let current = plan(Date.now() + (memory.clockOffsetMs ?? 0), horizon?.earliestMs);
  let planned = current.entries.length;
  let nowMs = await runPlan(context, current, result, upcoming);
  if (nowMs < current.lowMs || nowMs > current.highMs) {
    // The database clock was not where this process expected: plan again at the clock it read, looking at every entry.
    current = plan(nowMs);
    planned += current.entries.length;
    nowMs = await runPlan(context, current, result, upcoming);
  }
  for (const [key, until] of memory.deferred) {
    if (until > nowMs) continue;
    memory.deferred.delete(key);
    memory.quarantined.delete(key);
  }
  // A pass that looked at no entry changed nothing: the horizon holds, and the earliest fire needs no look at each entry either.
  const earliest = planned === 0 && horizon !== undefined ? { earliestMs: horizon.earliestMs, complete: true } : earliestFire({ entries: context.entries, memo: memory.memo, deferredUntil: memory.deferred });
  memory.horizon = earliest.complete ? { entries: context.entries, earliestMs: earliest.earliestMs } : undefined;
  const next = Math.min(earliest.earliestMs, upcoming.ms);
  return { now: new Date(nowMs), ...result, nextFireAt: Number.isFinite(next) ? new Date(next) : null };
}

/**
 * The plan with the entries this process holds back for a quarantine added:
 * the statement reads their rows (and never claims one still quarantined), so
 * a quarantine cleared meanwhile ends at this pass, on every replica, instead
 * of when each replica's cached instant comes. Nothing is added when no
 * quarantine is cached, so the idle pass stays a bare clock read.
 */
function watchQuarantined(context: TickContext, plan: Plan): Plan {
  const { quarantined } = context.memory;
  if (quarantined.size === 0) return plan;
  const planned = new Set(plan.entries.map((entry) => entry.ledgerKey));
  const watched = context.entries.filter((entry) => quarantined.has(entry.ledgerKey) && !planned.has(entry.ledgerKey));
  return watched.length === 0 ? plan : { ...plan, entries: [...plan.entries, ...watched] };
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
  const first = await runSuspectsApart(context, plan, into, upcoming);
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
 * The plan's entries in one statement, but for the entries set aside by an
 * earlier pass (src/schedule/deferrals.ts): each of those runs alone
 * afterwards, so an entry that keeps failing or waiting never holds up the
 * others. Without suspects, this is the pass's one statement.
 */
async function runSuspectsApart(context: TickContext, plan: Plan, into: PassResult, upcoming: { ms: number }): Promise<{ nowMs: number; locked: LockedEntry[] }> {
  const { suspects, quarantined } = context.memory;
  // A suspect still quarantined is only watched (never claimed, so it cannot fail): it stays in the one statement.
  const alone = (entry: ResolvedEntry) => suspects.has(entry.ledgerKey) && !quarantined.has(entry.ledgerKey);
  const apart = suspects.size === 0 ? [] : plan.entries.filter(alone);
  if (apart.length === 0) return runEntries(context, plan, plan.entries, into, upcoming, null);
  const rest = plan.entries.filter((entry) => !alone(entry));
  const results = [];
  if (rest.length > 0) results.push(await runEntries(context, plan, rest, into, upcoming, null));
  for (const entry of apart) results.push(await runEntries(context, plan, [entry], into, upcoming, null));
  return { nowMs: results[results.length - 1]!.nowMs, locked: results.flatMap((result) => result.locked) };
}

/** A failure no entry can cause: the connection, the server going away, a setting or password it refuses. */
const passWide = (error: unknown) =>
  diagnoseDatabaseError(error) !== undefined || (isTransientDatabaseError(error) && !isRetryableEntryFailure(error));

/** A failed statement's entries are tried again in this many parts, each its own statement; a part that fails is split again. */
const ISOLATION_PARTS = 8;

/**
 * `entries` in one statement; if that fails for a reason an entry can cause
 * (any error but the connection's: a bad payload, a trigger raising a
 * serialization failure or deadlock, a lock wait past OTHER_LOCK_WAIT_MS, the
 * pass timeout), in parts until the entry is found, so one bad entry cannot
 * stop the others: that one is set aside or quarantined (setAside). Each
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
  const left: LeftOver = { locked: [], paused: [] };
  const first = await runEntriesOnce(context, plan, entries, into, upcoming, lockWaitMs, left);
  if (left.paused.length === 0) return { nowMs: first, locked: left.locked };
  // Entries a light statement found paused (by another replica or an operator) and left alone: now known to be paused,
  // they go through the full statement, which records their slots as skipped. Once per pause seen: later statements
  // with them are full from the start, until one finds the entry resumed.
  const again = await runEntries(context, plan, left.paused, into, upcoming, lockWaitMs);
  return { nowMs: again.nowMs, locked: [...left.locked, ...again.locked] };
}

/** What a statement leaves for later: entries whose ledger row another session held, and entries a light statement found paused. */
interface LeftOver {
  readonly locked: LockedEntry[];
  readonly paused: ResolvedEntry[];
}

/** runEntries' statement, split into parts when it fails; returns the clock it read. */
async function runEntriesOnce(
  context: TickContext,
  plan: Plan,
  entries: readonly ResolvedEntry[],
  into: PassResult,
  upcoming: { ms: number },
  lockWaitMs: number | null,
  left: LeftOver,
): Promise<number> {
  const { locked } = left;
  try {
    return await runStatement(context, plan, entries, into, upcoming, left, lockWaitMs);
  } catch (error) {
    // The second statement's wait for locked ledger rows ran out: those entries are reported as locked.
    if (lockWaitMs !== null && isLockTimeout(error)) {
      for (const entry of entries) locked.push({ entry, slotMs: expectedDueSlot(entry, plan) });
      return planInstant(plan);
    }
    // A connection problem (refused, wrong password...) is no entry's fault: the pass fails, nothing is set aside.
    if (passWide(error) || entries.length === 0) throw new PhaseError("pass", undefined, error);
    if (entries.length === 1) {
      const [entry] = entries as [ResolvedEntry];
      // A time-out proves nothing about an entry that is alone in its pass (a table lock, an overloaded server): unless an
      // earlier pass found it failing while the others went through, the pass fails, naming it.
      if (isCancelled(error) && !context.memory.suspects.has(entry.ledgerKey)) throw new PhaseError("pass", entry.identity, error);
      await setAside(context, plan, entry, error, into, upcoming);
      return planInstant(plan);
    }
    context.logger.warn("tick statement failed; retrying its entries in parts to find the one that caused it", { error: redact(rootMessage(error)) });
    const found = { nowMs: undefined as number | undefined };
    await isolate(context, plan, entries, into, upcoming, left, lockWaitMs, found);
    return found.nowMs ?? planInstant(plan);
  }
}

/**
 * Runs `entries`, whose statement failed, in ISOLATION_PARTS parts; a part
 * that fails again is split again, down to the entry that fails alone, which
 * is set aside. The parts without it fire. A slow pass that is no entry's
 * fault (two parts of one split cancelled by the pass timeout) fails as a
 * whole, as does a connection problem; a TickError from a part of one entry
 * names it.
 */
async function isolate(
  context: TickContext,
  plan: Plan,
  entries: readonly ResolvedEntry[],
  into: PassResult,
  upcoming: { ms: number },
  left: LeftOver,
  lockWaitMs: number | null,
  found: { nowMs: number | undefined },
): Promise<void> {
  const size = Math.ceil(entries.length / ISOLATION_PARTS);
  const timedOut: { entry: ResolvedEntry; error: unknown }[] = [];
  let cancelled = 0;
  for (let start = 0; start < entries.length; start += size) {
    const part = entries.slice(start, start + size);
    const named = part.length === 1 ? part[0]!.identity : undefined;
    try {
      found.nowMs = await runStatement(context, plan, part, into, upcoming, left, lockWaitMs);
    } catch (error) {
      if (lockWaitMs !== null && isLockTimeout(error)) {
        for (const entry of part) left.locked.push({ entry, slotMs: expectedDueSlot(entry, plan) });
        continue;
      }
      if (passWide(error)) throw new PhaseError(named === undefined ? "pass" : "enqueue", named, error);
      // Time-outs cost a pass timeout each: a second one in one split says the slowness is not one entry's.
      if (isCancelled(error) && ++cancelled > 1) throw new PhaseError("pass", named, error);
      if (part.length > 1) await isolate(context, plan, part, into, upcoming, left, lockWaitMs, found);
      else if (isCancelled(error)) timedOut.push({ entry: part[0]!, error });
      else await setAside(context, plan, part[0]!, error, into, upcoming);
    }
  }
  // A time-out is an entry's only when other entries' statements went through meanwhile.
  for (const { entry, error } of timedOut) {
    if (found.nowMs === undefined) throw new PhaseError("pass", entry.identity, error);
    await setAside(context, plan, entry, error, into, upcoming);
  }
}

/**
 * Runs the statement for `entries` and takes in its rows; returns the clock it
 * read. Rows found locked, and rows a light statement found paused, go to `left`.
 */
async function runStatement(
  context: TickContext,
  plan: Plan,
  entries: readonly ResolvedEntry[],
  into: PassResult,
  upcoming: { ms: number },
  left: LeftOver,
  lockWaitMs: number | null,
): Promise<number> {
  const sentAtMs = Date.now();
  const light = lightEnough(context, entries);
  const rows = await runPass(context.executor, { ...passInput(context, plan, entries), lockWaitMs, otherLockWaitMs: OTHER_LOCK_WAIT_MS, light });
  return absorb(context, plan, entries, rows, sentAtMs, into, upcoming, left, light);
}

/**
 * Whether `entries` can go through the light statement (src/db/sql/ledger.ts,
 * runPass): none has an overlap policy but allow_all and none is known to be
 * paused. The policy's CTEs cost the statement's parse and plan whether or not
 * they handle a row (at 100,000 entries, 4.0 s against 2.6 s for a cold idle
 * pass: docs/benchmarks.md). A pause this process does not know of is safe
 * all the same: the light statement leaves a paused row alone and says so.
 */
function lightEnough(context: TickContext, entries: readonly ResolvedEntry[]): boolean {
  const { paused } = context.memory;
  return entries.every((entry) => entry.overlap === "allow_all" && !paused.has(entry.ledgerKey));
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
  left: LeftOver,
  light: boolean,
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
    if (row.paused === true) {
      memory.paused.add(entry.ledgerKey);
      if (light) {
        // Left alone by the light statement (src/db/sql/ledger.ts): runEntries runs it again in the full one.
        left.paused.push(entry);
        continue;
      }
    } else {
      // Never paused, or resumed since a full statement saw it paused: its next statements are light again.
      memory.paused.delete(entry.ledgerKey);
    }
    if (row.quarantined_until_ms !== null && row.quarantined_until_ms > nowMs) {
      // Quarantined by this or another replica: every replica waits for the same instant.
      memory.deferred.set(entry.ledgerKey, row.quarantined_until_ms);
      memory.quarantined.add(entry.ledgerKey);
    } else if (memory.quarantined.delete(entry.ledgerKey)) {
      // Cleared (by an operator, or a claim elsewhere): the statement has just treated it as any entry.
      memory.deferred.delete(entry.ledgerKey);
    }
    if (row.locked) {
      left.locked.push({ entry, slotMs: row.slot_ms ?? row.old_ms ?? nowMs });
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
      memory.suspects.delete(entry.ledgerKey);
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

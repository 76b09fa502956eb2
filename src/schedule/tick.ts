// One scheduler pass over the ledger. Longer than most files because the pass and its failure
// handling belong together: the transient-error retry, the lock-skip-then-wait, the entry-by-entry
// isolation that quarantines one bad entry, and turning the statement's rows into outcomes.
// Planning (which entries, which slots) is pure and lives in src/schedule/plan.ts.
import { diagnoseDatabaseError } from "../db/diagnose.js";
import { isConnectionLoss } from "../db/health.js";
import type { DynamicSlots } from "../db/sql/dynamic.js";
import { dynamicDue, fireDue, releaseDynamic, type LeftState, type Release, type TakenRow } from "../db/sql/dynamic-fire.js";
import { runPass, type PassRow } from "../db/sql/ledger.js";
import { isTransientDatabaseError, rootMessage } from "../db/transient.js";
import { Backoff } from "../backoff.js";
import { isCancelled, isLockTimeout } from "../error-chain.js";
import { TickError, type TickPhase } from "../errors.js";
import { redact } from "../redact.js";
import type { SkipReason, SlotOutcome, TickReport } from "../events.js";
import { isRetryableEntryFailure, LOCK_WAIT_MS, lockedRow, OTHER_LOCK_WAIT_MS, setAside, type LockedEntry } from "./deferrals.js";
import { slotIdempotencyKey } from "./identity.js";
import { dynamicIdentity, dynamicLedgerKey, firedSlots, slotsFrom, takenEntry } from "./dynamic-entry.js";
import { outcome, Pass, passEntry, type Findings, type PassContext, type TickMemory } from "./pass.js";
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
export async function runTick(pass: Pass): Promise<TickReport> {
  const { context } = pass;
  const statementsBefore = context.statements.count;
  const backoff = retryBackoff();
  for (let attempt = 1; ; attempt += 1) {
    try {
      const report = await tickOnce(pass);
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

async function tickOnce(pass: Pass): Promise<Omit<TickReport, "statements" | "attempts">> {
  pass.begin();
  const { context, memory, exactMs } = pass;
  const horizon = memory.horizon?.entries === context.entries ? memory.horizon : undefined;
  const plan = (estimateMs: number, horizonMs?: number) =>
    watchQuarantined(context, planPass({ entries: context.entries, memo: memory.memo, deferredUntil: memory.deferred, exactMs, estimateMs, horizonMs }));
  pass.plan = plan(Date.now() + (memory.clockOffsetMs ?? 0), horizon?.earliestMs);
  let planned = pass.plan.entries.length;
  // With no static entry to look at, the take's statement reads the clock: an idle pass is that one statement.
  let nowMs = planned === 0 && context.dynamic !== undefined ? await takeDynamic(pass) : await runPlan(pass);
  if (nowMs < pass.plan.lowMs || nowMs > pass.plan.highMs) {
    // The database clock was not where this process expected: plan again at the clock it read, looking at every entry.
    pass.plan = plan(nowMs);
    planned += pass.plan.entries.length;
    nowMs = await runPlan(pass);
  }
  pass.record({ upcomingMs: await runDynamic(pass, nowMs) });
  for (const [key, until] of memory.deferred) {
    if (until > nowMs) continue;
    memory.deferred.delete(key);
    memory.quarantined.delete(key);
  }
  // A pass that looked at no entry changed nothing: the horizon holds, and the earliest fire needs no look at each entry either.
  const earliest = planned === 0 && horizon !== undefined ? { earliestMs: horizon.earliestMs, complete: true } : earliestFire({ entries: context.entries, memo: memory.memo, deferredUntil: memory.deferred });
  memory.horizon = earliest.complete ? { entries: context.entries, earliestMs: earliest.earliestMs } : undefined;
  return pass.report(nowMs, earliest.earliestMs);
}

/**
 * The plan with the entries this process holds back for a quarantine added:
 * the statement reads their rows (and never claims one still quarantined), so
 * a quarantine cleared meanwhile ends at this pass, on every replica, instead
 * of when each replica's cached instant comes. Nothing is added when no
 * quarantine is cached, so the idle pass stays a bare clock read.
 */
function watchQuarantined(context: PassContext, plan: Plan): Plan {
  const { quarantined } = context.memory;
  if (quarantined.size === 0) return plan;
  const planned = new Set(plan.entries.map((entry) => entry.ledgerKey));
  const watched = context.entries.filter((entry) => quarantined.has(entry.ledgerKey) && !planned.has(entry.ledgerKey));
  return watched.length === 0 ? plan : { ...plan, entries: [...plan.entries, ...watched] };
}

/** What the statements of a pass's part left for later, and the clock the last of them read. */
interface Ran {
  readonly nowMs: number;
  /** Entries whose ledger row another session held. */
  readonly locked: readonly LockedEntry[];
}

/** A statement's Ran, with the entries a light statement found paused and left alone (runEntries runs them again in the full one). */
interface Statement extends Ran {
  readonly paused: readonly ResolvedEntry[];
}

/** Dynamic entries a pass takes at most (src/db/sql/dynamic.ts); a pass that took this many asks for the next pass at once. */
export const DYNAMIC_TAKE_LIMIT = 5_000;
/** How long taken entries are the taking replica's: past it (the replica died mid-pass), they are due again for every replica. */
export const DYNAMIC_LEASE_MS = 30_000;
/** While dynamic entries are stored, a replica passes at least this often, so an entry another process upserts is seen soon. */
export const DYNAMIC_POLL_MS = 1_000;

/**
 * Looks for due dynamic entries (what the pass's first statement found, or
 * dynamicDue: one probe of the due index) and, when there are some, takes them (src/db/sql/dynamic.ts, fireDue):
 * the statement fires those whose next slot is the one due and that no
 * pause, quarantine or overlap policy concerns, and leases the rest to this
 * pass. More than DYNAMIC_PART due: two statements at once on two of the
 * pool's connections, each taking at most DYNAMIC_PART: `skip locked` shares
 * the due rows out between them as between replicas, and the server's work (a ledger row, a job and
 * its key, the entry's row, for each) runs on two backends. 10,000 due, one
 * replica, load 2.4 (2 cores): 741-764 ms with one statement of 5,000 per
 * pass, 0.5-0.6 s with two of 2,500 (bench/dynamic.ts). A statement that
 * failed leaves its rows as they were (still due); what the other took stays
 * this pass's, for its retry to release. Returns the clock the probe read.
 */
async function takeDynamic(pass: Pass): Promise<number> {
  const { context, memory, exactMs } = pass;
  const dynamic = context.dynamic!;
  const sentAtMs = Date.now();
  const exactNow = exactMs === null ? null : new Date(exactMs);
  // Asked by the pass's first statement, or here: the idle pass's one statement.
  const probe = pass.probed ?? (await dynamicDue(context.executor, { namespace: dynamic.namespace, exactNow, limit: dynamic.limit }));
  if (exactMs === null && pass.probed === undefined) memory.clockOffsetMs = probe.nowMs - sentAtMs;
  if (probe.due === 0) {
    pass.taken = { nowMs: probe.nowMs, rows: [], nextMs: probe.nextMs };
    return probe.nowMs;
  }
  const input = { ...dynamic, limit: DYNAMIC_PART, exactNow, traceContextJson: context.traceContext?.() ?? null, toleranceMs: FUTURE_LEDGER_TOLERANCE_MS };
  const takes = await Promise.allSettled(Array.from({ length: Math.ceil(probe.due / DYNAMIC_PART) }, () => fireDue(context.executor, input)));
  const taken = takes.flatMap((take) => (take.status === "fulfilled" ? [take.value] : []));
  if (taken.length > 0) {
    const nexts = taken.flatMap((take) => (take.nextMs === null ? [] : [take.nextMs]));
    pass.taken = { nowMs: taken[0]!.nowMs, rows: taken.flatMap((take) => take.rows), nextMs: nexts.length === 0 ? null : Math.min(...nexts) };
  }
  for (const take of takes) if (take.status === "rejected") throw take.reason;
  return probe.nowMs;
}

/**
 * The dynamic entries of the pass: taken (takeDynamic) unless the pass
 * already did; those the take fired reported, those it left fired by the
 * same machinery as the static entries (fireLeft); then every one released
 * in one statement with its slots. At most five statements whatever the
 * number taken (the probe, the take, at most two parts, the release), one
 * when nothing is due. Returns the earliest instant the next pass is wanted for them.
 */
async function runDynamic(pass: Pass, nowMs: number): Promise<number> {
  const dynamic = pass.context.dynamic;
  if (dynamic === undefined) return Number.POSITIVE_INFINITY;
  if (pass.taken === undefined) await takeDynamic(pass);
  const taken = pass.taken!;
  const full = taken.rows.length >= dynamic.limit;
  const pollMs = taken.nextMs !== null || taken.rows.length > 0 ? nowMs + DYNAMIC_POLL_MS : Number.POSITIVE_INFINITY;
  const wantedMs = Math.min(pollMs, taken.nextMs ?? Number.POSITIVE_INFINITY, full ? nowMs : Number.POSITIVE_INFINITY);
  if (taken.rows.length === 0) return wantedMs;
  const { namespace } = dynamic;
  const releases: Release[] = [];
  const enqueued: (SlotOutcome & { readonly jobId: number | null })[] = [];
  const left: LeftRow[] = [];
  for (const row of taken.rows) {
    if (row.left !== null) {
      left.push({ ...row, ...row.left });
      continue;
    }
    if (row.fired_slot_ms === null) continue;
    const ledgerKey = dynamicLedgerKey(namespace, row.key);
    enqueued.push({ identity: dynamicIdentity(row.key), key: ledgerKey, jobName: row.job_name, slot: new Date(row.fired_slot_ms), jobId: row.job_id });
    // A row this process cannot read keeps what the take wrote: its next slot, its following one unknown.
    const slots = firedSlots(row);
    if (slots !== undefined) releases.push({ key: row.key, ledgerKey, version: row.version, slots });
  }
  pass.record({ enqueued });
  releases.push(...(await fireLeft(pass, left, nowMs)));
  await releaseDynamic(pass.context.executor, namespace, releases);
  pass.taken = { nowMs: taken.nowMs, rows: [], nextMs: taken.nextMs };
  return releases.reduce((earliest, release) => Math.min(earliest, release.slots.nextFireMs ?? Number.POSITIVE_INFINITY), wantedMs);
}

/**
 * The taken entries the take left to the pass: fired by the same machinery
 * as the static entries (runPlan, on passes of their own whose memory is
 * what the take read of their ledger rows, so the replica keeps nothing of
 * them afterwards), in parts of at most DYNAMIC_PART at once. Returns their
 * releases: each one's next slot after its ledger value as the pass left it.
 */
async function fireLeft(pass: Pass, rows: readonly LeftRow[], nowMs: number): Promise<Release[]> {
  if (rows.length === 0) return [];
  const { namespace, ledgerNamespace } = pass.context.dynamic!;
  const memory: TickMemory = { memo: new Map(), deferred: new Map(), quarantined: new Set(), suspects: new Map(), paused: new Set(), locked: new Map(), clockOffsetMs: undefined };
  const resolved = rows.map((row, index) => ({ row, entry: takenEntry(row, namespace, index) }));
  const entries = resolved.flatMap(({ entry }) => (entry === undefined ? [] : [entry]));
  for (const { row, entry } of resolved) {
    if (entry === undefined) continue;
    if (row.ledger_ms !== null) memory.memo.set(entry.ledgerKey, { ledgerMs: row.ledger_ms, nextFireMs: nextFireAfter(entry, row.ledger_ms) });
    if (row.paused) memory.paused.add(entry.ledgerKey);
    if (row.quarantined_until_ms !== null && row.quarantined_until_ms > nowMs) memory.deferred.set(entry.ledgerKey, row.quarantined_until_ms);
  }
  // Settled, not raced: a part that failed fails the pass only once the other's statement is over, so a retried pass never
  // runs beside a statement of its own attempt.
  const fired = await Promise.allSettled(
    dynamicParts(entries).map((part) => fireTaken(pass, { ...pass.context, namespace: ledgerNamespace, entries: part, memory, dynamic: undefined }, nowMs)),
  );
  for (const part of fired) if (part.status === "rejected") throw part.reason;
  return resolved.map(({ row, entry }) => {
    // A row this process cannot read (never, as upsert validates it) waits an hour rather than being taken by every pass.
    if (entry === undefined) return { key: row.key, ledgerKey: dynamicLedgerKey(namespace, row.key), version: row.version, slots: waitUntil(nowMs + 3_600_000) };
    const slots = slotsFrom(entry, entry.calendar.nextMs(memory.memo.get(entry.ledgerKey)?.ledgerMs ?? nowMs));
    // A quarantine's wait: the entry is looked at again when it ends, whatever slot is due then.
    const deferredMs = memory.deferred.get(entry.ledgerKey);
    return { key: row.key, ledgerKey: entry.ledgerKey, version: row.version, slots: deferredMs !== undefined && deferredMs > (slots.nextFireMs ?? Number.POSITIVE_INFINITY) ? waitUntil(deferredMs) : slots };
  });
}

/** A taken entry left to the pass, its definition and ledger state in full. */
type LeftRow = TakenRow & LeftState;

/** Slots that only say when to look at the entry again: no slot known. */
const waitUntil = (ms: number): DynamicSlots => ({ nextFireMs: ms, nextSlotMs: null, followingSlotMs: null, followingFireMs: null });

/**
 * Due dynamic entries one statement takes, or fires for the pass, at most: a pass's DYNAMIC_TAKE_LIMIT goes out as two
 * statements at once, on two of the pool's connections. Each fired entry is server work (its ledger row claimed, a job and
 * its key inserted) that one backend does on one core; two statements share it between two. Entries the take left to the
 * pass, 10,000 of them, one replica, load 1-1.5 (2 cores): 0.98-1.17 s in one statement per 5,000 against 0.74-0.98 s in
 * two (bench/dynamic.ts). Their entries are disjoint, so the two never wait on each other's rows, and each is guarded by
 * its ledger rows like any pass statement.
 */
export const DYNAMIC_PART = 2_500;

/** `entries` cut into parts of at most DYNAMIC_PART, of even size. */
function dynamicParts<T>(entries: readonly T[]): T[][] {
  const count = Math.ceil(entries.length / DYNAMIC_PART);
  const size = Math.ceil(entries.length / Math.max(1, count));
  return Array.from({ length: count }, (_, index) => entries.slice(index * size, (index + 1) * size));
}

/** Fires a part of the taken entries on a pass of its own (`context`: the part, and the memory the take read), recording what it found in `pass`. */
async function fireTaken(pass: Pass, context: PassContext, nowMs: number): Promise<void> {
  const sub = new Pass(context, pass.exactMs === null ? {} : { now: new Date(pass.exactMs) });
  sub.taken = { nowMs, rows: [], nextMs: null };
  const { memory, entries } = context;
  sub.plan = planPass({ entries, memo: memory.memo, deferredUntil: memory.deferred, exactMs: pass.exactMs, estimateMs: nowMs });
  if (sub.plan.entries.length > 0) await runPlan(sub);
  pass.record(sub.findings());
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
async function runPlan(pass: Pass): Promise<number> {
  const { memory } = pass;
  const first = await runSuspectsApart(pass);
  const fresh = first.locked.filter(({ entry }) => !memory.locked.has(entry.ledgerKey));
  for (const held of first.locked) if (memory.locked.has(held.entry.ledgerKey)) pass.record(lockedRow(pass, held, first.nowMs));
  if (fresh.length === 0) return first.nowMs;
  const second = await runEntries(
    pass,
    fresh.map(({ entry }) => entry),
    LOCK_WAIT_MS,
  );
  for (const held of second.locked) pass.record(lockedRow(pass, held, second.nowMs));
  return second.nowMs;
}

/**
 * The plan's entries in one statement, but for the entries set aside by an
 * earlier pass (src/schedule/deferrals.ts): each of those runs alone
 * afterwards, so an entry that keeps failing or waiting never holds up the
 * others. Without suspects, this is the pass's one statement.
 */
async function runSuspectsApart(pass: Pass): Promise<Ran> {
  const { plan } = pass;
  const { suspects, quarantined } = pass.memory;
  // A suspect still quarantined is only watched (never claimed, so it cannot fail): it stays in the one statement.
  const alone = (entry: ResolvedEntry) => suspects.has(entry.ledgerKey) && !quarantined.has(entry.ledgerKey);
  const apart = suspects.size === 0 ? [] : plan.entries.filter(alone);
  if (apart.length === 0) return runEntries(pass, plan.entries, null);
  const rest = plan.entries.filter((entry) => !alone(entry));
  const results: Ran[] = [];
  if (rest.length > 0) results.push(await runEntries(pass, rest, null));
  for (const entry of apart) results.push(await runEntries(pass, [entry], null));
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
async function runEntries(pass: Pass, entries: readonly ResolvedEntry[], lockWaitMs: number | null): Promise<Ran> {
  const first = await runEntriesOnce(pass, entries, lockWaitMs);
  if (first.paused.length === 0) return first;
  // Entries a light statement found paused (by another replica or an operator) and left alone: now known to be paused,
  // they go through the full statement, which records their slots as skipped. Once per pause seen: later statements
  // with them are full from the start, until one finds the entry resumed.
  const again = await runEntries(pass, first.paused, lockWaitMs);
  return { nowMs: again.nowMs, locked: [...first.locked, ...again.locked] };
}

/** A plan's expected due slot for each of `entries`, reported as locked: their wait for a lock ran out. */
const lockedAll = (pass: Pass, entries: readonly ResolvedEntry[]): LockedEntry[] => entries.map((entry) => ({ entry, slotMs: expectedDueSlot(entry, pass.plan) }));

/** runEntries' statement, split into parts when it fails. */
async function runEntriesOnce(pass: Pass, entries: readonly ResolvedEntry[], lockWaitMs: number | null): Promise<Statement> {
  try {
    return await runStatement(pass, entries, lockWaitMs);
  } catch (error) {
    const nowMs = planInstant(pass.plan);
    // The second statement's wait for locked ledger rows ran out: those entries are reported as locked.
    if (lockWaitMs !== null && isLockTimeout(error)) return { nowMs, locked: lockedAll(pass, entries), paused: [] };
    // A connection problem (refused, wrong password...) is no entry's fault: the pass fails, nothing is set aside.
    if (passWide(error) || entries.length === 0) throw new PhaseError("pass", undefined, error);
    if (entries.length === 1) {
      const [entry] = entries as [ResolvedEntry];
      // A time-out proves nothing about an entry that is alone in its pass (a table lock, an overloaded server): unless an
      // earlier pass found it failing while the others went through, the pass fails, naming it.
      if (isCancelled(error) && !pass.memory.suspects.has(entry.ledgerKey)) throw new PhaseError("pass", entry.identity, error);
      pass.record(await setAside(pass, entry, error));
      return { nowMs, locked: [], paused: [] };
    }
    pass.context.logger.warn("tick statement failed; retrying its entries in parts to find the one that caused it", { error: redact(rootMessage(error)) });
    const parts = await isolate(pass, entries, lockWaitMs, undefined);
    return { ...parts, nowMs: parts.nowMs ?? nowMs };
  }
}

/**
 * Runs `entries`, whose statement failed, in ISOLATION_PARTS parts; a part
 * that fails again is split again, down to the entry that fails alone, which
 * is set aside. The parts without it fire. A slow pass that is no entry's
 * fault (two parts of one split cancelled by the pass timeout) fails as a
 * whole, as does a connection problem; a TickError from a part of one entry
 * names it. `seenMs`: the clock an earlier part of the same search read
 * (undefined while none went through); the result's `nowMs` likewise.
 */
async function isolate(
  pass: Pass,
  entries: readonly ResolvedEntry[],
  lockWaitMs: number | null,
  seenMs: number | undefined,
): Promise<Omit<Statement, "nowMs"> & { nowMs: number | undefined }> {
  const size = Math.ceil(entries.length / ISOLATION_PARTS);
  const timedOut: { entry: ResolvedEntry; error: unknown }[] = [];
  const locked: LockedEntry[] = [];
  const paused: ResolvedEntry[] = [];
  let nowMs = seenMs;
  let cancelled = 0;
  for (let start = 0; start < entries.length; start += size) {
    const part = entries.slice(start, start + size);
    const named = part.length === 1 ? part[0]!.identity : undefined;
    try {
      const ran = await runStatement(pass, part, lockWaitMs);
      nowMs = ran.nowMs;
      locked.push(...ran.locked);
      paused.push(...ran.paused);
    } catch (error) {
      if (lockWaitMs !== null && isLockTimeout(error)) {
        locked.push(...lockedAll(pass, part));
        continue;
      }
      if (passWide(error)) throw new PhaseError(named === undefined ? "pass" : "enqueue", named, error);
      // Time-outs cost a pass timeout each: a second one in one split says the slowness is not one entry's.
      if (isCancelled(error) && ++cancelled > 1) throw new PhaseError("pass", named, error);
      if (part.length > 1) {
        const inner = await isolate(pass, part, lockWaitMs, nowMs);
        nowMs = inner.nowMs;
        locked.push(...inner.locked);
        paused.push(...inner.paused);
      } else if (isCancelled(error)) timedOut.push({ entry: part[0]!, error });
      else pass.record(await setAside(pass, part[0]!, error));
    }
  }
  // A time-out is an entry's only when other entries' statements went through meanwhile.
  for (const { entry, error } of timedOut) {
    if (nowMs === undefined) throw new PhaseError("pass", entry.identity, error);
    pass.record(await setAside(pass, entry, error));
  }
  return { nowMs, locked, paused };
}

/**
 * Runs the statement for `entries` and takes in its rows (absorb): what they
 * found goes to the pass's results; the rows found locked, and the rows a
 * light statement found paused, come back with the clock it read.
 */
async function runStatement(pass: Pass, entries: readonly ResolvedEntry[], lockWaitMs: number | null): Promise<Statement> {
  const sentAtMs = Date.now();
  const light = lightEnough(pass.memory, entries);
  const probe = pass.probeInput();
  const rows = await runPass(pass.context.executor, { ...passInput(pass, entries), lockWaitMs, otherLockWaitMs: OTHER_LOCK_WAIT_MS, light, probe });
  const first = rows[0];
  if (probe !== null && first !== undefined) pass.probed = { nowMs: first.now_ms, nextMs: first.dyn_next_ms ?? null, due: first.dyn_due ?? 0 };
  return absorb(pass, entries, rows, sentAtMs, light);
}

/**
 * Whether `entries` can go through the light statement (src/db/sql/ledger.ts,
 * runPass): none has an overlap policy but allow_all and none is known to be
 * paused. The policy's CTEs cost the statement's parse and plan whether or not
 * they handle a row (at 100,000 entries, 4.0 s against 2.6 s for a cold idle
 * pass: docs/benchmarks.md). A pause this process does not know of is safe
 * all the same: the light statement leaves a paused row alone and says so.
 */
function lightEnough(memory: TickMemory, entries: readonly ResolvedEntry[]): boolean {
  const { paused } = memory;
  return entries.every((entry) => entry.overlap === "allow_all" && !paused.has(entry.ledgerKey));
}

/** The statement's arguments: each entry with what the process remembers of it, and every candidate slot. */
function passInput(pass: Pass, entries: readonly ResolvedEntry[]) {
  const { plan, context } = pass;
  const { memo } = context.memory;
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
    entries: entries.map((entry) => passEntry(entry, memo.get(entry.ledgerKey)?.ledgerMs ?? null)),
    slots,
    // Asked only of a statement with entries: an idle pass makes no span.
    traceContextJson: entries.length === 0 ? null : (context.traceContext?.() ?? null),
  };
}

/** Turns the statement's rows into findings (recorded by the pass) and memo updates; returns the clock it read and the rows left for later. */
function absorb(pass: Pass, entries: readonly ResolvedEntry[], rows: readonly PassRow[], sentAtMs: number, light: boolean): Statement {
  const { plan, memory } = pass;
  const nowMs = rows[0]?.now_ms ?? plan.exactMs ?? sentAtMs;
  if (plan.exactMs === null) memory.clockOffsetMs = nowMs - sentAtMs;
  // The statement's own entries: one when a failed pass is retried entry by entry.
  const byKey = new Map(entries.map((entry) => [entry.ledgerKey, entry]));
  const locked: LockedEntry[] = [];
  const paused: ResolvedEntry[] = [];
  for (const row of rows) {
    const entry = row.key === null ? undefined : byKey.get(row.key);
    if (entry === undefined) continue;
    const seen = absorbRow(pass, entry, row, nowMs, light);
    if (seen === LEFT_PAUSED) paused.push(entry);
    else if ("held" in seen) locked.push(seen.held);
    else pass.record(seen);
  }
  return { nowMs, locked, paused };
}

/** A row a light statement found paused and left alone: its entry goes through the full statement (runEntries). */
const LEFT_PAUSED = "left paused";

/** One entry's row of the statement: the memory it updates, and what the pass reports of it (or that it is left for later). */
function absorbRow(pass: Pass, entry: ResolvedEntry, row: PassRow, nowMs: number, light: boolean): Findings | { readonly held: LockedEntry } | typeof LEFT_PAUSED {
  const { memory, context } = pass;
  const remember = (ledgerMs: number) => {
    const seen = memory.memo.get(entry.ledgerKey);
    if (seen?.ledgerMs !== ledgerMs) memory.memo.set(entry.ledgerKey, { ledgerMs, nextFireMs: nextFireAfter(entry, ledgerMs) });
  };
  if (row.paused === true) {
    memory.paused.add(entry.ledgerKey);
    // Left alone by the light statement (src/db/sql/ledger.ts): runEntries runs it again in the full one.
    if (light) return LEFT_PAUSED;
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
  if (row.locked) return { held: { entry, slotMs: row.slot_ms ?? row.old_ms ?? nowMs } };
  memory.locked.delete(entry.ledgerKey);
  if (row.created_ms !== null) {
    remember(row.created_ms);
    return { created: 1 };
  }
  if (row.old_ms === null || (row.old_ms > nowMs + FUTURE_LEDGER_TOLERANCE_MS && !row.repaired)) {
    // Another replica created or repaired the row meanwhile: read it again next pass.
    memory.memo.delete(entry.ledgerKey);
    return {};
  }
  if (row.repaired) {
    context.logger.warn("ledger value was in the future; repaired it to now so the entry keeps firing", {
      identity: entry.identity,
      from: new Date(row.old_ms).toISOString(),
      to: new Date(nowMs).toISOString(),
    });
    remember(nowMs);
    return { repaired: [{ identity: entry.identity, key: entry.ledgerKey, jobName: entry.jobName, from: new Date(row.old_ms), to: new Date(nowMs) }] };
  }
  if (row.slot_ms === null) {
    remember(row.old_ms);
    return {};
  }
  if (!row.claimed) {
    // Another replica moved the ledger after this statement's snapshot.
    memory.memo.delete(entry.ledgerKey);
    return { lostRace: [outcome(entry, row.slot_ms)], upcomingMs: nextFireAfter(entry, row.slot_ms) };
  }
  remember(row.slot_ms);
  memory.suspects.delete(entry.ledgerKey);
  if (row.stale) return { skippedStale: [outcome(entry, row.slot_ms)] };
  if (row.skip_reason !== null) return { skipped: [{ ...outcome(entry, row.slot_ms), ...skipOf(row), jobId: row.skipped_job_id }] };
  return { enqueued: [{ ...outcome(entry, row.slot_ms), jobId: row.job_id }] };
}

/** A skipped slot's reason as the pass's row gives it (src/db/sql/slot-policy.ts). */
function skipOf(row: PassRow): { reason: SkipReason; detail: string } {
  return { reason: row.skip_reason === "paused" ? "paused" : "overlap", detail: row.skip_detail ?? row.skip_reason ?? "" };
}

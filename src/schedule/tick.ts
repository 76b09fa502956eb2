import { sql } from "drizzle-orm";
import { redact } from "../admin/redact.js";
import { query, type Database } from "../db/connection.js";
import { isTransientDatabaseError, rootMessage } from "../db/transient.js";
import { CronledgerError } from "../errors.js";
import { jobInsertCtes } from "../jobs/insert-jobs.js";
import type { Logger } from "../log.js";
import { slotIdempotencyKey } from "./identity.js";
import { jitterMs } from "./jitter.js";
import type { ResolvedEntry } from "./validate.js";

/**
 * `pass`: the one statement that reads, creates, repairs and claims the
 * ledger rows of every candidate entry and inserts the jobs of the slots it
 * claimed. `enqueue`: one entry's share of it, retried alone after the whole
 * statement failed.
 */
export type TickPhase = "pass" | "enqueue";

/** A tick pass that failed after its retries; names the phase and, where one is involved, the entry. */
export class TickError extends CronledgerError {
  readonly phase: TickPhase;
  readonly entry: string | undefined;

  constructor(phase: TickPhase, entry: string | undefined, cause: unknown, attempts: number) {
    super(
      "tick_failed",
      `Scheduler tick failed in phase "${phase}"${entry ? ` for entry ${entry}` : ""} after ${attempts} attempt${attempts === 1 ? "" : "s"}: ${rootMessage(cause)}. ` +
        "Check database connectivity; the next pass retries and no slot is lost (see docs/operations.md, \"Scheduler stuck\").",
      { cause },
    );
    this.phase = phase;
    this.entry = entry;
  }
}

export interface SlotOutcome {
  readonly identity: string;
  readonly key: string;
  readonly jobName: string;
  readonly slot: Date;
}

export interface TickReport {
  /** The instant this pass evaluated schedules at (the database clock unless overridden). */
  readonly now: Date;
  readonly enqueued: (SlotOutcome & { readonly jobId: number | null })[];
  /** Another replica claimed the slot first: normal, not an error. */
  readonly lostRace: SlotOutcome[];
  /** The slot was older than the catch-up window: the ledger moved on without firing. */
  readonly skippedStale: SlotOutcome[];
  /** The entry's claim or job insert failed; its slot stays unclaimed and is retried after QUARANTINE_DEFERRAL_MS. */
  readonly quarantined: (SlotOutcome & { readonly phase: TickPhase; readonly error: string })[];
  /** Ledger values found in the future beyond tolerance, reset to `now`. */
  readonly repaired: { readonly identity: string; readonly key: string; readonly jobName: string; readonly from: Date; readonly to: Date }[];
  /** Ledger rows this pass created for entries seen for the first time. */
  readonly created: number;
  /** Earliest upcoming fire time among the entries, for the runner's sleep. */
  readonly nextFireAt: Date | null;
  /** Statements sent to the database by this pass. */
  readonly statements: number;
  readonly attempts: number;
}

/**
 * What this process last saw of each entry: its ledger value and the fire
 * time of the first slot after it. Ledger values only move forward, so an
 * entry whose memoized next fire is still ahead cannot be due: an idle pass
 * reads no ledger rows and does no cron arithmetic.
 */
export type FireMemo = Map<string, { readonly ledgerMs: number; readonly nextFireMs: number }>;

export interface TickContext {
  readonly database: Database;
  readonly entries: readonly ResolvedEntry[];
  readonly namespace: string;
  readonly logger: Logger;
  readonly memo: FireMemo;
  /** Entries quarantined recently, with the tick time before which they are left out of the batch. */
  readonly deferred: Map<string, number>;
  /** Database clock minus local clock, as last observed; lets a pass pick its candidates before it reads `now()`. */
  readonly clock: { offsetMs: number | undefined };
}

/**
 * The earliest fire time over every entry of a context's memo, kept by the
 * pass that computed it while each entry has a memo and nothing changed
 * since. An idle pass whose clock span ends before it plans nothing without
 * looking at each entry: at 100,000 entries that look cost more than the
 * statement (two map lookups per entry, twice per pass).
 */
interface Horizon {
  readonly entries: readonly ResolvedEntry[];
  readonly earliestMs: number;
}
const horizons = new WeakMap<FireMemo, Horizon>();

/** How long a quarantined entry stays out of the batch before it is tried again. */
export const QUARANTINE_DEFERRAL_MS = 60_000;

export interface TickOptions {
  /** Evaluate schedules at this instant instead of the database clock (tests, replays). */
  readonly now?: Date;
}

/**
 * How far the database clock may be from this process's estimate of it when
 * a pass plans its candidate slots; beyond it, the pass plans again at the
 * clock it read (a second statement, after a clock jump or a long stall).
 */
const CLOCK_MARGIN_MS = 2_000;
/** Ledger values further in the future than this are corrupt, not clock skew. */
export const FUTURE_LEDGER_TOLERANCE_MS = 5 * 60_000;
export const TICK_RETRIES = 3;
const RETRY_BACKOFF_MS = [100, 300, 900] as const;

class PhaseError extends Error {
  constructor(
    readonly phase: TickPhase,
    readonly entry: string | undefined,
    readonly original: unknown,
  ) {
    super(rootMessage(original));
  }
}

async function inPhase<T>(phase: TickPhase, entry: string | undefined, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw error instanceof PhaseError ? error : new PhaseError(phase, entry, error);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * One scheduler pass (DESIGN 6). Transient database errors retry the whole
 * pass: every write is guarded by the ledger value it read, so a retry after
 * an unacknowledged commit finds the slot already claimed and adds nothing.
 */
export async function runTick(context: TickContext, options: TickOptions = {}): Promise<TickReport> {
  const statementsBefore = context.database.statements.count;
  for (let attempt = 1; ; attempt += 1) {
    try {
      const report = await tickOnce(context, options);
      return { ...report, statements: context.database.statements.count - statementsBefore, attempts: attempt };
    } catch (error) {
      const phaseError = error instanceof PhaseError ? error : new PhaseError("pass", undefined, error);
      const transient = isTransientDatabaseError(phaseError.original);
      if (!transient || attempt > TICK_RETRIES) {
        throw new TickError(phaseError.phase, phaseError.entry, phaseError.original, attempt);
      }
      context.logger.warn("tick hit a transient database error; retrying", {
        phase: phaseError.phase,
        attempt,
        error: redact(phaseError.message),
      });
      await sleep(RETRY_BACKOFF_MS[attempt - 1] ?? 1_000);
    }
  }
}


function outcome(entry: ResolvedEntry, slotMs: number): SlotOutcome {
  return { identity: entry.identity, key: entry.ledgerKey, jobName: entry.jobName, slot: new Date(slotMs) };
}

function fireTime(entry: ResolvedEntry, slotMs: number): number {
  return entry.jitterMs > 0 ? slotMs + jitterMs(entry.identity, slotMs, entry.jitterMs) : slotMs;
}

/** Fire time of the first slot after `ledgerMs`, or Infinity for an entry that never fires again. */
function nextFireAfter(entry: ResolvedEntry, ledgerMs: number): number {
  const next = entry.calendar.nextMs(ledgerMs);
  return next === null ? Number.POSITIVE_INFINITY : fireTime(entry, next);
}

/**
 * What one statement of a pass covers: the entries it reads, and the span
 * the database clock must read within for their candidate slots to hold.
 */
interface Plan {
  readonly lowMs: number;
  readonly highMs: number;
  /** The fixed instant of `tick({ now })`; null means the database clock. */
  readonly exactMs: number | null;
  readonly entries: readonly ResolvedEntry[];
}

/**
 * Entries the pass must look at: unknown ones, and those whose memoized next
 * fire may have come by `highMs`. Recently quarantined entries sit out.
 */
function planPass(context: TickContext, options: TickOptions, databaseNowMs?: number): Plan {
  const exactMs = options.now?.getTime() ?? null;
  const estimateMs = exactMs ?? databaseNowMs ?? Date.now() + (context.clock.offsetMs ?? 0);
  const marginMs = exactMs === null ? CLOCK_MARGIN_MS : 0;
  const highMs = estimateMs + marginMs;
  const horizon = horizons.get(context.memo);
  if (horizon !== undefined && horizon.entries === context.entries && highMs < horizon.earliestMs) {
    return { lowMs: estimateMs - marginMs, highMs, exactMs, entries: [] };
  }
  const entries = context.entries.filter((entry) => {
    const deferredUntil = context.deferred.get(entry.ledgerKey);
    if (deferredUntil !== undefined) {
      if (estimateMs < deferredUntil) return false;
      context.deferred.delete(entry.ledgerKey);
    }
    const seen = context.memo.get(entry.ledgerKey);
    return seen === undefined || seen.nextFireMs <= highMs;
  });
  return { lowMs: estimateMs - marginMs, highMs, exactMs, entries };
}

/**
 * The slots that can be the entry's due slot (DESIGN 6, step 2) while the
 * clock reads anywhere in [low, high]: the latest whose fire time is at or
 * before `low`, and every later one whose fire time is at or before `high`.
 * The statement picks the latest of them whose fire time has come by the
 * clock it reads; with `tick({ now })` the span is one instant and one slot.
 */
function candidateSlots(entry: ResolvedEntry, lowMs: number, highMs: number): number[] {
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

interface PassRow {
  now_ms: number;
  key: string | null;
  old_ms: number | null;
  slot_ms: number | null;
  stale: boolean | null;
  claimed: boolean;
  created_ms: number | null;
  repaired: boolean;
  job_id: number | null;
}

/**
 * The pass as one statement (DESIGN 6, steps 1-5): read the ledger rows of
 * the planned entries; create the missing ones at `now` (or at the value this
 * process last saw, for a row that vanished under it); repair values in the
 * future; pick each entry's due slot among its candidates by the clock the
 * statement reads; claim them all in one UPDATE guarded by the value read;
 * insert the jobs of the claimed, non-stale slots. Every step sees the same
 * snapshot, and a replica that claimed first makes the guard fail (0 rows:
 * a lost race).
 */
function passStatement(context: TickContext, plan: Plan, entries: readonly ResolvedEntry[]) {
  const exact = plan.exactMs === null ? null : new Date(plan.exactMs).toISOString();
  // The idle pass, every second on every replica: the clock alone, without planning the empty statement.
  if (entries.length === 0) {
    return sql`select (extract(epoch from date_trunc('milliseconds', coalesce(${exact}::timestamptz, now()))) * 1000)::float8 as now_ms,
      null as key, null as old_ms, null as slot_ms, null as stale, false as claimed, null as created_ms, false as repaired, null as job_id`;
  }
  const slots = { key: [] as string[], ms: [] as number[], at: [] as string[], fireMs: [] as number[], idempotencyKey: [] as string[] };
  for (const entry of entries) {
    for (const slotMs of candidateSlots(entry, plan.lowMs, plan.highMs)) {
      slots.key.push(entry.ledgerKey);
      slots.ms.push(slotMs);
      slots.at.push(new Date(slotMs).toISOString());
      slots.fireMs.push(fireTime(entry, slotMs));
      slots.idempotencyKey.push(slotIdempotencyKey(context.namespace, entry.identity, slotMs));
    }
  }
  const column = <T>(pick: (entry: ResolvedEntry) => T) => sql.param(entries.map(pick));
  const knownStart = (entry: ResolvedEntry) => {
    const seen = context.memo.get(entry.ledgerKey);
    return seen === undefined ? null : new Date(seen.ledgerMs).toISOString();
  };
  const ledgerMs = sql`(extract(epoch from s.last_enqueued_slot) * 1000)::float8`;
  return sql`
    with clock as (
      select t as now, (extract(epoch from t) * 1000)::float8 as now_ms
      from (select date_trunc('milliseconds', coalesce(${exact}::timestamptz, now())) as t) as c
    ), entry as (
      select e.*, ${ledgerMs} as old_ms
      from unnest(
        ${column((entry) => entry.ledgerKey)}::text[], ${column((entry) => entry.jobName)}::text[],
        ${column((entry) => entry.catchUpWindowMs)}::float8[], ${column(knownStart)}::text[],
        ${column((entry) => entry.queue)}::text[], ${column((entry) => entry.payloadJson)}::text[],
        ${column((entry) => entry.priority)}::int[], ${column((entry) => entry.job.retry.maxAttempts)}::int[]
      ) as e(key, job_name, window_ms, start_at, queue, payload, priority, max_attempts)
      left join cronledger.schedule_state s on s.key = e.key
    ), due as (
      select distinct on (c.key) c.key, c.slot_ms, c.slot_at, c.idempotency_key, e.old_ms,
        c.slot_ms < clock.now_ms - e.window_ms as stale
      from unnest(
        ${sql.param(slots.key)}::text[], ${sql.param(slots.ms)}::float8[], ${sql.param(slots.at)}::text[],
        ${sql.param(slots.fireMs)}::float8[], ${sql.param(slots.idempotencyKey)}::text[]
      ) as c(key, slot_ms, slot_at, fire_ms, idempotency_key)
      join entry e on e.key = c.key
      cross join clock
      where clock.now_ms between ${plan.lowMs}::float8 and ${plan.highMs}::float8
        and e.old_ms <= clock.now_ms + ${FUTURE_LEDGER_TOLERANCE_MS}::float8
        and c.fire_ms <= clock.now_ms
        and c.slot_ms > e.old_ms
      order by c.key, c.slot_ms desc
    ), created as (
      insert into cronledger.schedule_state (key, namespace, job_name, last_enqueued_slot)
      select e.key, ${context.namespace}, e.job_name, coalesce(e.start_at::timestamptz, clock.now)
      from entry e cross join clock
      where e.old_ms is null
      on conflict (key) do nothing
      returning key, (extract(epoch from last_enqueued_slot) * 1000)::float8 as ms
    ), repaired as (
      update cronledger.schedule_state s set last_enqueued_slot = (select now from clock), updated_at = now()
      from entry e
      -- The clock as a scalar, so the filter picks the few corrupt rows before the join instead of after it.
      where s.key = e.key and e.old_ms > (select now_ms from clock) + ${FUTURE_LEDGER_TOLERANCE_MS}::float8 and ${ledgerMs} = e.old_ms
      returning s.key
    ), claimed as (
      update cronledger.schedule_state s set last_enqueued_slot = d.slot_at::timestamptz, updated_at = now()
      from due d
      where s.key = d.key and ${ledgerMs} = d.old_ms
      returning s.key
    ), ${jobInsertCtes(sql`
      select e.job_name, e.queue, e.payload::jsonb, e.priority, clock.now, e.max_attempts, d.idempotency_key, e.key, d.slot_at::timestamptz
      from claimed cl join due d on d.key = cl.key join entry e on e.key = cl.key cross join clock
      where not d.stale`)}
    select clock.now_ms, e.key, e.old_ms, d.slot_ms, d.stale, cl.key is not null as claimed, cr.ms as created_ms,
      rp.key is not null as repaired, i.id::float8 as job_id
    from clock cross join notified
    left join entry e on true
    left join due d on d.key = e.key
    left join claimed cl on cl.key = e.key
    left join created cr on cr.key = e.key
    left join repaired rp on rp.key = e.key
    left join inserted i on i.schedule_key = e.key`;
}

type PassResult = { -readonly [K in keyof Omit<TickReport, "now" | "nextFireAt" | "statements" | "attempts">]: TickReport[K] };

function emptyResult(): PassResult {
  return { enqueued: [], lostRace: [], skippedStale: [], quarantined: [], repaired: [], created: 0 };
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
): number {
  const nowMs = rows[0]?.now_ms ?? plan.exactMs ?? sentAtMs;
  if (plan.exactMs === null) context.clock.offsetMs = nowMs - sentAtMs;
  // The statement's own entries: one when a failed pass is retried entry by entry.
  if (entries.length > 0) horizons.delete(context.memo);
  const byKey = new Map(entries.map((entry) => [entry.ledgerKey, entry]));
  const { memo, logger } = context;
  const remember = (entry: ResolvedEntry, ledgerMs: number) => {
    const seen = memo.get(entry.ledgerKey);
    if (seen?.ledgerMs !== ledgerMs) memo.set(entry.ledgerKey, { ledgerMs, nextFireMs: nextFireAfter(entry, ledgerMs) });
  };
  for (const row of rows) {
    const entry = row.key === null ? undefined : byKey.get(row.key);
    if (entry === undefined) continue;
    if (row.created_ms !== null) {
      into.created += 1;
      remember(entry, row.created_ms);
    } else if (row.old_ms === null || (row.old_ms > nowMs + FUTURE_LEDGER_TOLERANCE_MS && !row.repaired)) {
      // Another replica created or repaired the row meanwhile: read it again next pass.
      memo.delete(entry.ledgerKey);
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
      memo.delete(entry.ledgerKey);
      upcoming.ms = Math.min(upcoming.ms, nextFireAfter(entry, row.slot_ms));
      into.lostRace.push(outcome(entry, row.slot_ms));
    } else {
      remember(entry, row.slot_ms);
      if (row.stale) into.skippedStale.push(outcome(entry, row.slot_ms));
      else into.enqueued.push({ ...outcome(entry, row.slot_ms), jobId: row.job_id });
    }
  }
  return nowMs;
}

/** Runs the statement for `entries` and takes in its rows; returns the clock it read. */
async function runStatement(context: TickContext, plan: Plan, entries: readonly ResolvedEntry[], into: PassResult, upcoming: { ms: number }): Promise<number> {
  const sentAtMs = Date.now();
  const rows = await query<PassRow>(context.database.db, passStatement(context, plan, entries));
  return absorb(context, plan, entries, rows, sentAtMs, into, upcoming);
}

/**
 * The whole plan in one statement; if that fails for a reason other than the
 * connection, entry by entry, so one bad entry cannot stop the others. Each
 * statement is its own transaction: no BEGIN/COMMIT around it, because
 * postgres.js 3.4.9 crashes the process (an uncaught TypeError, porsager/postgres#1208)
 * when a connection drops inside `begin()`, as it does when PostgreSQL
 * restarts. A statement whose client dies while it runs is aborted by the
 * server (`client_connection_check_interval`, see db/connection.ts) or
 * completes whole: never a claim without its job.
 */
async function runPass(context: TickContext, plan: Plan, into: PassResult, upcoming: { ms: number }): Promise<number> {
  try {
    return await inPhase("pass", undefined, () => runStatement(context, plan, plan.entries, into, upcoming));
  } catch (error) {
    const original = error instanceof PhaseError ? error.original : error;
    if (isTransientDatabaseError(original) || plan.entries.length === 0) throw error;
    context.logger.warn("tick statement failed; retrying entries one by one to isolate the failure", { error: redact(rootMessage(original)) });
  }
  let nowMs: number | undefined;
  for (const entry of plan.entries) {
    try {
      nowMs = await runStatement(context, plan, [entry], into, upcoming);
    } catch (error) {
      if (isTransientDatabaseError(error)) throw new PhaseError("enqueue", entry.identity, error);
      quarantine(context, plan, entry, error, into);
    }
  }
  return nowMs ?? plan.exactMs ?? (plan.lowMs + plan.highMs) / 2;
}

function quarantine(context: TickContext, plan: Plan, entry: ResolvedEntry, error: unknown, into: PassResult): void {
  const estimateMs = plan.exactMs ?? (plan.lowMs + plan.highMs) / 2;
  const dueSlot = candidateSlots(entry, plan.lowMs, plan.highMs).filter((slotMs) => fireTime(entry, slotMs) <= estimateMs).at(-1) ?? estimateMs;
  const quarantined = { ...outcome(entry, dueSlot), phase: "enqueue" as const, error: redact(rootMessage(error)) };
  context.logger.error("schedule entry quarantined: its slot is deferred to a later pass", {
    job: entry.jobName,
    identity: entry.identity,
    phase: quarantined.phase,
    slot: quarantined.slot.toISOString(),
    error: quarantined.error,
  });
  into.quarantined.push(quarantined);
  horizons.delete(context.memo);
  context.deferred.set(entry.ledgerKey, estimateMs + QUARANTINE_DEFERRAL_MS);
}

/** Earliest upcoming fire time: from the memo, lost races, and the end of each quarantine. */
function nextFireAt(context: TickContext, upcomingMs: number): Date | null {
  const kept = horizons.get(context.memo);
  let earliest = Number.POSITIVE_INFINITY;
  if (kept !== undefined && kept.entries === context.entries) {
    earliest = kept.earliestMs;
  } else {
    let known = 0;
    for (const entry of context.entries) {
      const seen = context.memo.get(entry.ledgerKey);
      if (seen === undefined) continue;
      known += 1;
      const deferredUntil = context.deferred.get(entry.ledgerKey) ?? Number.NEGATIVE_INFINITY;
      earliest = Math.min(earliest, Math.max(seen.nextFireMs, deferredUntil));
    }
    // An entry without a memo must be planned by every pass until it has one.
    if (known === context.entries.length) horizons.set(context.memo, { entries: context.entries, earliestMs: earliest });
  }
  earliest = Math.min(earliest, upcomingMs);
  return Number.isFinite(earliest) ? new Date(earliest) : null;
}

async function tickOnce(context: TickContext, options: TickOptions): Promise<Omit<TickReport, "statements" | "attempts">> {
  const result = emptyResult();
  const upcoming = { ms: Number.POSITIVE_INFINITY };
  let plan = planPass(context, options);
  let nowMs = await runPass(context, plan, result, upcoming);
  if (nowMs < plan.lowMs || nowMs > plan.highMs) {
    // The database clock was not where this process expected: plan again at the clock it read.
    plan = planPass(context, options, nowMs);
    nowMs = await runPass(context, plan, result, upcoming);
  }
  return { now: new Date(nowMs), ...result, nextFireAt: nextFireAt(context, upcoming.ms) };
}

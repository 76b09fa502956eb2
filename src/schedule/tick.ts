import { sql } from "drizzle-orm";
import { redact } from "../admin/redact.js";
import { query, type Database, type Executor } from "../db/connection.js";
import { isTransientDatabaseError, rootMessage } from "../db/transient.js";
import { CronledgerError } from "../errors.js";
import { insertedJobsCtes, type NewJobRow } from "../jobs/insert-jobs.js";
import type { Logger } from "../log.js";
import { slotIdempotencyKey } from "./identity.js";
import { jitterMs } from "./jitter.js";
import type { ResolvedEntry } from "./validate.js";

/** `enqueue` is the one statement that claims slots and inserts their jobs. */
export type TickPhase = "read" | "create" | "repair" | "enqueue";

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

/** How long a quarantined entry stays out of the batch before it is tried again. */
export const QUARANTINE_DEFERRAL_MS = 60_000;

export interface TickOptions {
  /** Evaluate schedules at this instant instead of the database clock (tests, replays). */
  readonly now?: Date;
}

/** Entries due within this margin of the estimated database time are read too, covering clock drift between passes. */
const CANDIDATE_MARGIN_MS = 2_000;
/** Ledger values further in the future than this are corrupt, not clock skew. */
export const FUTURE_LEDGER_TOLERANCE_MS = 5 * 60_000;
export const TICK_RETRIES = 3;
const RETRY_BACKOFF_MS = [100, 300, 900] as const;

interface LedgerRow {
  now_ms: number;
  key: string | null;
  ms: number | null;
}

interface Claim {
  readonly entry: ResolvedEntry;
  /** The ledger value read, as epoch ms: the guard compares the stored value converted the same way, so it is exact. */
  readonly oldMs: number;
  readonly slotMs: number;
  /** Fire time of the slot after this one: the memo's value once the claim succeeds. */
  readonly nextFireMs: number;
  readonly stale: boolean;
}

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
      const phaseError = error instanceof PhaseError ? error : new PhaseError("read", undefined, error);
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

/** The latest slot after the ledger value whose fire time has come, if any (DESIGN 6, step 2). */
function dueSlot(entry: ResolvedEntry, ledgerMs: number, nowMs: number): number | null {
  let slot = entry.calendar.latestMs(nowMs);
  if (slot === null || slot <= ledgerMs) return null;
  if (fireTime(entry, slot) > nowMs) {
    slot = entry.calendar.latestMs(slot - 1);
    if (slot === null || slot <= ledgerMs || fireTime(entry, slot) > nowMs) return null;
  }
  return slot;
}

/** Entries whose ledger rows this pass must read: unknown ones, and those whose next fire may have come. */
function candidates(context: TickContext, estimatedNowMs: number | undefined): readonly ResolvedEntry[] {
  if (estimatedNowMs === undefined) return context.entries;
  const horizon = estimatedNowMs + CANDIDATE_MARGIN_MS;
  return context.entries.filter((entry) => {
    const seen = context.memo.get(entry.ledgerKey);
    return seen === undefined || seen.nextFireMs <= horizon;
  });
}

const LEDGER_MS = sql`(extract(epoch from last_enqueued_slot) * 1000)::float8`;

async function readLedger(context: TickContext, wanted: readonly ResolvedEntry[]): Promise<LedgerRow[]> {
  const { database, entries, namespace } = context;
  // The whole namespace is cheaper to select than a long key list, so a full read filters by namespace.
  const filter =
    wanted.length === entries.length
      ? sql`namespace = ${namespace}`
      : sql`key = any(${sql.param(wanted.map((entry) => entry.ledgerKey))}::text[])`;
  const rows =
    wanted.length === 0
      ? sql`select (extract(epoch from now()) * 1000)::float8 as now_ms, null as key, null as ms`
      : sql`select (extract(epoch from now()) * 1000)::float8 as now_ms, s.key, s.ms
            from (select 1) as one
            left join (select key, ${LEDGER_MS} as ms from cronledger.schedule_state where ${filter}) as s on true`;
  return query<LedgerRow>(database.db, rows);
}

async function tickOnce(context: TickContext, options: TickOptions): Promise<Omit<TickReport, "statements" | "attempts">> {
  const { database, namespace, logger, memo } = context;
  const estimatedNowMs = options.now?.getTime() ?? (context.clock.offsetMs === undefined ? undefined : Date.now() + context.clock.offsetMs);
  const wanted = candidates(context, estimatedNowMs);
  const rows = await inPhase("read", undefined, () => readLedger(context, wanted));
  const databaseNowMs = rows[0]?.now_ms;
  if (databaseNowMs !== undefined) context.clock.offsetMs = databaseNowMs - Date.now();
  const nowMs = options.now?.getTime() ?? databaseNowMs ?? Date.now();
  const ledger = new Map<string, number>();
  for (const row of rows) {
    if (row.key !== null && row.ms !== null) ledger.set(row.key, row.ms);
  }

  const missing: { entry: ResolvedEntry; startMs: number }[] = [];
  const corrupt: { entry: ResolvedEntry; ms: number }[] = [];
  const claims: Claim[] = [];
  let nextFireMs = Number.POSITIVE_INFINITY;
  const wantedKeys = wanted.length === context.entries.length ? undefined : new Set(wanted.map((entry) => entry.ledgerKey));

  for (const entry of context.entries) {
    const seen = memo.get(entry.ledgerKey);
    if (wantedKeys !== undefined && !wantedKeys.has(entry.ledgerKey) && seen !== undefined) {
      nextFireMs = Math.min(nextFireMs, seen.nextFireMs);
      continue;
    }
    const ledgerMs = ledger.get(entry.ledgerKey);
    if (ledgerMs === undefined) {
      // A new entry never fires retroactively: its ledger starts at now. A row that vanished under
      // an entry this process knows (a prune during a rolling deploy) comes back at its last value.
      const startMs = seen?.ledgerMs ?? nowMs;
      const upcoming = nextFireAfter(entry, startMs);
      missing.push({ entry, startMs });
      memo.set(entry.ledgerKey, { ledgerMs: startMs, nextFireMs: upcoming });
      nextFireMs = Math.min(nextFireMs, upcoming);
      continue;
    }
    if (ledgerMs > nowMs + FUTURE_LEDGER_TOLERANCE_MS) {
      corrupt.push({ entry, ms: ledgerMs });
      nextFireMs = Math.min(nextFireMs, nextFireAfter(entry, nowMs));
      continue;
    }
    let upcoming = seen?.ledgerMs === ledgerMs ? seen.nextFireMs : undefined;
    if (upcoming === undefined) {
      upcoming = nextFireAfter(entry, ledgerMs);
      memo.set(entry.ledgerKey, { ledgerMs, nextFireMs: upcoming });
    }
    // Fire times grow with slots (jitter < gap), so nothing is due before the next one.
    if (upcoming > nowMs) {
      nextFireMs = Math.min(nextFireMs, upcoming);
      continue;
    }
    const slotMs = dueSlot(entry, ledgerMs, nowMs);
    if (slotMs === null) continue;
    const deferredUntil = context.deferred.get(entry.ledgerKey);
    if (deferredUntil !== undefined && nowMs < deferredUntil) continue;
    context.deferred.delete(entry.ledgerKey);
    const following = nextFireAfter(entry, slotMs);
    claims.push({ entry, oldMs: ledgerMs, slotMs, nextFireMs: following, stale: slotMs < nowMs - entry.catchUpWindowMs });
    nextFireMs = Math.min(nextFireMs, following);
  }

  const nowIso = new Date(nowMs).toISOString();
  let created = 0;
  if (missing.length > 0) {
    const inserted = await inPhase("create", undefined, () =>
      query<{ key: string }>(
        database.db,
        sql`insert into cronledger.schedule_state (key, namespace, job_name, last_enqueued_slot)
            select k, ${namespace}, j, s::timestamptz
            from unnest(
              ${sql.param(missing.map(({ entry }) => entry.ledgerKey))}::text[],
              ${sql.param(missing.map(({ entry }) => entry.jobName))}::text[],
              ${sql.param(missing.map(({ startMs }) => new Date(startMs).toISOString()))}::text[]
            ) as t(k, j, s)
            on conflict (key) do nothing
            returning key`,
      ),
    );
    created = inserted.length;
    // A row another replica created first holds a value this process has not read.
    const createdKeys = new Set(inserted.map((row) => row.key));
    for (const { entry } of missing) if (!createdKeys.has(entry.ledgerKey)) memo.delete(entry.ledgerKey);
  }

  const repaired: TickReport["repaired"][number][] = [];
  if (corrupt.length > 0) {
    const fixed = await inPhase("repair", undefined, () =>
      query<{ key: string }>(
        database.db,
        sql`update cronledger.schedule_state s set last_enqueued_slot = ${nowIso}::timestamptz, updated_at = now()
            from unnest(${sql.param(corrupt.map((c) => c.entry.ledgerKey))}::text[], ${sql.param(corrupt.map((c) => c.ms))}::float8[]) as t(k, old)
            where s.key = t.k and (extract(epoch from s.last_enqueued_slot) * 1000)::float8 = t.old
            returning s.key`,
      ),
    );
    const fixedKeys = new Set(fixed.map((row) => row.key));
    for (const { entry, ms } of corrupt) {
      if (!fixedKeys.has(entry.ledgerKey)) continue;
      logger.warn("ledger value was in the future; repaired it to now so the entry keeps firing", {
        identity: entry.identity,
        from: new Date(ms).toISOString(),
        to: nowIso,
      });
      repaired.push({ identity: entry.identity, key: entry.ledgerKey, jobName: entry.jobName, from: new Date(ms), to: new Date(nowMs) });
      memo.set(entry.ledgerKey, { ledgerMs: nowMs, nextFireMs: nextFireAfter(entry, nowMs) });
    }
  }

  const result = claims.length > 0 ? await claimAndEnqueue(context, claims, nowIso) : emptyClaimResult();
  return {
    now: new Date(nowMs),
    ...result,
    repaired,
    created,
    nextFireAt: Number.isFinite(nextFireMs) ? new Date(nextFireMs) : null,
  };
}

type ClaimResult = Pick<TickReport, "enqueued" | "lostRace" | "skippedStale" | "quarantined">;

function emptyClaimResult(): ClaimResult {
  return { enqueued: [], lostRace: [], skippedStale: [], quarantined: [] };
}

function jobRow(claim: Claim, namespace: string, nowIso: string): NewJobRow {
  const { entry, slotMs } = claim;
  return {
    jobName: entry.jobName,
    queue: entry.queue,
    payloadJson: entry.payloadJson,
    priority: entry.priority,
    runAt: nowIso,
    maxAttempts: entry.job.retry.maxAttempts,
    idempotencyKey: slotIdempotencyKey(namespace, entry.identity, slotMs),
    scheduleKey: entry.ledgerKey,
    scheduledFor: new Date(slotMs).toISOString(),
  };
}

/**
 * Claims a batch of slots and inserts their jobs in one statement: the
 * ledger update is guarded by the values read, and only the slots it
 * actually claimed (and that are not stale) get a job.
 */
async function claimBatch(executor: Executor, claims: readonly Claim[], namespace: string, nowIso: string) {
  const fresh = claims.filter((claim) => !claim.stale);
  const rows = await inPhase("enqueue", claims.length === 1 ? claims[0]?.entry.identity : undefined, () =>
    query<{ key: string; job_id: number | null }>(
      executor,
      sql`with claimed as (
            update cronledger.schedule_state s set last_enqueued_slot = t.slot::timestamptz, updated_at = now()
            from unnest(
              ${sql.param(claims.map((c) => c.entry.ledgerKey))}::text[],
              ${sql.param(claims.map((c) => c.oldMs))}::float8[],
              ${sql.param(claims.map((c) => new Date(c.slotMs).toISOString()))}::text[]
            ) as t(key, old, slot)
            where s.key = t.key and (extract(epoch from s.last_enqueued_slot) * 1000)::float8 = t.old
            returning s.key
          ), ${insertedJobsCtes(
            fresh.map((claim) => jobRow(claim, namespace, nowIso)),
            sql`claimed`,
          )}
          select claimed.key, inserted.id::float8 as job_id
          from claimed left join inserted on inserted.schedule_key = claimed.key cross join notified`,
    ),
  );
  const claimedKeys = new Set(rows.map((row) => row.key));
  const jobIds = new Map<string, number>();
  for (const row of rows) if (row.job_id !== null) jobIds.set(row.key, row.job_id);
  return { claimedKeys, jobIds };
}

function classify(claims: readonly Claim[], claimedKeys: Set<string>, jobIds: Map<string, number>, into: ClaimResult, memo: FireMemo): void {
  for (const claim of claims) {
    const base = outcome(claim.entry, claim.slotMs);
    if (!claimedKeys.has(claim.entry.ledgerKey)) {
      // Another replica moved the ledger to a value this process has not read.
      memo.delete(claim.entry.ledgerKey);
      into.lostRace.push(base);
      continue;
    }
    memo.set(claim.entry.ledgerKey, { ledgerMs: claim.slotMs, nextFireMs: claim.nextFireMs });
    if (claim.stale) into.skippedStale.push(base);
    else into.enqueued.push({ ...base, jobId: jobIds.get(claim.entry.ledgerKey) ?? null });
  }
}

async function claimAndEnqueue(context: TickContext, claims: readonly Claim[], nowIso: string): Promise<ClaimResult> {
  const { database, namespace, logger } = context;
  const result = emptyClaimResult();
  try {
    const { claimedKeys, jobIds } = await database.db.transaction((tx) => claimBatch(tx, claims, namespace, nowIso));
    classify(claims, claimedKeys, jobIds, result, context.memo);
    return result;
  } catch (error) {
    const original = error instanceof PhaseError ? error.original : error;
    if (isTransientDatabaseError(original)) throw error;
    logger.warn("batch claim failed; retrying entries one by one to isolate the failure", { error: redact(rootMessage(original)) });
  }

  // Isolation: each entry under its own savepoint, so one bad entry cannot stop the others.
  await inPhase("enqueue", undefined, () =>
    database.db.transaction(async (tx) => {
      for (const claim of claims) {
        try {
          const { claimedKeys, jobIds } = await tx.transaction((savepoint) => claimBatch(savepoint, [claim], namespace, nowIso));
          classify([claim], claimedKeys, jobIds, result, context.memo);
        } catch (error) {
          const phaseError = error instanceof PhaseError ? error : new PhaseError("enqueue", claim.entry.identity, error);
          if (isTransientDatabaseError(phaseError.original)) throw phaseError;
          const quarantined = { ...outcome(claim.entry, claim.slotMs), phase: phaseError.phase, error: redact(phaseError.message) };
          logger.error("schedule entry quarantined: its slot is deferred to the next pass", {
            job: claim.entry.jobName,
            identity: claim.entry.identity,
            phase: phaseError.phase,
            slot: quarantined.slot.toISOString(),
            error: quarantined.error,
          });
          result.quarantined.push(quarantined);
          context.deferred.set(claim.entry.ledgerKey, Date.parse(nowIso) + QUARANTINE_DEFERRAL_MS);
        }
      }
    }),
  );
  return result;
}

import { sql } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import { scheduleLastRuns, scheduleState, scheduleVersions } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { array, clock, epochMs, milliseconds, name } from "./fragments.js";

/**
 * The ledger's rows outside the pass (src/db/sql/ledger.ts): an entry's
 * quarantine, written when its statement failed; an operator's pause,
 * resume and quarantine clear; the rows another session holds locked, for
 * the status; the prune of the rows no process evaluates any more.
 */

/** `schedule_state` as `s`. */
const s = alias(scheduleState, "s");

export interface QuarantineInput {
  readonly namespace: string;
  readonly key: string;
  readonly jobName: string;
  /** The pass's clock: `tick({ now })`'s instant, or null for the database clock. */
  readonly exactNow: Date | null;
  /** For a row that vanished: the ledger value the process last saw (else the clock). */
  readonly knownLedgerMs: number | null;
  readonly deferralMs: number;
  /** Already redacted and bounded. */
  readonly reason: string;
}

/**
 * Records in the entry's ledger row that its statement failed: no pass (of
 * any replica) claims it before `quarantined_until`. A quarantine that is
 * still running keeps its instant, so replicas failing the same entry at
 * the same time all retry it together; every failure counts. A missing row
 * is created (at the value the process last saw, else now). Returns the
 * instant and the count stored.
 */
export async function quarantineEntry(executor: Executor, input: QuarantineInput): Promise<{ until_ms: number; count: number } | undefined> {
  const now = clock(input.exactNow);
  const start = input.knownLedgerMs === null ? now : sql`${new Date(input.knownLedgerMs).toISOString()}::timestamptz`;
  const [row] = await query<{ until_ms: number; count: number }>(
    executor,
    sql`insert into ${scheduleState} as s (${name(scheduleState.key)}, ${name(scheduleState.namespace)}, ${name(scheduleState.jobName)},
          ${name(scheduleState.lastEnqueuedSlot)}, ${name(scheduleState.quarantinedUntil)}, ${name(scheduleState.quarantineReason)},
          ${name(scheduleState.quarantineCount)}, ${name(scheduleState.quarantinedSince)})
        values (${input.key}, ${input.namespace}, ${input.jobName}, ${start}, ${now} + ${milliseconds(input.deferralMs)}, ${input.reason}, 1, ${now})
        on conflict (${name(scheduleState.key)}) do update set
          ${name(scheduleState.quarantinedUntil)} = case when ${s.quarantinedUntil} > ${now} then ${s.quarantinedUntil} else excluded.${name(scheduleState.quarantinedUntil)} end,
          ${name(scheduleState.quarantineReason)} = excluded.${name(scheduleState.quarantineReason)},
          ${name(scheduleState.quarantineCount)} = ${s.quarantineCount} + 1,
          ${name(scheduleState.quarantinedSince)} = coalesce(${s.quarantinedSince}, excluded.${name(scheduleState.quarantinedSince)}),
          ${name(scheduleState.updatedAt)} = now()
        returning ${epochMs(sql`${s.quarantinedUntil}`)} as until_ms, ${s.quarantineCount} as count`,
  );
  return row;
}

export interface PauseInput {
  readonly namespace: string;
  readonly key: string;
  readonly jobName: string;
  /** Already bounded. */
  readonly by: string;
  /** Already redacted and bounded; null for none. */
  readonly note: string | null;
}

export interface PauseRow {
  paused_at_ms: number;
  paused_by: string;
  paused_note: string | null;
  /** False when the entry was paused already (the note and who are replaced, the instant kept). */
  changed: boolean;
}

/**
 * Pauses an entry in its ledger row: every replica's pass, now and after
 * any restart or deploy that keeps the entry's identity, records its slots
 * as skipped (src/db/sql/slot-policy.ts). A row no pass has created yet is
 * created at now, as a pass would. Pausing a paused entry keeps its instant
 * and replaces who and the note. `updated_at` is left alone: it says when a
 * pass last handled the row.
 */
export async function pauseEntry(executor: Executor, input: PauseInput): Promise<PauseRow> {
  const [row] = await query<PauseRow>(
    executor,
    sql`insert into ${scheduleState} as s (${name(scheduleState.key)}, ${name(scheduleState.namespace)}, ${name(scheduleState.jobName)},
          ${name(scheduleState.lastEnqueuedSlot)}, ${name(scheduleState.pausedAt)}, ${name(scheduleState.pausedBy)}, ${name(scheduleState.pausedNote)})
        values (${input.key}, ${input.namespace}, ${input.jobName}, now(), now(), ${input.by}, ${input.note})
        on conflict (${name(scheduleState.key)}) do update set
          ${name(scheduleState.pausedAt)} = coalesce(${s.pausedAt}, excluded.${name(scheduleState.pausedAt)}),
          ${name(scheduleState.pausedBy)} = excluded.${name(scheduleState.pausedBy)},
          ${name(scheduleState.pausedNote)} = excluded.${name(scheduleState.pausedNote)}
        returning ${epochMs(sql`${s.pausedAt}`)} as paused_at_ms, ${s.pausedBy} as paused_by, ${s.pausedNote} as paused_note,
          ${s.pausedAt} = now() as changed`,
  );
  if (row === undefined) throw new Error("cronledger: pausing an entry returned no row");
  return row;
}

/**
 * Resumes a paused entry: clears the pause, nothing else. Its ledger moved
 * with every slot recorded as skipped, so the next pass fires the next slot
 * as usual, never the paused ones. Returns the pause it cleared; undefined
 * when the entry was not paused (or has no ledger row).
 */
export async function resumeEntry(
  executor: Executor,
  key: string,
): Promise<{ paused_at_ms: number; paused_by: string | null; paused_note: string | null } | undefined> {
  const [row] = await query<{ paused_at_ms: number; paused_by: string | null; paused_note: string | null }>(
    executor,
    sql`update ${scheduleState} as s set ${name(scheduleState.pausedAt)} = null, ${name(scheduleState.pausedBy)} = null, ${name(scheduleState.pausedNote)} = null
        from (select ${scheduleState.key} as key, ${scheduleState.pausedAt} as paused_at, ${scheduleState.pausedBy} as paused_by, ${scheduleState.pausedNote} as paused_note
              from ${scheduleState} where ${scheduleState.key} = ${key} for update) as before
        where ${s.key} = before.key and before.paused_at is not null
        returning ${epochMs(sql`before.paused_at`)} as paused_at_ms, before.paused_by, before.paused_note`,
  );
  return row;
}

/**
 * Clears an entry's quarantine (an operator's doing, once its cause is
 * fixed): the next pass of every replica claims its due slot. Returns what
 * the row held, or undefined when the namespace has no such row.
 */
export async function clearQuarantine(
  executor: Executor,
  namespace: string,
  key: string,
): Promise<{ key: string; job_name: string; was_quarantined: boolean } | undefined> {
  const [row] = await query<{ key: string; job_name: string; was_quarantined: boolean }>(
    executor,
    sql`update ${scheduleState} as s set ${name(scheduleState.quarantinedUntil)} = null, ${name(scheduleState.quarantineReason)} = null,
          ${name(scheduleState.quarantineCount)} = 0, ${name(scheduleState.quarantinedSince)} = null
        from (select ${scheduleState.key} as key, ${scheduleState.quarantinedUntil} is not null as was from ${scheduleState}
              where ${scheduleState.namespace} = ${namespace} and ${scheduleState.key} = ${key} for update) as old
        where ${s.key} = old.key
        returning ${s.key} as key, ${s.jobName} as job_name, old.was as was_quarantined`,
  );
  return row;
}

/**
 * Of these ledger keys, the rows another session holds locked (an open
 * transaction that locked or updated them): what a late entry's status says
 * instead of "no scheduler is ticking". Read without locking anything, so a
 * role that may only SELECT can ask (status, the page, /metrics): a row's
 * `xmax` names the last transaction that locked or updated it, and a
 * transaction still running holds the lock on its own id in pg_locks; one
 * that ended, committed or not, holds nothing. A row locked by several
 * sessions at once carries a multixact id in `xmax` instead, which this
 * misses: the pass locks rows FOR UPDATE, one session at a time.
 */
export async function heldLedgerKeys(executor: Executor, keys: readonly string[]): Promise<string[]> {
  if (keys.length === 0) return [];
  const rows = await query<{ key: string }>(
    executor,
    sql`select ${s.key} as key from ${scheduleState} as s
        where ${s.key} = any(${array(keys, "text")}) and s.xmax <> '0'::xid
          and exists (select 1 from pg_locks l
                      where l.locktype = 'transactionid' and l.transactionid = s.xmax and l.granted and l.pid <> pg_backend_pid())`,
  );
  return rows.map((row) => row.key);
}

export interface LedgerPrune {
  readonly namespace: string;
  /** The pruning process's own ledger keys: live whatever the registry says. */
  readonly keep: readonly string[];
  readonly graceMs: number;
  /** Judge the grace at this instant instead of the database clock (tests). */
  readonly now?: Date | undefined;
}

/**
 * Deletes the ledger rows of a namespace that no process has evaluated for
 * the grace: rows no pass has written (`updated_at`) within it, whose key no
 * schedule reported within it (schedule_versions) and that are not the
 * caller's own. Rows another session holds are left for the next prune.
 * Their entries' last runs (schedule_last_runs) go with them, and versions
 * not reported within the grace too. Returns the ledger rows deleted.
 */
export async function pruneLedgerRows(executor: Executor, prune: LedgerPrune): Promise<number> {
  const cutoff = sql`${clock(prune.now)} - ${milliseconds(prune.graceMs)}`;
  const [row] = await query<{ n: number }>(
    executor,
    sql`with reported as (
          select unnest(${scheduleVersions.ledgerKeys}) as key from ${scheduleVersions}
          where ${scheduleVersions.namespace} = ${prune.namespace} and ${scheduleVersions.reportedAt} >= ${cutoff}
          union
          select unnest(${array(prune.keep, "text")})
        ), doomed as (
          select ${s.key} as key from ${scheduleState} as s
          where ${s.namespace} = ${prune.namespace} and ${s.updatedAt} < ${cutoff}
            and not exists (select 1 from reported r where r.key = ${s.key})
          for update skip locked
        ), deleted as (
          delete from ${scheduleState} as s using doomed where ${s.key} = doomed.key returning ${s.key} as key
        ), last_runs as (
          delete from ${scheduleLastRuns} where ${scheduleLastRuns.scheduleKey} in (select key from deleted)
        ), forgotten as (
          delete from ${scheduleVersions} where ${scheduleVersions.namespace} = ${prune.namespace} and ${scheduleVersions.reportedAt} < ${cutoff}
        )
        select count(*)::int as n from deleted`,
  );
  return row?.n ?? 0;
}

/** The database clock, in epoch milliseconds. */
export async function databaseNowMs(executor: Executor): Promise<number> {
  const [row] = await query<{ now_ms: number }>(executor, sql`select ${epochMs(sql`now()`)} as now_ms`);
  return row?.now_ms ?? Date.now();
}

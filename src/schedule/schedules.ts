import type { Database } from "../db/connection.js";
import { asExecutor, type Executor } from "../db/executor.js";
import { onLedgerDatabase } from "../db/transaction-database.js";
import {
  countDynamicOrphans,
  dynamicCounts,
  foldDynamicCounts,
  getDynamic,
  listDynamic,
  removeDynamic,
  upsertDynamic,
  type DynamicCounts,
  type DynamicEntryState,
} from "../db/sql/dynamic.js";
import type { UpsertOutcome } from "../schema.js";
import type { OverlapPolicy } from "../schema.js";
import { InvalidArgumentError } from "../errors.js";
import type { JobDefinition } from "../jobs/define-job.js";
import { dynamicLedgerKey, dynamicLedgerNamespace, DYNAMIC_KEY_PATTERN, resolveDynamicEntries, takenEntry, type DynamicEntryInput } from "./dynamic-entry.js";
import type { ResolvedEntry } from "./validate.js";

/**
 * Schedules as data, `ledger.schedules`: the entries an application creates,
 * changes and removes at runtime, each in its own transaction when it gives
 * one (`{ db: tx }`, the same executors as `enqueue`). Validation runs before
 * anything is written (src/schedule/dynamic-entry.ts); the statements are
 * src/db/sql/dynamic.ts; the scheduler's pass fires them
 * (src/schedule/tick.ts, runDynamic).
 */

/** Where a write goes: the application's drizzle database or transaction, or cronledger's own. */
export interface ScheduleWriteOptions {
  readonly db?: Executor;
}

/** An upsert's options: where it goes, and (tests, replays, as `tick({ now })`) the instant it is made at instead of the database clock. */
export interface ScheduleUpsertOptions extends ScheduleWriteOptions {
  readonly now?: Date;
}

/** A stored dynamic entry with its ledger state and last run. */
export interface DynamicScheduleEntry {
  readonly key: string;
  readonly jobName: string;
  /** The canonical cron. */
  readonly cron: string;
  readonly timezone: string;
  readonly payload: unknown;
  readonly overlap: OverlapPolicy;
  readonly jitterMs: number;
  readonly catchUpWindowMs: number;
  readonly queue: string;
  readonly priority: number;
  readonly maxAttempts: number;
  /** When its next slot fires (a pass's lease while one holds it); null: never again. */
  readonly nextFireAt: Date | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  /** The last slot the ledger handled. */
  readonly lastSlot: Date | null;
  readonly ledgerKey: string;
  readonly paused: { readonly at: Date; readonly by: string | null; readonly note: string | null } | null;
  readonly quarantinedUntil: Date | null;
  readonly lastRun: { readonly status: string; readonly slot: Date | null; readonly finishedAt: Date | null } | null;
}

/** A stored entry's state, as the operators' surfaces show it: paused and quarantined as its ledger row says, finished when no slot is ahead. */
export type DynamicState = "active" | "paused" | "quarantined" | "finished";

export function dynamicEntryState(entry: DynamicScheduleEntry): DynamicState {
  if (entry.paused !== null) return "paused";
  if (entry.quarantinedUntil !== null) return "quarantined";
  return entry.nextFireAt === null ? "finished" : "active";
}

/** One page of entries, in key order; `next` is the cursor of the following page (`after`), null on the last. */
export interface DynamicSchedulePage {
  readonly entries: readonly DynamicScheduleEntry[];
  readonly next: string | null;
}

export interface ScheduleListOptions {
  /** Only keys that start with it, e.g. `tenant:42:`. */
  readonly prefix?: string;
  /** The previous page's `next`. */
  readonly after?: string;
  /** 1-1000; default 100. */
  readonly limit?: number;
}

export type { DynamicCounts, DynamicEntryInput, UpsertOutcome };

export const DEFAULT_PAGE_SIZE = 100;
const MAX_PAGE_SIZE = 1_000;

export interface SchedulesDependencies {
  readonly database: Database;
  readonly namespace: string;
  /** The jobs this process knows (a name not among them is refused); empty: names are not checked. */
  readonly jobs: readonly JobDefinition[];
  /** The static entries, whose keys and identities a dynamic key may not take. */
  readonly staticEntries: readonly ResolvedEntry[];
  readonly maxPayloadBytes: number;
  readonly catchUpWindowMs?: number | undefined;
  readonly overlap?: OverlapPolicy | undefined;
  /** The schema check before the first statement (on the executor a write goes to). */
  readonly ready: (executor?: Executor) => Promise<void>;
}

export class Schedules {
  private readonly ledgerNamespace: string;

  constructor(private readonly deps: SchedulesDependencies) {
    this.ledgerNamespace = dynamicLedgerNamespace(deps.namespace);
  }

  /**
   * Creates the entry, or changes the one with its key; nothing is written
   * for an entry unchanged. A new entry never fires a slot before its
   * commit; a retime (cron, zone or jitter) fires no slot twice and none
   * before the switch. Throws a ScheduleEntryError (codes and fields) and
   * writes nothing when the entry is invalid.
   */
  async upsert(entry: DynamicEntryInput, options: ScheduleUpsertOptions = {}): Promise<{ key: string; outcome: UpsertOutcome }> {
    const [result] = await this.upsertMany([entry], options);
    return result!;
  }

  /** Many entries in one statement (one transaction with `db`): all are validated first, and an invalid one writes none. */
  async upsertMany(entries: readonly DynamicEntryInput[], options: ScheduleUpsertOptions = {}): Promise<{ key: string; outcome: UpsertOutcome }[]> {
    const { deps } = this;
    const rows = resolveDynamicEntries(
      entries,
      {
        namespace: deps.namespace,
        jobs: deps.jobs,
        staticEntries: deps.staticEntries,
        maxPayloadBytes: deps.maxPayloadBytes,
        ...(deps.catchUpWindowMs === undefined ? {} : { catchUpWindowMs: deps.catchUpWindowMs }),
        ...(deps.overlap === undefined ? {} : { overlap: deps.overlap }),
      },
      options.now?.getTime() ?? Date.now(),
      options.now === undefined ? undefined : 0,
    );
    const executor = this.executor(options.db);
    await deps.ready(executor);
    return onLedgerDatabase(deps.database, executor, () =>
      upsertDynamic(executor, { namespace: deps.namespace, ledgerNamespace: this.ledgerNamespace, now: options.now ?? null }, rows),
    );
  }

  /**
   * Removes the entry: from the commit on, no pass fires it (a removal
   * rolled back keeps it). Its queued or running job is left to finish.
   * False when there was no such entry.
   */
  async remove(key: string, options: ScheduleWriteOptions = {}): Promise<boolean> {
    return (await this.removeMany([key], options)).length === 1;
  }

  /** Removes these entries in one statement; returns the keys that existed. */
  async removeMany(keys: readonly string[], options: ScheduleWriteOptions = {}): Promise<string[]> {
    for (const key of keys) this.checkKey(key);
    const executor = this.executor(options.db);
    await this.deps.ready(executor);
    return onLedgerDatabase(this.deps.database, executor, () =>
      removeDynamic(
        executor,
        this.deps.namespace,
        keys.map((key) => ({ key, ledgerKey: dynamicLedgerKey(this.deps.namespace, key) })),
      ),
    );
  }

  /** The entry with this key, or null. */
  async get(key: string): Promise<DynamicScheduleEntry | null> {
    this.checkKey(key);
    await this.deps.ready();
    const row = await getDynamic(this.deps.database.db, this.deps.namespace, this.ledgerNamespace, key);
    return row === undefined ? null : this.toEntry(row);
  }

  /** A page of entries in key order, optionally those whose key starts with `prefix`; keyset-paged (`after`: the previous page's `next`). */
  async list(options: ScheduleListOptions = {}): Promise<DynamicSchedulePage> {
    const limit = options.limit ?? DEFAULT_PAGE_SIZE;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE) throw new InvalidArgumentError(`limit must be an integer from 1 to ${MAX_PAGE_SIZE}; got ${String(limit)}.`);
    const prefix = options.prefix ?? "";
    if (prefix !== "" && !/^[A-Za-z0-9._:/@+=-]*$/.test(prefix)) throw new InvalidArgumentError(`prefix may hold only the characters of a key (letters, digits and . _ : - / @ + =); got ${JSON.stringify(prefix)}.`);
    await this.deps.ready();
    const rows = await listDynamic(this.deps.database.db, this.deps.namespace, this.ledgerNamespace, { prefix, after: options.after ?? null, limit });
    return { entries: rows.map((row) => this.toEntry(row)), next: rows.length === limit ? rows[rows.length - 1]!.key : null };
  }

  /** How many entries are stored, due, paused, quarantined and finished (never firing again): one statement over counter rows and indexes, whatever is stored. */
  async counts(): Promise<DynamicCounts> {
    await this.deps.ready();
    return dynamicCounts(this.deps.database.db, this.deps.namespace, this.ledgerNamespace);
  }

  /** Folds the counter rows every writing backend added into one per namespace (the prune chore). */
  async foldCounts(): Promise<void> {
    await foldDynamicCounts(this.deps.database.db);
  }

  /** The stored entries whose job is not in `jobNames` (what a deploy with those jobs would orphan), by job. */
  async orphans(jobNames: readonly string[]): Promise<{ total: number; byJob: Record<string, number> }> {
    await this.deps.ready();
    return countDynamicOrphans(this.deps.database.db, this.deps.namespace, jobNames);
  }

  /**
   * The stored entry named by its key or its ledger key, as a pass would
   * fire it (pause, resume, run now and backfill address it as any entry);
   * undefined when there is none.
   */
  async resolved(name: string): Promise<ResolvedEntry | undefined> {
    const prefix = `${this.ledgerNamespace}|`;
    const key = name.startsWith(prefix) ? name.slice(prefix.length) : name;
    if (!DYNAMIC_KEY_PATTERN.test(key)) return undefined;
    const row = await getDynamic(this.deps.database.db, this.deps.namespace, this.ledgerNamespace, key);
    if (row === undefined) return undefined;
    return takenEntry({ ...row, payload: JSON.stringify(row.payload) }, this.deps.namespace, 0);
  }

  /** The ledger key of the entry with this key (what the operators' actions address). */
  ledgerKey(key: string): string {
    return dynamicLedgerKey(this.deps.namespace, key);
  }

  private checkKey(key: string): void {
    if (typeof key !== "string" || !DYNAMIC_KEY_PATTERN.test(key)) throw new InvalidArgumentError(`key must be 1-200 letters, digits and . _ : - / @ + =; got ${JSON.stringify(key)}.`);
  }

  private executor(db: Executor | undefined): Executor {
    return db === undefined ? this.deps.database.db : asExecutor(db, "The `db` option");
  }

  private toEntry(row: DynamicEntryState): DynamicScheduleEntry {
    const date = (ms: number | null) => (ms === null ? null : new Date(ms));
    return {
      key: row.key,
      jobName: row.job_name,
      cron: row.cron,
      timezone: row.timezone,
      payload: row.payload,
      overlap: row.overlap as OverlapPolicy,
      jitterMs: row.jitter_ms,
      catchUpWindowMs: row.catch_up_window_ms,
      queue: row.queue,
      priority: row.priority,
      maxAttempts: row.max_attempts,
      nextFireAt: date(row.next_fire_ms),
      createdAt: new Date(row.created_ms),
      updatedAt: new Date(row.updated_ms),
      lastSlot: date(row.slot_ms),
      ledgerKey: dynamicLedgerKey(this.deps.namespace, row.key),
      paused: row.paused_at_ms === null ? null : { at: new Date(row.paused_at_ms), by: row.paused_by, note: row.paused_note },
      quarantinedUntil: date(row.quarantined_until_ms),
      lastRun: row.last_run_status === null ? null : { status: row.last_run_status, slot: date(row.last_run_slot_ms), finishedAt: date(row.last_run_finished_ms) },
    };
  }
}

import type { DynamicCounts, DynamicScheduleEntry, DynamicSchedulePage } from "../schedule/schedules.js";
import { iso, WIRE_VERSION, type Versioned } from "./version.js";

/** A dynamic entry (`ledger.schedules`) as the wire carries it: inside a page, or alone (`cronledger schedules get --json`). */
export interface DynamicEntryDocument {
  readonly key: string;
  readonly ledger_key: string;
  readonly job: string;
  readonly cron: string;
  readonly timezone: string;
  readonly payload: unknown;
  readonly overlap: string;
  readonly jitter_ms: number;
  readonly catch_up_window_ms: number;
  readonly queue: string;
  readonly priority: number;
  readonly max_attempts: number;
  readonly next_fire_at: string | null;
  readonly last_slot: string | null;
  readonly created_at: string;
  readonly updated_at: string;
  readonly pause: { readonly at: string; readonly by: string | null; readonly note: string | null } | null;
  readonly quarantined_until: string | null;
  readonly last_run: { readonly status: string; readonly slot: string | null; readonly finished_at: string | null } | null;
}

export function dynamicEntryDocument(entry: DynamicScheduleEntry): DynamicEntryDocument {
  return {
    key: entry.key,
    ledger_key: entry.ledgerKey,
    job: entry.jobName,
    cron: entry.cron,
    timezone: entry.timezone,
    payload: entry.payload,
    overlap: entry.overlap,
    jitter_ms: entry.jitterMs,
    catch_up_window_ms: entry.catchUpWindowMs,
    queue: entry.queue,
    priority: entry.priority,
    max_attempts: entry.maxAttempts,
    next_fire_at: iso(entry.nextFireAt),
    last_slot: iso(entry.lastSlot),
    created_at: entry.createdAt.toISOString(),
    updated_at: entry.updatedAt.toISOString(),
    pause: entry.paused === null ? null : { at: entry.paused.at.toISOString(), by: entry.paused.by, note: entry.paused.note },
    quarantined_until: iso(entry.quarantinedUntil),
    last_run: entry.lastRun === null ? null : { status: entry.lastRun.status, slot: iso(entry.lastRun.slot), finished_at: iso(entry.lastRun.finishedAt) },
  };
}

/** `cronledger schedules list --json`: one page of dynamic entries, the cursor of the next, and the counts by state. */
export interface DynamicSchedulesDocument extends Versioned {
  readonly prefix: string;
  readonly entries: readonly DynamicEntryDocument[];
  /** Pass it as `--after` for the next page; null on the last. */
  readonly next: string | null;
  readonly counts: DynamicCounts;
}

export function dynamicSchedulesDocument(prefix: string, page: DynamicSchedulePage, counts: DynamicCounts): DynamicSchedulesDocument {
  return { version: WIRE_VERSION, prefix, entries: page.entries.map(dynamicEntryDocument), next: page.next, counts };
}

/** `cronledger schedules get|remove --json`: the entry (null when there is none), and for a removal whether it existed. */
export interface DynamicEntryResultDocument extends Versioned {
  readonly key: string;
  readonly entry: DynamicEntryDocument | null;
  readonly removed?: boolean;
}

export function dynamicEntryResultDocument(key: string, entry: DynamicScheduleEntry | null, removed?: boolean): DynamicEntryResultDocument {
  return { version: WIRE_VERSION, key, entry: entry === null ? null : dynamicEntryDocument(entry), ...(removed === undefined ? {} : { removed }) };
}

import type { BackfillResult } from "../schedule/backfill.js";
import { iso, WIRE_VERSION, type Versioned } from "./version.js";

/** One slot of a backfill: when, its wall time in the entry's zone, a DST note, and what became of it. */
export interface BackfillSlotDocument {
  readonly slot: string;
  readonly wall_time: string;
  readonly dst_note: string | null;
  /** enqueued, would_enqueue (dry run), exists (it has a job already), ahead (after the ledger: the ticker's). */
  readonly outcome: BackfillResult["slots"][number]["outcome"];
  readonly job_id: number | null;
}

/** `cronledger backfill --json` (with or without `--dry-run`). */
export interface BackfillDocument extends Versioned {
  readonly key: string;
  readonly entry_key: string | null;
  readonly job: string;
  readonly from: string;
  readonly to: string;
  readonly dry_run: boolean;
  readonly ledger_at: string | null;
  readonly enqueued: number;
  readonly existing: number;
  readonly ahead: number;
  /** Slots of the range left out by --max / --latest. */
  readonly omitted: number;
  readonly slots: readonly BackfillSlotDocument[];
}

export function backfillDocument(result: BackfillResult): BackfillDocument {
  return {
    version: WIRE_VERSION,
    key: result.key,
    entry_key: result.entryKey,
    job: result.jobName,
    from: result.from.toISOString(),
    to: result.to.toISOString(),
    dry_run: result.dryRun,
    ledger_at: iso(result.ledgerAt),
    enqueued: result.enqueued,
    existing: result.existing,
    ahead: result.ahead,
    omitted: result.omitted,
    slots: result.slots.map((slot) => ({
      slot: slot.slot.toISOString(),
      wall_time: slot.wallTime,
      dst_note: slot.dstNote,
      outcome: slot.outcome,
      job_id: slot.jobId,
    })),
  };
}

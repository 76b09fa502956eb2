import type { EntryPauseResult } from "../operators/operations.js";
import { iso, WIRE_VERSION, type Versioned } from "./version.js";

/** `POST /admin/scheduler/entries/pause` and `.../resume`, `cronledger pause|resume --json`: the entry's pause after the request. */
export interface EntryPauseDocument extends Versioned {
  readonly identity: string;
  readonly key: string;
  readonly job: string;
  /** Whether the entry is paused now. */
  readonly paused: boolean;
  /** False when nothing changed: a pause of a paused entry (only who and the note were replaced), a resume of a running one. */
  readonly changed: boolean;
  /** The pause set (pause) or cleared (resume; null if there was none). */
  readonly paused_at: string | null;
  readonly paused_by: string | null;
  readonly note: string | null;
}

export function entryPauseDocument(result: EntryPauseResult): EntryPauseDocument {
  return {
    version: WIRE_VERSION,
    identity: result.identity,
    key: result.key,
    job: result.jobName,
    paused: result.paused,
    changed: result.changed,
    paused_at: iso(result.pausedAt),
    paused_by: result.pausedBy,
    note: result.note,
  };
}

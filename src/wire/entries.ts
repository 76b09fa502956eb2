import type { EntryPauseResult, TriggeredRun } from "../operators/operations.js";
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

/** `POST /admin/scheduler/entries/trigger`, `cronledger trigger --json`: the run-now's job, or why the entry's overlap policy skipped it. */
export interface TriggeredDocument extends Versioned {
  readonly identity: string;
  readonly key: string;
  readonly job: string;
  readonly request_id: string;
  readonly by: string;
  /** The run-now's job; null when it was skipped. */
  readonly job_id: number | null;
  /** False when the request id had been used (a double click): `job_id` is that request's job. */
  readonly created: boolean;
  readonly skipped: { readonly reason: string; readonly detail: string; readonly job_id: number | null } | null;
  readonly at: string;
}

export function triggeredDocument(run: TriggeredRun): TriggeredDocument {
  return {
    version: WIRE_VERSION,
    identity: run.identity,
    key: run.key,
    job: run.jobName,
    request_id: run.requestId,
    by: run.by,
    job_id: run.jobId,
    created: run.created,
    skipped: run.skipped === null ? null : { reason: run.skipped.reason, detail: run.skipped.detail, job_id: run.skipped.jobId },
    at: iso(run.at) ?? "",
  };
}

import type { ScheduleProblem, TickPhase } from "../errors.js";
import type { InvalidScheduleEntry } from "../schedule/scheduler.js";
import type { SlotOutcome, TickReport } from "../events.js";
import { invalidEntry } from "../status/model.js";
import { brokenEntryDocument, type BrokenEntryDocument } from "./status.js";
import { iso, WIRE_VERSION, type Versioned } from "./version.js";

/** One slot of one entry, as a pass handled it. */
export interface SlotDocument {
  readonly identity: string;
  readonly key: string;
  readonly job: string;
  readonly slot: string;
}

/** `cronledger tick --once --json`: what one pass did. */
export interface TickDocument extends Versioned {
  /** The instant the pass evaluated the schedule at (the database clock). */
  readonly now: string;
  /** `job_id` null: the slot's job already existed. */
  readonly enqueued: readonly (SlotDocument & { readonly job_id: number | null })[];
  readonly lost_race: readonly SlotDocument[];
  readonly skipped_stale: readonly SlotDocument[];
  /** Claimed but recorded as skipped: `reason` paused (the entry is paused) or overlap (its overlap policy); `job_id` the history row. */
  readonly skipped: readonly (SlotDocument & { readonly reason: string; readonly detail: string; readonly job_id: number | null })[];
  readonly quarantined: readonly (SlotDocument & { readonly phase: TickPhase; readonly error: string; readonly until: string; readonly count: number })[];
  /** Entries whose own statement failed for a reason a retry can fix: retried alone at `retry_at`, quarantined at the fourth failure. */
  readonly set_aside: readonly (SlotDocument & { readonly error: string; readonly retry_at: string; readonly failures: number })[];
  readonly locked: readonly SlotDocument[];
  readonly repaired: readonly { readonly identity: string; readonly key: string; readonly job: string; readonly from: string; readonly to: string }[];
  /** Ledger rows created for entries seen for the first time. */
  readonly created: number;
  readonly next_fire_at: string | null;
  readonly statements: number;
  readonly attempts: number;
  /** Invalid schedule entries, left out of the pass. */
  readonly invalid: readonly BrokenEntryDocument[];
}

/** A problem `cronledger preflight` found in the schedule. */
export interface PreflightProblemDocument {
  readonly code: ScheduleProblem["code"];
  readonly severity: "error" | "warning";
  /** 0-based position in the schedule array. */
  readonly index: number;
  readonly job: string | null;
  readonly identity: string | null;
  readonly message: string;
  /** Where the entry is written, when TypeScript could find it; `file` relative to the working directory. */
  readonly location: { readonly file: string; readonly line: number; readonly column: number } | null;
}

/** `cronledger preflight --json`: `ok` unless a problem is an error; a config that does not load gives `error` instead. */
export type PreflightDocument = Versioned & { readonly ok: boolean; readonly config: string } & (
    | { readonly entries: number; readonly errors: number; readonly warnings: number; readonly problems: readonly PreflightProblemDocument[] }
    | { readonly error: { readonly code: string; readonly message: string } }
  );

const slotDocument = (slot: SlotOutcome): SlotDocument => ({ identity: slot.identity, key: slot.key, job: slot.jobName, slot: iso(slot.slot) });

export function tickDocument(report: TickReport, invalid: readonly InvalidScheduleEntry[]): TickDocument {
  return {
    version: WIRE_VERSION,
    now: iso(report.now),
    enqueued: report.enqueued.map((slot) => ({ ...slotDocument(slot), job_id: slot.jobId })),
    lost_race: report.lostRace.map(slotDocument),
    skipped_stale: report.skippedStale.map(slotDocument),
    skipped: report.skipped.map((slot) => ({ ...slotDocument(slot), reason: slot.reason, detail: slot.detail, job_id: slot.jobId })),
    quarantined: report.quarantined.map((slot) => ({ ...slotDocument(slot), phase: slot.phase, error: slot.error, until: iso(slot.until), count: slot.count })),
    set_aside: report.setAside.map((slot) => ({ ...slotDocument(slot), error: slot.error, retry_at: iso(slot.retryAt), failures: slot.failures })),
    locked: report.locked.map(slotDocument),
    repaired: report.repaired.map((fix) => ({ identity: fix.identity, key: fix.key, job: fix.jobName, from: iso(fix.from), to: iso(fix.to) })),
    created: report.created,
    next_fire_at: iso(report.nextFireAt),
    statements: report.statements,
    attempts: report.attempts,
    invalid: invalid.map((entry) => brokenEntryDocument(invalidEntry(entry))),
  };
}

export function preflightDocument(
  config: string,
  entries: number,
  problems: readonly (ScheduleProblem & { readonly location?: PreflightProblemDocument["location"] })[],
): PreflightDocument {
  const errors = problems.filter((problem) => problem.severity === "error").length;
  return {
    version: WIRE_VERSION,
    ok: errors === 0,
    config,
    entries,
    errors,
    warnings: problems.length - errors,
    problems: preflightProblemDocuments(problems),
  };
}

/** Preflight problems as `cronledger preflight --json` (and `cronledger plan --json`) list them. */
export function preflightProblemDocuments(
  problems: readonly (ScheduleProblem & { readonly location?: PreflightProblemDocument["location"] })[],
): PreflightProblemDocument[] {
  return problems.map((problem) => ({
    code: problem.code,
    severity: problem.severity,
    index: problem.index,
    job: problem.jobName ?? null,
    identity: problem.identity ?? null,
    message: problem.message,
    location: problem.location ?? null,
  }));
}

/** A config that does not load: its error, so CI reads it in the same document. */
export function preflightFailureDocument(config: string, error: { readonly code: string; readonly message: string }): PreflightDocument {
  return { version: WIRE_VERSION, ok: false, config, error: { code: error.code, message: error.message } };
}

/** `cronledger unquarantine <key> --json` and `POST .../quarantine/clear`: whether a ledger row had the key, and whether it was quarantined. */
export interface UnquarantinedDocument extends Versioned {
  readonly cleared: boolean;
  readonly key: string;
  /** Null when no ledger row has the key. */
  readonly job: string | null;
  readonly was_quarantined: boolean;
}

export function unquarantinedDocument(key: string, cleared: { readonly key: string; readonly jobName: string; readonly wasQuarantined: boolean } | null): UnquarantinedDocument {
  return { version: WIRE_VERSION, cleared: cleared !== null, key: cleared?.key ?? key, job: cleared?.jobName ?? null, was_quarantined: cleared?.wasQuarantined ?? false };
}

/** A failed CLI command, as `--json` prints it. */
export interface CliFailure {
  /** The stable code of src/errors.ts, or a database problem's (`connection_refused`...), or `internal_error`. */
  readonly code: string;
  readonly message: string;
  /** The line printed on stderr. */
  readonly line: string;
  /** 2: the command line itself is wrong; 1: the command failed. */
  readonly exitCode: 1 | 2;
}

/** `cronledger <command> --json` that failed: on stdout, so a script reading it never parses an empty output. */
export interface CliErrorDocument extends Versioned {
  readonly error: { readonly code: string; readonly message: string; readonly exit_code: 1 | 2 };
}

export function cliErrorDocument(failure: CliFailure): CliErrorDocument {
  return { version: WIRE_VERSION, error: { code: failure.code, message: failure.message, exit_code: failure.exitCode } };
}

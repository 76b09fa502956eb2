import type { StandardSchemaV1 } from "../jobs/standard-schema.js";
import type { PayloadInput } from "../jobs/define-job.js";
import type { Duration } from "../duration.js";
import type { JobDefinition } from "../jobs/define-job.js";
import type { OverlapPolicy } from "../schema.js";

export type { OverlapPolicy } from "../schema.js";

interface EntryTiming {
  /** 5-field (minute resolution), 6-field (second resolution) or @yearly/@monthly/@weekly/@daily/@hourly. */
  readonly cron: string;
  /** IANA zone the cron is read in; default "UTC". */
  readonly timezone?: string;
  /** Distinguishes entries of one job with the same timing (part of the identity). */
  readonly key?: string;
  /** Deterministic delay added to each slot's fire time, shorter than the gap between slots. */
  readonly jitter?: Duration;
  /** How late a missed slot may still fire (default 24 h, floored at 2 minutes). */
  readonly catchUpWindow?: Duration;
  /** Overrides the job's queue / priority for runs of this entry. */
  readonly queue?: string;
  readonly priority?: number;
  /**
   * What a slot does while a job of an earlier slot (or a run-now) of this entry is still queued or running:
   * `"allow_all"` (default, or createCronledger's `overlap`) enqueues it anyway; `"skip"` records it as skipped;
   * `"buffer_one"` enqueues it unless one already waits, recording later ones as skipped; `"cancel_other"`
   * cancels the waiting one, asks the running one to stop, and enqueues it. With either, a job made while one
   * runs is `held` until that one has ended, so runs never overlap. Decided by the pass's statement.
   */
  readonly overlap?: OverlapPolicy;
}

type PayloadField<S extends StandardSchemaV1> = undefined extends PayloadInput<S>
  ? { readonly payload?: PayloadInput<S> }
  : { readonly payload: PayloadInput<S> };

/** An entry whose job is a definition: its payload is checked against that job's schema at compile time. */
export type TypedScheduleEntry<S extends StandardSchemaV1 = StandardSchemaV1> = EntryTiming & { readonly job: JobDefinition<S> } & PayloadField<S>;

/** An entry naming its job by string (the job must be registered where the schedule runs). */
export type NamedScheduleEntry = EntryTiming & { readonly job: string; readonly payload?: unknown };

export type ScheduleEntry = TypedScheduleEntry | NamedScheduleEntry;

type CheckedEntry<E> = E extends { readonly job: JobDefinition<infer S> }
  ? TypedScheduleEntry<S>
  : E extends { readonly job: string }
    ? NamedScheduleEntry
    : ScheduleEntry;

/**
 * Declares the application's JOBS_SCHEDULE. It only types the entries;
 * validation happens at load (`loadSchedule`) and in CI (`cronledger preflight`),
 * where every problem is reported at once.
 */
export function defineSchedule<const T extends readonly object[]>(
  entries: T & { readonly [K in keyof T]: CheckedEntry<T[K]> },
): readonly ScheduleEntry[] {
  return entries as unknown as readonly ScheduleEntry[];
}

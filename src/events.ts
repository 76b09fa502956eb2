import type { TickPhase } from "./errors.js";

/**
 * How one attempt of a job ended; `panicked` is a terminal failure, `retry` a failure with another attempt
 * scheduled, `cancelled` a running job an operator asked to stop whose handler returned (not a failure).
 */
export type AttemptStatus = "done" | "retry" | "skip" | "noop" | "panicked" | "cancelled";

/** One entry's slot as a pass saw it. */
export interface SlotOutcome {
  readonly identity: string;
  readonly key: string;
  readonly jobName: string;
  readonly slot: Date;
}

/** What one scheduler pass did: every listener of `tickCompleted` gets it. */
export interface TickReport {
  /** The instant this pass evaluated schedules at (the database clock unless overridden). */
  readonly now: Date;
  readonly enqueued: (SlotOutcome & { readonly jobId: number | null })[];
  /** Another replica claimed the slot first: normal, not an error. */
  readonly lostRace: SlotOutcome[];
  /** The slot was older than the catch-up window: the ledger moved on without firing. */
  readonly skippedStale: SlotOutcome[];
  /**
   * The slot was claimed (the ledger moved) but not enqueued: its entry is
   * paused, or its overlap policy skipped it. Recorded as a finished run of
   * the entry with status `skipped` (history row `jobId`), outcome `reason`.
   */
  readonly skipped: (SlotOutcome & { readonly reason: SkipReason; readonly detail: string; readonly jobId: number | null })[];
  /**
   * The entry's claim or job insert failed; its slot stays unclaimed. The
   * quarantine is in its ledger row: no replica tries it again before `until`
   * (QUARANTINE_DEFERRAL_MS later); `count` failures in a row so far.
   */
  readonly quarantined: (SlotOutcome & { readonly phase: TickPhase; readonly error: string; readonly until: Date; readonly count: number })[];
  /**
   * The entry's own statement failed for a reason a retry can fix (a
   * serialization failure or deadlock, a lock wait, a time-out): its slot stays
   * unclaimed and the other entries fired without it. It is retried alone at
   * `retryAt` (1, 3, then 9 s later); `failures` in a row so far. A fourth
   * failure quarantines it.
   */
  readonly setAside: (SlotOutcome & { readonly error: string; readonly retryAt: Date; readonly failures: number })[];
  /**
   * Due entries whose ledger row another session held locked (a replica's
   * pass in flight, an open transaction): skipped, not waited for, still due;
   * tried again LOCKED_RETRY_MS later.
   */
  readonly locked: SlotOutcome[];
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

/** Why a claimed slot was recorded as skipped instead of enqueued: its entry is paused, or its overlap policy said so. */
export type SkipReason = "paused" | "overlap";

/** What became of a slot, as the metrics count it (cronledger_schedule_slots_total's `outcome`). */
export const SLOT_OUTCOME_LABELS = ["enqueued", "lost_race", "skipped_stale", "skipped_paused", "skipped_overlap", "quarantined", "set_aside", "locked", "repaired"] as const;
export type SlotOutcomeLabel = (typeof SLOT_OUTCOME_LABELS)[number];

/**
 * Everything observable that cronledger does. Metrics, the demo's event
 * lines and users' own hooks all listen here, so instrumentation never
 * changes the code paths it observes.
 */
export interface CronledgerEvents {
  tickCompleted(report: TickReport, durationSeconds: number): void;
  /** A claim answered: `count` jobs of `queues` (0 when there were none ready), after `durationSeconds`. */
  jobsClaimed(event: { readonly workerId: string; readonly queues: readonly string[]; readonly count: number; readonly durationSeconds: number }): void;
  jobStarted(event: {
    readonly jobId: number;
    readonly jobName: string;
    readonly attempt: number;
    // The rest is always set by cronledger's workers; optional for events made by other code (createMetrics's hooks fed by hand).
    readonly maxAttempts?: number;
    readonly queue?: string;
    /** The schedule entry's ledger key and the slot, for a job of a schedule entry; null for an enqueued job. */
    readonly scheduleKey?: string | null;
    readonly scheduledFor?: Date | null;
    /** The trace context stored with the job by a process that traced its enqueue (JSON: `traceparent`, `tracestate`...); null otherwise. */
    readonly traceContext?: string | null;
  }): void;
  jobFinished(event: {
    readonly jobId: number;
    readonly jobName: string;
    readonly attempt: number;
    readonly status: AttemptStatus;
    readonly durationSeconds: number;
    readonly error?: string;
    readonly nextRunAt?: Date;
  }): void;
  /**
   * An attempt's result reached the database after its lease had lapsed (its worker had lost the database):
   * `amended`, the reaper had ended the job and nobody had run it since, so this result replaced that verdict;
   * `superseded`, another attempt had claimed the job meanwhile (the job ran twice) or it had ended otherwise,
   * so the result is kept in `cronledger.superseded_attempts` beside the job's own.
   */
  lateCompletion(event: {
    readonly jobId: number;
    readonly jobName: string;
    readonly attempt: number;
    readonly fate: "amended" | "superseded";
    /** Where the job was (superseded): its attempt number and status; null when it no longer exists. */
    readonly jobAttempts: number | null;
    readonly jobStatus: string | null;
  }): void;
  pruned(event: { readonly table: "schedule_state" | "jobs"; readonly rows: number }): void;
  /** A reap pass took back jobs whose worker stopped heartbeating: requeued, or failed for good when that attempt was their last. */
  jobsReaped(event: { readonly requeued: number; readonly failed: number; readonly failedByJob: Readonly<Record<string, number>> }): void;
  /** The prune chore failed queued jobs whose name no worker has registered for `chores.failUnregisteredAfter` (JobNotRegisteredError): failure tickets. */
  jobsFailedUnregistered(event: { readonly failed: number; readonly failedByJob: Readonly<Record<string, number>> }): void;
  /** True while this process cannot start (migrate() failed, or start() cannot reach its database or tables); false once it can. */
  initFailure(failed: boolean): void;
}

export type CronledgerHooks = Partial<CronledgerEvents>;

/**
 * Fans one event out to every listener; a throwing listener is reported, never propagated into the scheduler.
 * Each event's listeners are looked up once, and an event is passed on as its one or two arguments, not
 * as a rest array spread again: jobStarted and jobFinished fire for every job, and the array was garbage.
 */
export function combineHooks(listeners: readonly CronledgerHooks[], onListenerError: (error: unknown) => void): CronledgerEvents {
  const emit = <K extends keyof CronledgerEvents>(name: K) => {
    type Args = Parameters<CronledgerEvents[K]>;
    const handlers = listeners.flatMap((listener) => {
      const handler = listener[name] as ((first: Args[0], second?: Args[1]) => void) | undefined;
      return handler === undefined ? [] : [handler];
    });
    return ((first: Args[0], second?: Args[1]) => {
      for (const handler of handlers) {
        try {
          if (second === undefined) handler(first);
          else handler(first, second);
        } catch (error) {
          onListenerError(error);
        }
      }
    }) as CronledgerEvents[K];
  };
  return {
    tickCompleted: emit("tickCompleted"),
    jobsClaimed: emit("jobsClaimed"),
    jobStarted: emit("jobStarted"),
    jobFinished: emit("jobFinished"),
    lateCompletion: emit("lateCompletion"),
    pruned: emit("pruned"),
    jobsReaped: emit("jobsReaped"),
    jobsFailedUnregistered: emit("jobsFailedUnregistered"),
    initFailure: emit("initFailure"),
  };
}

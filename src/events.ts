import type { TickReport } from "./schedule/tick.js";

/** How one attempt of a job ended; `panicked` is a terminal failure, `retry` a failure with another attempt scheduled. */
export type AttemptStatus = "done" | "retry" | "skip" | "noop" | "panicked";

export type SlotOutcomeLabel = "enqueued" | "lost_race" | "skipped_stale" | "quarantined" | "locked" | "repaired";

/**
 * Everything observable that cronledger does. Metrics, the demo's event
 * lines and users' own hooks all listen here, so instrumentation never
 * changes the code paths it observes.
 */
export interface CronledgerEvents {
  tickCompleted(report: TickReport, durationSeconds: number): void;
  jobStarted(event: { readonly jobId: number; readonly jobName: string; readonly attempt: number }): void;
  jobFinished(event: {
    readonly jobId: number;
    readonly jobName: string;
    readonly attempt: number;
    readonly status: AttemptStatus;
    readonly durationSeconds: number;
    readonly error?: string;
    readonly nextRunAt?: Date;
  }): void;
  pruned(event: { readonly table: "schedule_state" | "jobs"; readonly rows: number }): void;
  /** A reap pass took back jobs whose worker stopped heartbeating: requeued, or failed for good when that attempt was their last. */
  jobsReaped(event: { readonly requeued: number; readonly failed: number; readonly failedByJob: Readonly<Record<string, number>> }): void;
  /** True while this process cannot start (migrate() failed, or start() cannot reach its database or tables); false once it can. */
  initFailure(failed: boolean): void;
}

export type CronledgerHooks = Partial<CronledgerEvents>;

/** Fans one event out to every listener; a throwing listener is reported, never propagated into the scheduler. */
export function combineHooks(listeners: readonly CronledgerHooks[], onListenerError: (error: unknown) => void): CronledgerEvents {
  const emit =
    <K extends keyof CronledgerEvents>(name: K) =>
    (...args: Parameters<CronledgerEvents[K]>) => {
      for (const listener of listeners) {
        const handler = listener[name] as ((...a: Parameters<CronledgerEvents[K]>) => void) | undefined;
        if (!handler) continue;
        try {
          handler(...args);
        } catch (error) {
          onListenerError(error);
        }
      }
    };
  return {
    tickCompleted: emit("tickCompleted"),
    jobStarted: emit("jobStarted"),
    jobFinished: emit("jobFinished"),
    pruned: emit("pruned"),
    jobsReaped: emit("jobsReaped"),
    initFailure: emit("initFailure"),
  };
}

import { BACKFILL_KEY_PREFIX } from "../keys.js";
import type { StandardSchemaV1 } from "./standard-schema.js";
import { childLogger, type Logger } from "../log.js";
import type { JobContext, JobDefinition, JobResult, JobSchedule } from "./define-job.js";
import type { EnqueueArgs, EnqueuedJob, Enqueuer, EnqueueRequests, JobReference } from "./define-job.js";
import type { EnqueueManyOptions } from "./enqueue-options.js";
import { parseTriggerKey } from "./trigger-key.js";

export interface AttemptInput {
  readonly jobId: number;
  readonly jobName: string;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly scheduledFor: Date | null;
  /** The job's `schedule_key`; null for enqueued jobs. */
  readonly scheduleKey: string | null;
  /** The job's idempotency key: a backfilled run's starts with BACKFILL_KEY_PREFIX. */
  readonly idempotencyKey: string | null;
}

/** What every attempt of a worker shares: its logger, the enqueuer behind `ctx.enqueue`, and the loaded entries by ledger key. */
export interface AttemptServices {
  readonly logger: Logger;
  readonly enqueuer: Enqueuer;
  entryOf(ledgerKey: string): { readonly identity: string; readonly entryKey: string | undefined } | undefined;
}

/**
 * One run of a handler: its `ctx`, and the way the worker ends it early
 * (timeout, shutdown, lost lease). The AbortSignal and the logger are made
 * only when the handler reads them: an AbortController per job was the
 * largest cost of a no-op job, and most handlers never look at either.
 */
export class Attempt implements JobContext {
  readonly jobId: number;
  readonly jobName: string;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly scheduledFor: Date | null;
  private readonly scheduleKey: string | null;
  private readonly idempotencyKey: string | null;
  /** Why the worker ended this attempt; undefined while it may run on. */
  abortReason: unknown;
  /** Set when an operator asked the job to stop: its signal is aborted with it, and the handler's return ends the job cancelled. */
  stopReason: unknown;
  private aborted = false;
  private controller: AbortController | undefined;
  private logger: Logger | undefined;
  private rejectRun: ((reason: unknown) => void) | undefined;

  constructor(
    input: AttemptInput,
    private readonly services: AttemptServices,
  ) {
    this.jobId = input.jobId;
    this.jobName = input.jobName;
    this.attempt = input.attempt;
    this.maxAttempts = input.maxAttempts;
    this.scheduledFor = input.scheduledFor;
    this.scheduleKey = input.scheduleKey;
    this.idempotencyKey = input.idempotencyKey;
  }

  get schedule(): JobSchedule | null {
    if (this.scheduleKey === null || this.scheduledFor === null) return null;
    const entry = this.services.entryOf(this.scheduleKey);
    return {
      key: this.scheduleKey,
      identity: entry?.identity ?? null,
      entryKey: entry?.entryKey ?? null,
      slot: this.scheduledFor,
      backfilled: this.idempotencyKey?.startsWith(BACKFILL_KEY_PREFIX) ?? false,
      trigger: parseTriggerKey(this.idempotencyKey),
    };
  }

  /** Enqueues a follow-up job; `{ db: tx }` writes it in the handler's own transaction. */
  enqueue<S extends StandardSchemaV1>(job: JobReference<S>, ...args: EnqueueArgs<S>): Promise<EnqueuedJob> {
    return this.services.enqueuer.enqueue(job, ...args);
  }

  enqueueMany<const R extends readonly object[]>(requests: EnqueueRequests<R>, options?: EnqueueManyOptions): Promise<EnqueuedJob[]> {
    return this.services.enqueuer.enqueueMany(requests, options);
  }

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.abortReason);
      else if (this.stopReason !== undefined) this.controller.abort(this.stopReason);
    }
    return this.controller.signal;
  }

  get log(): Logger {
    // Prefixed with the job so interleaved jobs stay readable; redacted, since handlers log what they hold.
    this.logger ??= childLogger(this.services.logger, { job: this.jobName, jobId: this.jobId, attempt: this.attempt }, true);
    return this.logger;
  }

  get isAborted(): boolean {
    return this.aborted;
  }

  /** Aborts the signal and settles the run with `reason` at once, whether or not the handler honours the signal. */
  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.abortReason = reason;
    this.controller?.abort(reason);
    this.rejectRun?.(reason);
  }

  /**
   * Asks the handler to stop: aborts its signal with `reason` and lets it
   * return in its own time (unlike abort(), the run is not settled here).
   */
  stop(reason: unknown): void {
    if (this.aborted || this.stopReason !== undefined) return;
    this.stopReason = reason;
    this.controller?.abort(reason);
  }

  /**
   * Runs the handler now; the worker records the attempt as active before it calls this. Its promise
   * settles with the handler's result, or with the abort's reason the moment the worker aborts it.
   */
  run(definition: JobDefinition, payload: unknown): Promise<JobResult> {
    return new Promise<JobResult>((resolve, reject) => {
      if (this.aborted) {
        reject(this.abortReason);
        return;
      }
      this.rejectRun = reject;
      try {
        const result = definition.run(payload, this);
        // Not resolve(result): a promise passed to resolve() locks this one to it, and abort() could no longer settle it.
        if (isThenable(result)) result.then(resolve, reject);
        else resolve(result);
      } catch (error) {
        reject(error);
      }
    });
  }
}

function isThenable(value: unknown): value is PromiseLike<JobResult> {
  return typeof value === "object" && value !== null && typeof (value as { then?: unknown }).then === "function";
}

import { Backoff } from "../backoff.js";
import type { StatementReport } from "../db/health.js";
import type { CompletionRow, LateCompletion } from "../db/sql/completions.js";
import type { HeldAttempt } from "../db/sql/jobs.js";
import type { AttemptStatus } from "../events.js";
import type { Logger } from "../log.js";
import { retryCapMs } from "../db/diagnose.js";
import { logFailure } from "../db/log-failure.js";
import { withinDeadline } from "../deadline.js";

/**
 * How an attempt ended, as the worker writes it back. `attempt` is the
 * attempt's number: with the worker's id, the claim's fencing token
 * (completeJobs, src/db/sql/completions.ts).
 */
export type Completion =
  /** Ran to the end; `skip` / `noop` are the handler's business outcomes. */
  | { readonly kind: "succeeded"; readonly id: number; readonly attempt: number; readonly outcome: "skip" | "noop" | null }
  /** Failed with attempts left: back to the queue after `delayMs`. */
  | { readonly kind: "retry"; readonly id: number; readonly attempt: number; readonly error: string; readonly delayMs: number }
  /** Failed for good: the row is the failure ticket. */
  | { readonly kind: "failed"; readonly id: number; readonly attempt: number; readonly error: string }
  /** Stopped on an operator's request: the handler returned after its signal was aborted; never retried, not a failure. */
  | { readonly kind: "cancelled"; readonly id: number; readonly attempt: number; readonly error: string }
  /** Handed back unfinished by a shutdown: queued again at once, the interrupted attempt not counted. */
  | { readonly kind: "returned"; readonly id: number; readonly attempt: number };

/** What `work({ once: true })` resolves with. */
export interface WorkSummary {
  claimed: number;
  succeeded: number;
  skipped: number;
  noop: number;
  /** Failed attempts with another attempt scheduled. */
  retried: number;
  /** Terminal failures (attempts exhausted, non-retryable, unregistered, invalid payload). */
  failed: number;
  /** Jobs handed back to the queue unfinished by a shutdown, their attempt not counted. */
  returned: number;
  /** Running jobs an operator asked to stop whose handler then returned: ended cancelled. */
  cancelled: number;
}

export function emptySummary(): WorkSummary {
  return { claimed: 0, succeeded: 0, skipped: 0, noop: 0, retried: 0, failed: 0, returned: 0, cancelled: 0 };
}

/** The attempt's status for events and metrics; null for a job handed back (no attempt ended). */
export function attemptStatus(completion: Completion): AttemptStatus | null {
  switch (completion.kind) {
    case "failed":
      return "panicked";
    case "retry":
      return "retry";
    case "cancelled":
      return "cancelled";
    case "returned":
      return null;
    case "succeeded":
      return completion.outcome ?? "done";
  }
}

const SUMMARY_FIELD: Readonly<Record<AttemptStatus | "returned", keyof WorkSummary>> = {
  done: "succeeded",
  skip: "skipped",
  noop: "noop",
  retry: "retried",
  panicked: "failed",
  cancelled: "cancelled",
  returned: "returned",
};

/** Adds one completion to a summary. */
export function count(summary: WorkSummary, completion: Completion): void {
  summary[SUMMARY_FIELD[attemptStatus(completion) ?? "returned"]] += 1;
}

/** The row update a completion becomes. */
export function completionRow(completion: Completion): CompletionRow {
  // Object literals of one shape, no spread: one per finished job, so the drain's worker builds them by the ten thousand a second.
  const { id, attempt } = completion;
  switch (completion.kind) {
    case "succeeded":
      return { id, attempt, status: "succeeded", outcome: completion.outcome, error: null, delayMs: 0, returned: false };
    case "retry":
      return { id, attempt, status: "queued", outcome: null, error: completion.error, delayMs: completion.delayMs, returned: false };
    case "failed":
      return { id, attempt, status: "failed", outcome: null, error: completion.error, delayMs: 0, returned: false };
    case "cancelled":
      return { id, attempt, status: "cancelled", outcome: null, error: completion.error, delayMs: 0, returned: false };
    case "returned":
      return { id, attempt, status: "queued", outcome: null, error: null, delayMs: 0, returned: true };
  }
}

/**
 * Completions are written together once this many are waiting, or after
 * FLUSH_DELAY_MS. 10 ms, not 2: with jobs that end a few at a time (I/O-shaped
 * handlers, 4 processes of concurrency 50 on 2 cores) a 2 ms window sent about
 * 500 small UPDATEs a second per process, and the 4-process drain went from
 * 13.4-15.3k to 15.8-18.0k jobs/s at 10 ms (bench/throughput.ts, io4, alternating
 * runs). No-op drains fill FLUSH_SIZE first and did not move; a finished job's
 * row shows its end at most 10 ms later.
 */
const FLUSH_SIZE = 500;
const FLUSH_DELAY_MS = 10;
/** How soon retryWithin tries again after a try that failed at once. */
const RESULTS_RETRY_MS = 100;
/** Failed writes retry after 100 ms doubling to this (a persistent cause: up to a minute). */
const MAX_RETRY_MS = 5_000;
/** How long a stopping worker keeps trying to write its completions before it leaves them to the reaper. */
const DRAIN_DEADLINE_MS = 10_000;

export interface BatcherHost {
  /** Writes a batch in one statement; resolves with what became of the rows its claim's fence turned away (none, usually). */
  write(rows: readonly CompletionRow[]): Promise<readonly LateCompletion[]>;
  /** Rows of a written batch that arrived late: their job was ended by the reaper (amended) or claimed by another attempt (superseded). */
  late?(results: readonly LateCompletion[]): void;
  /** Called after each successful flush that emptied the batch (the worker may claim again). */
  flushed(): void;
  /** Called with each batch once it is written: a retry's wake-up counts its delay from here (src/jobs/worker.ts). */
  written?(batch: readonly Completion[]): void;
  /** The database's health tracker: a lost connection is logged there, once per outage. */
  readonly health?: { sent(): StatementReport };
  readonly logger: Logger;
}

/**
 * Collects the ends of attempts and writes them in batches: at most every
 * FLUSH_DELAY_MS, at once when FLUSH_SIZE are waiting. One write is in
 * flight at a time; a failed write keeps its completions, in order, for the
 * next try after a backoff, so an outage delays completions but loses none.
 */
export class CompletionBatcher {
  private pending: Completion[] = [];
  /** The batch being written, until its statement answers: still held by the worker (its heartbeats cover it). */
  private inFlight: readonly Completion[] = [];
  /** The last write failed (set until one succeeds). */
  private failing = false;
  private flushing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly backoff = new Backoff({ initialMs: 100, factor: 2, maxMs: MAX_RETRY_MS });

  constructor(private readonly host: BatcherHost) {}

  /** True while completions wait or are being written. */
  get busy(): boolean {
    return this.pending.length > 0 || this.flushing !== undefined || this.timer !== undefined;
  }

  /** True from a failed write until a write succeeds, while completions wait or are being written. */
  get stalled(): boolean {
    return this.failing && (this.pending.length > 0 || this.inFlight.length > 0);
  }

  /**
   * The attempts whose results wait here or are being written: the worker
   * still holds their jobs, so its heartbeats keep them (a result reached
   * while the database is out of reach is written when it returns, and the
   * lease's expiry must not beat it: docs/decisions.md).
   */
  holding(): HeldAttempt[] {
    const held: HeldAttempt[] = [];
    for (const completion of this.inFlight) held.push({ id: completion.id, attempt: completion.attempt });
    for (const completion of this.pending) held.push({ id: completion.id, attempt: completion.attempt });
    return held;
  }

  /**
   * Writes what waits now, without waiting out a failed write's backoff
   * (the database answered something else again); resolves once nothing
   * waits that this try could write, or the try failed.
   */
  async retryNow(): Promise<boolean> {
    if (this.flushing) await this.flushing;
    if (this.pending.length === 0) return true;
    clearTimeout(this.timer);
    this.timer = undefined;
    const flushing = this.flush();
    this.flushing = flushing;
    await flushing;
    this.flushing = undefined;
    if (this.pending.length > 0) {
      this.schedule(this.backoff.currentMs || FLUSH_DELAY_MS);
      return false;
    }
    this.host.flushed();
    return true;
  }

  /**
   * Tries again, without the backoff, until nothing waits behind a failed
   * write, `timeoutMs` is over or `wanted()` turns false (the worker's
   * writeWaitingResults, before a pass of the same process).
   */
  async retryWithin(timeoutMs: number, wanted: () => boolean): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (this.stalled && wanted()) {
      const left = deadline - performance.now();
      if (left <= 0) return;
      const written = await withinDeadline(this.retryNow(), left);
      // A try that failed at once (the connection not back yet): the next one a moment later, within the deadline.
      if (!written.done || !written.value) await new Promise((resolve) => setTimeout(resolve, Math.min(RESULTS_RETRY_MS, Math.max(0, deadline - performance.now()))));
    }
  }

  add(completion: Completion): void {
    this.pending.push(completion);
    this.schedule(this.pending.length >= FLUSH_SIZE ? 0 : FLUSH_DELAY_MS);
  }

  /**
   * Writes what waits without the batching delay: the worker holds nothing
   * else, so no completion will join these soon (an idle worker's single job,
   * the end of a drain). Left alone while a failed write backs off.
   */
  flushNow(): void {
    if (this.pending.length > 0 && this.backoff.currentMs === 0) this.schedule(0);
  }

  private schedule(delayMs: number): void {
    if (this.flushing) return;
    if (this.timer !== undefined) {
      if (delayMs > 0) return;
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flushing = this.flush().finally(() => {
        this.flushing = undefined;
        if (this.pending.length > 0) this.schedule(this.backoff.currentMs || (this.pending.length >= FLUSH_SIZE ? 0 : FLUSH_DELAY_MS));
        else this.host.flushed();
      });
    }, delayMs);
  }

  /** Writes every waiting completion in one statement; on failure they stay queued for the next try. */
  private async flush(): Promise<void> {
    const batch = this.pending;
    if (batch.length === 0) return;
    this.pending = [];
    this.inFlight = batch;
    const sent = this.host.health?.sent();
    try {
      const late = await this.host.write(batch.map(completionRow));
      this.inFlight = [];
      this.host.written?.(batch);
      if (late.length > 0) this.host.late?.(late);
      this.failing = false;
      this.backoff.reset();
      sent?.succeeded();
    } catch (error) {
      this.inFlight = [];
      this.failing = true;
      this.pending = batch.concat(this.pending);
      const retryInMs = this.backoff.next(retryCapMs(error, MAX_RETRY_MS));
      logFailure(this.host.logger, "warn", "recording finished jobs failed; retrying", { jobs: batch.length, retryInMs }, error, sent);
    }
  }

  /** Flushes until nothing is waiting, retrying through short outages, bounded so a shutdown cannot hang. */
  async drain(): Promise<void> {
    const deadline = performance.now() + DRAIN_DEADLINE_MS;
    while (this.busy && performance.now() < deadline) {
      if (this.flushing) {
        await this.flushing;
        continue;
      }
      clearTimeout(this.timer);
      this.timer = undefined;
      await this.flush();
      if (this.pending.length > 0) await new Promise((resolve) => setTimeout(resolve, this.backoff.currentMs));
    }
    if (this.pending.length > 0) {
      this.host.logger.error("could not record some finished jobs before stopping; the reaper will return them to the queue", { jobs: this.pending.length });
    }
  }

  /** Stops the flush timer (the worker is done). */
  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/** Retries due sooner than this get a timer of their own; later ones are found by the poll. */
const MAX_RETRY_WAKE_MS = 5 * 60_000;
/** After the retry's due time, counted from the write of its completion (src/jobs/worker.ts): the database clock has passed it. */
const RETRY_WAKE_MARGIN_MS = 25;
const RETRY_WAKE_BUCKET_MS = 50;

/**
 * Wakes a worker when a retry it scheduled comes due, so a job retried in
 * 2 s runs in 2 s, not at the poll after. Retries due within the same
 * RETRY_WAKE_BUCKET_MS share one timer; far-off ones are left to the poll.
 */
export class RetryWakes {
  private readonly timers = new Map<number, NodeJS.Timeout>();

  constructor(private readonly wake: () => void) {}

  /** A retry was scheduled `delayMs` from now. */
  add(delayMs: number): void {
    if (delayMs > MAX_RETRY_WAKE_MS) return;
    const bucket = Math.ceil((performance.now() + delayMs + RETRY_WAKE_MARGIN_MS) / RETRY_WAKE_BUCKET_MS);
    if (this.timers.has(bucket)) return;
    const timer = setTimeout(() => {
      this.timers.delete(bucket);
      this.wake();
    }, bucket * RETRY_WAKE_BUCKET_MS - performance.now());
    this.timers.set(bucket, timer);
  }

  clear(): void {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }
}

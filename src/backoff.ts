/**
 * The one wait schedule for retries: `initialMs`, then times `factor` per
 * failure, capped at `maxMs`, reset by a success. The tick's transient
 * retries (100, 300, 900 ms), a worker's claim and completion retries
 * (100 ms doubling to 5 s) and the supervisor's restarts (250 ms doubling to
 * 5 s) all wait through it.
 */
export interface BackoffOptions {
  readonly initialMs: number;
  readonly factor: number;
  readonly maxMs: number;
}

export class Backoff {
  private failures = 0;
  private lastMs = 0;

  constructor(private readonly options: BackoffOptions) {}

  /** The wait before retry number `failure` (1-based). */
  static delay(options: BackoffOptions, failure: number): number {
    return Math.min(options.maxMs, options.initialMs * options.factor ** Math.max(0, failure - 1));
  }

  /**
   * Counts a failure and returns how long to wait before the next try; `capMs`
   * replaces the cap for this wait (a persistent database problem waits up
   * to a minute, see retryCapMs in src/db/diagnose.ts).
   */
  next(capMs: number = this.options.maxMs): number {
    this.failures += 1;
    this.lastMs = Backoff.delay({ ...this.options, maxMs: capMs }, this.failures);
    return this.lastMs;
  }

  /** The wait the last failure asked for; 0 after a success. */
  get currentMs(): number {
    return this.failures === 0 ? 0 : this.lastMs;
  }

  /** Failures since the last success. */
  get attempts(): number {
    return this.failures;
  }

  reset(): void {
    this.failures = 0;
    this.lastMs = 0;
  }
}

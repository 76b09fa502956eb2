/**
 * How many jobs a worker claims next, decided from what it holds and how
 * fast it finishes jobs; pure, so the policy is tested without a database.
 *
 * The worker keeps a small local buffer of claimed jobs so that claims
 * overlap execution: enough for PREFETCH_HORIZON_S of work at the rate its
 * handlers can sustain (DurationMeter), refilled when it falls below half. Slow jobs (rate near 0) get no
 * prefetch at all, so they are not hoarded by one worker while others idle.
 * When the rate outruns one claim's round trip, a second claim may run on
 * another connection.
 */

/** Prefetch enough claimed jobs for this much work at the observed rate. */
export const PREFETCH_HORIZON_S = 0.05;
export const MAX_CONCURRENT_CLAIMS = 2;

export interface ClaimState {
  readonly concurrency: number;
  readonly batchSize: number;
  /** Jobs per second the handlers can sustain (DurationMeter). */
  readonly rate: number;
  /** Jobs running plus jobs claimed but not started. */
  readonly held: number;
  /** Claims in flight and the rows they asked for. */
  readonly claims: number;
  readonly claimingRows: number;
}

/** Rows to claim now; 0 means do not claim. */
export function claimSize(state: ClaimState): number {
  const prefetch = Math.min(state.batchSize, Math.round(state.rate * PREFETCH_HORIZON_S));
  const capacity = state.concurrency + prefetch;
  const lowWater = capacity - Math.max(1, Math.floor(prefetch / 2));
  const maxClaims = prefetch >= state.batchSize / 2 ? MAX_CONCURRENT_CLAIMS : 1;
  if (state.claims >= maxClaims || state.held + state.claimingRows > lowWater) return 0;
  return Math.max(0, Math.min(state.batchSize, capacity - state.held - state.claimingRows));
}

/** Weight of the latest job in the running mean of job durations. */
const DURATION_WEIGHT = 0.1;
/** Jobs shorter than this count as this long, so no-op jobs still size the prefetch finitely. */
const MIN_JOB_MS = 0.01;

/**
 * The running mean of a worker's job durations, and the job rate its
 * handlers could sustain from it: concurrency over the mean duration. Not
 * the rate observed, which the claims themselves bound: with several
 * processes a small prefetch made small claims, a low observed rate, and a
 * smaller prefetch again.
 */
export class DurationMeter {
  private meanMs: number | undefined;

  /** One job took `ms`. */
  add(ms: number): void {
    this.meanMs = this.meanMs === undefined ? ms : this.meanMs + DURATION_WEIGHT * (ms - this.meanMs);
  }

  /** Jobs per second `concurrency` slots could run; 0 until a job has finished (no prefetch yet). */
  sustainableRate(concurrency: number): number {
    return this.meanMs === undefined ? 0 : (concurrency * 1000) / Math.max(MIN_JOB_MS, this.meanMs);
  }
}

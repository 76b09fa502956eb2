/**
 * How many jobs a worker claims next, decided from what it holds and how
 * fast it finishes jobs; pure, so the policy is tested without a database.
 *
 * The worker keeps a small local buffer of claimed jobs so that claims
 * overlap execution: enough for PREFETCH_HORIZON_S of work at the observed
 * rate, refilled when it falls below half. Slow jobs (rate near 0) get no
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
  /** Jobs finished per second, smoothed. */
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

/**
 * The worker's job rate, smoothed: each reading at least 20 ms after the
 * last averages the rate observed since with the previous estimate.
 */
export class RateMeter {
  private rate = 0;
  private mark = { at: performance.now(), finished: 0 };
  private finished = 0;

  /** One job finished. */
  tick(): void {
    this.finished += 1;
  }

  /** The smoothed rate in jobs per second, updated when enough time has passed. */
  read(): number {
    const now = performance.now();
    const elapsed = now - this.mark.at;
    if (elapsed >= 20) {
      const observed = ((this.finished - this.mark.finished) * 1000) / elapsed;
      this.rate = this.rate === 0 ? observed : 0.5 * this.rate + 0.5 * observed;
      this.mark = { at: now, finished: this.finished };
    }
    return this.rate;
  }
}

import { ConfigError } from "../errors.js";

/** The built-in retry classes (README, "Running jobs"). */
export type RetryClass = "probe" | "entity" | "maintenance";

/** Exponential backoff: attempt n waits min(cap, base * 2^(n-1)), jittered by +/- `jitter`. */
export interface BackoffRetryPolicy {
  readonly maxAttempts: number;
  readonly baseMs: number;
  readonly capMs: number;
  /** Fraction of the delay added or removed at random; default 0.1. */
  readonly jitter?: number;
}

/** A policy with its own delay curve; `delayMs(attempt)` is the wait after failed attempt `attempt` (1-based). */
export interface CustomRetryPolicy {
  readonly maxAttempts: number;
  delayMs(attempt: number): number;
}

export type RetryPolicy = BackoffRetryPolicy | CustomRetryPolicy;

export const RETRY_CLASSES: Readonly<Record<RetryClass, BackoffRetryPolicy>> = {
  probe: { maxAttempts: 3, baseMs: 1_000, capMs: 5_000, jitter: 0.1 },
  entity: { maxAttempts: 5, baseMs: 30_000, capMs: 600_000, jitter: 0.1 },
  maintenance: { maxAttempts: 1, baseMs: 0, capMs: 0, jitter: 0 },
};

export function resolveRetryPolicy(retry: RetryClass | RetryPolicy, jobName: string): RetryPolicy {
  const policy = typeof retry === "string" ? RETRY_CLASSES[retry] : retry;
  if (policy === undefined) {
    throw new ConfigError(`Job "${jobName}" has unknown retry class ${JSON.stringify(retry)}: use "probe", "entity", "maintenance" or a policy object.`);
  }
  if (!Number.isInteger(policy.maxAttempts) || policy.maxAttempts < 1) {
    throw new ConfigError(`Job "${jobName}" retry policy needs maxAttempts >= 1 (got ${String(policy.maxAttempts)}).`);
  }
  return policy;
}

/** Delay before the next attempt after `failedAttempt` failed (1-based); `random` is injectable for tests. */
export function retryDelayMs(policy: RetryPolicy, failedAttempt: number, random: () => number = Math.random): number {
  if ("delayMs" in policy) return Math.max(0, policy.delayMs(failedAttempt));
  const nominal = Math.min(policy.capMs, policy.baseMs * 2 ** (failedAttempt - 1));
  const spread = policy.jitter ?? 0.1;
  return Math.max(0, Math.round(nominal * (1 + spread * (2 * random() - 1))));
}

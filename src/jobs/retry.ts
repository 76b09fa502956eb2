import { z } from "zod";
import { fn, positiveInteger } from "../option-schema.js";

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

const RETRY_CLASS_NAMES = Object.keys(RETRY_CLASSES) as [RetryClass, ...RetryClass[]];
const CLASS_LIST = RETRY_CLASS_NAMES.map((name) => JSON.stringify(name)).join(", ");
const milliseconds = () => z.number({ error: "must be a number of milliseconds" }).min(0, "must not be negative");

/**
 * The fields of a policy object, for a job's retry (defineJob) and one job's
 * override (enqueue's `retry`) alike. maxAttempts is required, but checked
 * by hand so that a misspelt key still gets its did-you-mean: zod stops at
 * a missing key before it looks at the unknown ones.
 */
const policyFields = {
  maxAttempts: positiveInteger().optional(),
  baseMs: milliseconds().optional(),
  capMs: milliseconds().optional(),
  jitter: z.number({ error: "must be a number from 0 to 1" }).min(0, "must be a number from 0 to 1").max(1, "must be a number from 0 to 1").optional(),
};

interface PolicyFields {
  readonly maxAttempts?: number | undefined;
  readonly baseMs?: number | undefined;
  readonly capMs?: number | undefined;
  readonly jitter?: number | undefined;
  readonly delayMs?: unknown;
}

/** What zod's shape cannot say: which fields go together. `alone`: whether `{ maxAttempts }` by itself is a policy. */
function checkPolicy(policy: PolicyFields, context: z.RefinementCtx, alone: boolean): void {
  const problem = (message: string, path: readonly string[] = []) => context.addIssue({ code: "custom", message, path: [...path] });
  if (policy.maxAttempts === undefined) problem("is required (a positive integer)", ["maxAttempts"]);
  const backoff = policy.baseMs !== undefined || policy.capMs !== undefined || policy.jitter !== undefined;
  if (policy.delayMs !== undefined && backoff) problem("takes either delayMs or baseMs, capMs and jitter, not both");
  else if (backoff && (policy.baseMs === undefined || policy.capMs === undefined)) problem("baseMs and capMs go together");
  else if (!alone && !backoff && policy.delayMs === undefined) problem("needs baseMs and capMs, or a delayMs function (or use a retry class)");
}

const retryClassSchema = z.string().pipe(z.enum(RETRY_CLASS_NAMES, { error: `must be ${CLASS_LIST} or a policy object` }));

/** A job's retry (`defineJob({ retry })`): a class, a backoff policy or a policy with its own delays. */
export const retryPolicySchema = z.union(
  [
    retryClassSchema,
    z.strictObject({ ...policyFields, delayMs: fn<(attempt: number) => number>().optional() }).superRefine((policy, context) => checkPolicy(policy, context, false)),
  ],
  { error: `must be ${CLASS_LIST}, { maxAttempts, baseMs, capMs, jitter? } or { maxAttempts, delayMs }` },
);

/** One job's override (`enqueue(job, payload, { retry })`): a class, a backoff policy or `{ maxAttempts }`; stored with the job, so no function. */
export const retryOverrideSchema = z.union(
  [retryClassSchema, z.strictObject(policyFields).superRefine((policy, context) => checkPolicy(policy, context, true))],
  { error: `must be ${CLASS_LIST}, { maxAttempts } or { maxAttempts, baseMs, capMs, jitter? }` },
);

/** A job's policy from what `retryPolicySchema` accepted: the class's, or the object as given (a delayMs method keeps its `this`). */
export function jobRetryPolicy(retry: RetryClass | RetryPolicy): RetryPolicy {
  return typeof retry === "string" ? RETRY_CLASSES[retry] : retry;
}

/** Delay before the next attempt after `failedAttempt` failed (1-based); `random` is injectable for tests. */
export function retryDelayMs(policy: RetryPolicy, failedAttempt: number, random: () => number = Math.random): number {
  if ("delayMs" in policy) return Math.max(0, policy.delayMs(failedAttempt));
  const nominal = Math.min(policy.capMs, policy.baseMs * 2 ** (failedAttempt - 1));
  const spread = policy.jitter ?? 0.1;
  return Math.max(0, Math.round(nominal * (1 + spread * (2 * random() - 1))));
}

import { z } from "zod";
import { InvalidArgumentError } from "../errors.js";
import { describeShapeIssues } from "../suggest.js";
import { RETRY_CLASSES, retryOverrideSchema, type BackoffRetryPolicy, type RetryClass, type RetryPolicy } from "./retry.js";

/**
 * A retry policy given to one job at enqueue (`enqueue(job, payload, { retry })`),
 * overriding its job's: a retry class, a backoff policy, or only a number of
 * attempts (keeping the job's delays). The one-shot "keepalive" enqueue of an
 * entity-shaped job is `{ retry: "probe" }` or `{ retry: { maxAttempts: 1 } }`.
 * A policy with a `delayMs` function cannot be given here: the override is
 * stored with the job (jobs.retry_policy), and a function cannot be.
 */
export type RetryOverride = RetryClass | BackoffRetryPolicy | { readonly maxAttempts: number };

/** The override as stored in jobs.retry_policy. */
export type StoredRetryPolicy =
  | { readonly class: RetryClass }
  | { readonly maxAttempts: number; readonly baseMs?: number; readonly capMs?: number; readonly jitter?: number };

/** Parses jobs.retry_policy; null (or anything unreadable, e.g. written by hand) means the job's own policy. */
export function readStoredRetryPolicy(json: string | null): StoredRetryPolicy | null {
  if (json === null) return null;
  try {
    const value = JSON.parse(json) as Partial<{ class: string; maxAttempts: number; baseMs: number; capMs: number; jitter: number }> | null;
    if (value !== null && typeof value.class === "string" && value.class in RETRY_CLASSES) return { class: value.class as RetryClass };
    if (value !== null && Number.isInteger(value.maxAttempts) && (value.maxAttempts ?? 0) >= 1) return value as StoredRetryPolicy;
  } catch {
    // Unreadable: the job's own policy applies.
  }
  return null;
}

/** The policy a failed attempt of a job is retried under: the one stored with it at enqueue, else its job's. */
export function effectiveRetryPolicy(jobPolicy: RetryPolicy, stored: StoredRetryPolicy | null): RetryPolicy {
  if (stored === null) return jobPolicy;
  if ("class" in stored) return RETRY_CLASSES[stored.class];
  const { maxAttempts } = stored;
  if (stored.baseMs !== undefined && stored.capMs !== undefined) {
    return { maxAttempts, baseMs: stored.baseMs, capMs: stored.capMs, ...(stored.jitter === undefined ? {} : { jitter: stored.jitter }) };
  }
  // Only the number of attempts was given: the job's own delays.
  if ("delayMs" in jobPolicy) return { maxAttempts, delayMs: (attempt) => jobPolicy.delayMs(attempt) };
  return { ...jobPolicy, maxAttempts };
}

/** How the failures and status views name an override: `probe`, `3 attempts`, `backoff 4 attempts, 2000-60000 ms`. */
export function describeRetryOverride(stored: StoredRetryPolicy | null): string | null {
  if (stored === null) return null;
  if ("class" in stored) return stored.class;
  const attempts = `${stored.maxAttempts} attempt${stored.maxAttempts === 1 ? "" : "s"}`;
  return stored.baseMs === undefined ? attempts : `backoff ${attempts}, ${stored.baseMs}-${stored.capMs ?? stored.baseMs} ms`;
}

// Parsed under its option's name, so a problem reads "retry.maxAttempts: ..." as in defineJob.
const overrideOptionSchema = z.strictObject({ retry: retryOverrideSchema });

/**
 * `enqueue(job, payload, { retry })`: the policy stored with the job and the
 * attempt budget it gives. A function (`delayMs`) cannot be stored with a
 * row, so such a policy is refused here with the way round it.
 */
export function resolveRetryOverride(value: RetryOverride, jobName: string): { readonly maxAttempts: number; readonly stored: StoredRetryPolicy } {
  if (typeof value === "object" && value !== null && "delayMs" in value) {
    throw new InvalidArgumentError(
      `enqueue(${jobName}): a retry policy with delayMs cannot be stored with a job; pass a retry class, { maxAttempts } or { maxAttempts, baseMs, capMs }, or define the policy on the job.`,
    );
  }
  const parsed = overrideOptionSchema.safeParse({ retry: value });
  if (!parsed.success) throw new InvalidArgumentError(`Invalid enqueue(${jobName}) option: ${describeShapeIssues(parsed.error, overrideOptionSchema, { noun: "option" })}.`);
  const override = parsed.data.retry;
  if (typeof override === "string") return { maxAttempts: RETRY_CLASSES[override].maxAttempts, stored: { class: override } };
  // The schema's check made maxAttempts required; its type cannot say so.
  const stored = override as Extract<StoredRetryPolicy, { readonly maxAttempts: number }>;
  return { maxAttempts: stored.maxAttempts, stored };
}

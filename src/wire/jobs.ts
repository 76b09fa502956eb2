import { summarizeIdempotencyKey, type FailurePage, type FailureTicket } from "../operators/failures.js";
import type { CancelledJob } from "../operators/operations.js";
import type { RetriedJob } from "../operators/retry-failed.js";
import { iso, WIRE_VERSION, type Versioned } from "./version.js";

/** A failure ticket: a job that failed for good, never its payload; its error redacted. */
export interface FailureDocument {
  readonly id: number;
  readonly job_type: string;
  readonly queue: string;
  readonly attempts: number;
  readonly max_attempts: number;
  readonly last_error: string | null;
  readonly failed_at: string;
  /** The slot, for a scheduled job. */
  readonly scheduled_for: string | null;
  readonly schedule_key: string | null;
  /** The idempotency key, shortened (prefix and digest) and redacted. */
  readonly idempotency: string | null;
  /** A retry policy given at enqueue instead of the job's; null: the job's own. */
  readonly retry_override: string | null;
  /** The job an operator's retry of this ticket created, with its status now. */
  readonly retried_as: { readonly id: number; readonly status: string } | null;
}

/** `GET /admin/scheduler/failures` and `cronledger failures --json`: newest first. */
export interface FailuresDocument extends Versioned {
  readonly failures: readonly FailureDocument[];
  /** The `before` cursor of the next, older page; null on the last page. */
  readonly next_before: string | null;
}

/** `POST /admin/scheduler/jobs/:id/retry`: the new job (or the earlier retry of the same ticket). */
export interface RetriedDocument extends Versioned {
  readonly id: number;
  readonly job_type: string;
  readonly retry_of: number;
  readonly idempotency: string | null;
  /** False when the ticket had already been retried: `id` is that earlier retry. */
  readonly created: boolean;
}

/** `POST /admin/scheduler/jobs/:id/cancel` and `cronledger cancel --json`. */
export interface CancelledDocument extends Versioned {
  readonly id: number;
  readonly job_type: string;
  /** queued, retrying (waiting for a retry), running (now asked to stop), stopping (already asked) or cancelled (already: nothing changed). */
  readonly was: CancelledJob["was"];
  readonly attempts: number;
  readonly max_attempts: number;
  /** False when this request changed nothing (already cancelled, or already asked to stop). */
  readonly cancelled: boolean;
  /** A running job's stop request: who, why, and how long its handler has to return before the job is failed as killed. */
  readonly stop: { readonly requested_at: string; readonly requested_by: string; readonly reason: string | null; readonly grace_ms: number } | null;
}

/** An HTTP error: the error's stable code (src/errors.ts) and what to do, in words. */
export interface ErrorDocument extends Versioned {
  readonly error: string;
  readonly message: string;
}

function failureDocument(failure: FailureTicket): FailureDocument {
  return {
    id: failure.id,
    job_type: failure.jobType,
    queue: failure.queue,
    attempts: failure.attempts,
    max_attempts: failure.maxAttempts,
    last_error: failure.lastError,
    failed_at: iso(failure.failedAt),
    scheduled_for: iso(failure.scheduledFor),
    schedule_key: failure.scheduleKey,
    idempotency: failure.idempotency,
    retry_override: failure.retryOverride,
    retried_as: failure.retriedAs,
  };
}

export function failuresDocument(page: FailurePage): FailuresDocument {
  return { version: WIRE_VERSION, failures: page.failures.map(failureDocument), next_before: page.nextBefore };
}

export function retriedDocument(retried: RetriedJob): RetriedDocument {
  return {
    version: WIRE_VERSION,
    id: retried.id,
    job_type: retried.jobName,
    retry_of: retried.retryOf,
    idempotency: summarizeIdempotencyKey(retried.idempotencyKey),
    created: retried.created,
  };
}

export function cancelledDocument(cancelled: CancelledJob): CancelledDocument {
  return {
    version: WIRE_VERSION,
    id: cancelled.id,
    job_type: cancelled.jobName,
    was: cancelled.was,
    attempts: cancelled.attempts,
    max_attempts: cancelled.maxAttempts,
    cancelled: cancelled.cancelled,
    stop:
      cancelled.stop === null
        ? null
        : { requested_at: cancelled.stop.requestedAt.toISOString(), requested_by: cancelled.stop.requestedBy, reason: cancelled.stop.reason, grace_ms: cancelled.stop.graceMs },
  };
}

export function errorDocument(code: string, message: string): ErrorDocument {
  return { version: WIRE_VERSION, error: code, message };
}

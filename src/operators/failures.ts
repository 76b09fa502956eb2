import { createHash } from "node:crypto";
import type { Executor } from "../db/executor.js";
import { jobsByIdempotencyKey } from "../db/sql/jobs.js";
import { failedJobs } from "../db/sql/operators.js";
import { InvalidFailureFilterError } from "../errors.js";
import { redact } from "../redact.js";
import { describeRetryOverride, readStoredRetryPolicy } from "../jobs/retry-override.js";
import { retryIdempotencyKey } from "./retry-failed.js";

export const DEFAULT_FAILURES_LIMIT = 50;
export const MAX_FAILURES_LIMIT = 500;
const MAX_IDEMPOTENCY_SUMMARY_LENGTH = 96;

export interface FailureFilter {
  /** Only failures of this job name. */
  readonly jobType?: string;
  /** At most this many tickets (default 50, at most 500). */
  readonly limit?: number;
  /** The `nextBefore` cursor of the previous page: tickets that failed before it. */
  readonly before?: string;
}

/** A terminal `failed` job row as shown to operators: never its payload, its error redacted again on the way out. */
export interface FailureTicket {
  readonly id: number;
  readonly jobType: string;
  readonly queue: string;
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly lastError: string | null;
  readonly failedAt: Date;
  readonly scheduledFor: Date | null;
  readonly scheduleKey: string | null;
  /** The idempotency key, shortened (prefix plus digest) and redacted; null for jobs enqueued without one. */
  readonly idempotency: string | null;
  /** The retry policy given at enqueue instead of the job's (`probe`, `1 attempt`, ...); null: the job's own. */
  readonly retryOverride: string | null;
  /** The job an operator's retry of this ticket created, with its status now; null while it was not retried. */
  readonly retriedAs: { readonly id: number; readonly status: string } | null;
}

export interface FailurePage {
  readonly failures: FailureTicket[];
  /** Pass as `before` for the next (older) page; null on the last page. */
  readonly nextBefore: string | null;
}

// The cursor is the last ticket's failure instant in microseconds plus its id: exact, and stable while rows are added.
const CURSOR = /^(\d{1,17})_(\d{1,17})$/;

function parseLimit(limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_FAILURES_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_FAILURES_LIMIT) {
    throw new InvalidFailureFilterError(`limit must be an integer from 1 to ${MAX_FAILURES_LIMIT} (got ${String(limit)}).`);
  }
  return limit;
}

function parseCursor(before: string | undefined): { micros: string; id: number } | null {
  if (before === undefined || before === "") return null;
  const match = CURSOR.exec(before);
  if (!match?.[1] || !match[2]) {
    throw new InvalidFailureFilterError(`before must be the nextBefore cursor of a previous page (got ${JSON.stringify(before.slice(0, 40))}).`);
  }
  return { micros: match[1], id: Number(match[2]) };
}

/** Enough of an idempotency key to recognise it, never enough to carry data an operator should not see. */
export function summarizeIdempotencyKey(key: string | null): string | null {
  if (key === null) return null;
  const redacted = redact(key);
  if (redacted.length <= MAX_IDEMPOTENCY_SUMMARY_LENGTH) return redacted;
  const digest = createHash("sha256").update(key).digest("hex").slice(0, 12);
  return `${redacted.slice(0, MAX_IDEMPOTENCY_SUMMARY_LENGTH - 14)}…~${digest}`;
}

/** Terminal failures, newest first, without payloads and with errors redacted. */
export async function listFailures(executor: Executor, filter: FailureFilter = {}): Promise<FailurePage> {
  const limit = parseLimit(filter.limit);
  const rows = await failedJobs(executor, { jobName: filter.jobType, before: parseCursor(filter.before), limit: limit + 1 });
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  // A retry is found by the idempotency key it was created under (src/operators/retry-failed.ts): one lookup for the page.
  const retryKeys = new Map(page.map((row) => [row.id, retryIdempotencyKey(row.id, row.idempotency_key)]));
  const retries =
    page.length === 0 ? [] : await jobsByIdempotencyKey(executor, [...new Set(page.map((row) => row.job_name))], [...retryKeys.values()]);
  const retryOf = (row: (typeof page)[number]) => {
    const found = retries.find((retry) => retry.job_name === row.job_name && retry.idempotency_key === retryKeys.get(row.id));
    return found === undefined ? null : { id: found.id, status: found.status };
  };
  return {
    failures: page.map((row) => ({
      id: row.id,
      jobType: row.job_name,
      queue: row.queue,
      attempts: row.attempts,
      maxAttempts: row.max_attempts,
      // Redacted again: rows written by older versions or by hand never went through redactError.
      lastError: row.last_error === null ? null : redact(row.last_error),
      failedAt: new Date(row.failed_at_ms),
      scheduledFor: row.scheduled_for_ms === null ? null : new Date(row.scheduled_for_ms),
      scheduleKey: row.schedule_key,
      idempotency: summarizeIdempotencyKey(row.idempotency_key),
      retryOverride: describeRetryOverride(readStoredRetryPolicy(row.retry_policy)),
      retriedAs: retryOf(row),
    })),
    nextBefore: rows.length > limit && last ? `${last.failed_at_us}_${last.id}` : null,
  };
}

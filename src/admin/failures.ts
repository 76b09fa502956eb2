import { createHash } from "node:crypto";
import { sql } from "drizzle-orm";
import { query, type Database } from "../db/connection.js";
import { CronledgerError } from "../errors.js";
import { redact } from "./redact.js";

export const DEFAULT_FAILURES_LIMIT = 50;
export const MAX_FAILURES_LIMIT = 500;
const MAX_IDEMPOTENCY_SUMMARY_LENGTH = 96;

/** A failures filter that cannot be used (limit out of range, malformed cursor). */
export class InvalidFailureFilterError extends CronledgerError {
  constructor(message: string) {
    super("invalid_filter", message);
  }
}

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
}

export interface FailurePage {
  readonly failures: FailureTicket[];
  /** Pass as `before` for the next (older) page; null on the last page. */
  readonly nextBefore: string | null;
}

interface FailureRow {
  id: number;
  job_name: string;
  queue: string;
  attempts: number;
  max_attempts: number;
  last_error: string | null;
  failed_at_ms: number;
  failed_at_us: string;
  scheduled_for_ms: number | null;
  schedule_key: string | null;
  idempotency_key: string | null;
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

/** Terminal failures, newest first. A failed row without finished_at (written by hand) counts from its creation. */
export async function listFailures(database: Database, filter: FailureFilter = {}): Promise<FailurePage> {
  const limit = parseLimit(filter.limit);
  const cursor = parseCursor(filter.before);
  const failedAt = sql`coalesce(finished_at, created_at)`;
  const rows = await query<FailureRow>(
    database.db,
    sql`select id::float8 as id, job_name, queue, attempts, max_attempts, last_error,
               (extract(epoch from ${failedAt}) * 1000)::float8 as failed_at_ms,
               (extract(epoch from ${failedAt}) * 1000000)::bigint::text as failed_at_us,
               (extract(epoch from scheduled_for) * 1000)::float8 as scheduled_for_ms,
               schedule_key, idempotency_key
        from cronledger.jobs
        where status = 'failed'
          ${filter.jobType === undefined ? sql`` : sql`and job_name = ${filter.jobType}`}
          ${
            cursor === null
              ? sql``
              : sql`and (${failedAt}, id) < (timestamptz 'epoch' + ${cursor.micros}::bigint * interval '1 microsecond', ${cursor.id}::bigint)`
          }
        order by ${failedAt} desc, id desc
        limit ${limit + 1}`,
  );
  const page = rows.slice(0, limit);
  const last = page.at(-1);
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
    })),
    nextBefore: rows.length > limit && last ? `${last.failed_at_us}_${last.id}` : null,
  };
}

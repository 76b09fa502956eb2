import type { Executor } from "../db/executor.js";
import { insertJobs, jobsByIdempotencyKey, type NewJobRow } from "../db/sql/jobs.js";
import { JobNotRegisteredError, PayloadValidationError } from "../errors.js";
import { boundKey } from "../keys.js";
import { closest } from "../suggest.js";
import type { Tracing } from "../tracing.js";
import { storablePayload, type EnqueuedJob, type EnqueueRequest, type JobDefinition, type JobReference } from "./define-job.js";
import { DEFAULT_MAX_PAYLOAD_BYTES, payloadTooLarge } from "./payload-limit.js";
import { resolveEnqueueOptions } from "./enqueue-options.js";

function resolveJob(reference: JobReference, registry: ReadonlyMap<string, JobDefinition>): JobDefinition {
  const name = typeof reference === "string" ? reference : reference.name;
  const job = registry.get(name) ?? (typeof reference === "string" ? undefined : reference);
  if (!job) throw new JobNotRegisteredError(name, closest(name, [...registry.keys()]));
  return job;
}

/** Validates every request before anything is written: one bad payload writes nothing. */
function toRow(request: EnqueueRequest, registry: ReadonlyMap<string, JobDefinition>, maxPayloadBytes: number, position?: number): NewJobRow {
  const job = resolveJob(request.job, registry);
  const options = resolveEnqueueOptions(request.options, job.name, position);
  const payload = storablePayload(job, request.payload, maxPayloadBytes);
  const context = position === undefined ? undefined : `enqueueMany item ${position}`;
  if ("tooLarge" in payload) throw payloadTooLarge(job.name, payload.tooLarge, maxPayloadBytes, context);
  if (!payload.ok) throw new PayloadValidationError(job.name, payload.issues, context);
  const { runAt, retry } = options;
  return {
    jobName: job.name,
    queue: options.queue ?? job.queue,
    payloadJson: payload.json,
    priority: options.priority ?? job.priority,
    runAt: runAt === undefined ? null : runAt.toISOString(),
    delayMs: options.delayMs,
    maxAttempts: retry?.maxAttempts ?? job.retry.maxAttempts,
    idempotencyKey: options.idempotencyKey === undefined ? null : boundKey(options.idempotencyKey),
    scheduleKey: null,
    scheduledFor: null,
    retryPolicyJson: retry === undefined ? null : JSON.stringify(retry.stored),
  };
}

/**
 * Inserts jobs in one statement. Rows whose idempotency key exists are
 * skipped by the insert and looked up afterwards, so callers always get the
 * job that holds the key. With `tracing`, the write is a producer span whose
 * context every row stores; invalid requests are refused before it.
 */
export async function enqueueJobs(
  executor: Executor,
  registry: ReadonlyMap<string, JobDefinition>,
  requests: readonly EnqueueRequest[],
  maxPayloadBytes: number = DEFAULT_MAX_PAYLOAD_BYTES,
  tracing?: Tracing,
): Promise<EnqueuedJob[]> {
  const rows = requests.map((request, index) => toRow(request, registry, maxPayloadBytes, requests.length > 1 ? index : undefined));
  if (rows.length === 0) return [];
  if (tracing === undefined) return writeJobs(executor, rows, null);
  return tracing.send({ operation: "enqueue", jobs: rows }, (traceContextJson) => writeJobs(executor, rows, traceContextJson), (jobs) => jobs);
}

async function writeJobs(executor: Executor, rows: readonly NewJobRow[], traceContextJson: string | null): Promise<EnqueuedJob[]> {
  const inserted = await insertJobs(executor, rows, traceContextJson);

  const results: (EnqueuedJob | undefined)[] = new Array(rows.length);
  const keyOf = (jobName: string, idempotencyKey: string) => `${jobName}\n${idempotencyKey}`;
  const byKey = new Map<string, number>();
  // Rows without a key are never skipped and come back in input order; keyed rows are matched by key.
  const unkeyedIds = inserted.filter((row) => row.idempotency_key === null).map((row) => row.id);
  for (const row of inserted) if (row.idempotency_key !== null) byKey.set(keyOf(row.job_name, row.idempotency_key), row.id);
  const createdKeys = new Set<string>();
  rows.forEach((row, index) => {
    if (row.idempotencyKey === null) {
      const id = unkeyedIds.shift();
      if (id !== undefined) results[index] = { id, jobName: row.jobName, created: true };
      return;
    }
    const key = keyOf(row.jobName, row.idempotencyKey);
    const id = byKey.get(key);
    if (id !== undefined && !createdKeys.has(key)) {
      createdKeys.add(key);
      results[index] = { id, jobName: row.jobName, created: true };
    }
  });

  const unresolved = rows.flatMap((row, index) => (results[index] === undefined ? [{ row, index }] : []));
  if (unresolved.length > 0) {
    const existing = await jobsByIdempotencyKey(
      executor,
      [...new Set(unresolved.map(({ row }) => row.jobName))],
      [...new Set(unresolved.map(({ row }) => row.idempotencyKey ?? ""))],
    );
    for (const found of existing) byKey.set(keyOf(found.job_name, found.idempotency_key), found.id);
    for (const { row, index } of unresolved) {
      const id = byKey.get(keyOf(row.jobName, row.idempotencyKey ?? ""));
      if (id === undefined) throw new Error(`cronledger: job ${row.jobName} with idempotency key ${row.idempotencyKey} vanished while enqueueing`);
      results[index] = { id, jobName: row.jobName, created: false };
    }
  }
  return results as EnqueuedJob[];
}


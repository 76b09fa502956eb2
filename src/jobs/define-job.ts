import { z } from "zod";
import { parseDuration, type Duration } from "../duration.js";
import { ConfigError } from "../errors.js";
import type { Logger } from "../log.js";
import { duration, fn, type Check, type OptionShape, type Takes } from "../option-schema.js";
import { describeShapeIssues } from "../suggest.js";
import type { EnqueueManyOptions, EnqueueOptions } from "./enqueue-options.js";
import { bytesOverLimit, DEFAULT_MAX_PAYLOAD_BYTES } from "./payload-limit.js";
import { jobRetryPolicy, retryPolicySchema, type RetryClass, type RetryPolicy } from "./retry.js";
import { isStandardSchema, validateWith, type StandardSchemaV1, type Validated } from "./standard-schema.js";

/** The payload a schema accepts (what enqueue takes) and the one it gives the handler. */
export type PayloadInput<S extends StandardSchemaV1> = StandardSchemaV1.InferInput<S>;
export type PayloadOutput<S extends StandardSchemaV1> = StandardSchemaV1.InferOutput<S>;
/** What a job without a payload schema takes: nothing (stored as {}) or any object. */
export type AnyPayloadSchema = StandardSchemaV1<Record<string, unknown> | undefined, Record<string, unknown> | undefined>;

/** The schedule entry and slot a scheduled job was fired for. */
export interface JobSchedule {
  /** The entry's ledger key (the ledger row's `key`, also the job's `schedule_key`). */
  readonly key: string;
  /** The entry's identity (job, entry key, canonical cron, time zone); null when this process does not load that entry (a rollout). */
  readonly identity: string | null;
  /** The entry's own `key`, if it has one; null otherwise or when the entry is not loaded here. */
  readonly entryKey: string | null;
  /** The slot this run is for; for a run-now, the instant it was triggered. */
  readonly slot: Date;
  /** True for a run an operator backfilled (`ledger.backfill`, `cronledger backfill`), false for one the ticker fired. */
  readonly backfilled: boolean;
  /** Set when an operator ran the entry by hand (`ledger.trigger`, the page's Run now, `cronledger trigger`): who, and the request's id. */
  readonly trigger: { readonly by: string; readonly requestId: string } | null;
}

/** What a handler sees besides its payload. */
export interface JobContext extends Enqueuer {
  readonly jobId: number;
  readonly jobName: string;
  /** 1 on the first run, incremented by every retry. */
  readonly attempt: number;
  readonly maxAttempts: number;
  /** The slot this run is for, for scheduled jobs; null for enqueued ones. */
  readonly scheduledFor: Date | null;
  /** The schedule entry and slot that produced this job; null for enqueued jobs. */
  readonly schedule: JobSchedule | null;
  /**
   * Aborted on timeout, on shutdown past the grace period, and when an operator asks the running job to stop
   * (`cancelJob`): then its `reason` is a JobCancelledError saying who and why. Pass it to fetch() and friends.
   */
  readonly signal: AbortSignal;
  readonly log: Logger;
}

/** A business outcome that ends the job without retrying. */
export interface JobOutcome {
  readonly outcome: "skip" | "noop";
  readonly reason?: string;
}

/** Ends the job as skipped (nothing to do for a business reason); no retry. */
export function skip(reason?: string): JobOutcome {
  return { outcome: "skip", ...(reason === undefined ? {} : { reason }) };
}

/** Ends the job as a no-op (the work was already done); no retry. */
export function noop(reason?: string): JobOutcome {
  return { outcome: "noop", ...(reason === undefined ? {} : { reason }) };
}

export type JobResult = JobOutcome | void | undefined;

export interface JobOptions<S extends StandardSchemaV1> {
  /** Stable identity stored in rows: renaming a job orphans its queued rows. */
  readonly name: string;
  /** Any Standard Schema validator (zod 3.24+ or 4, valibot 1, arktype 2, ...); the payload's types are inferred from it. Validated synchronously. */
  readonly payload?: S;
  readonly retry?: RetryClass | RetryPolicy;
  readonly timeout?: Duration;
  readonly queue?: string;
  /** Lower runs first (like graphile-worker, River and Oban). */
  readonly priority?: number;
  run(payload: PayloadOutput<S>, ctx: JobContext): Promise<JobResult> | JobResult;
}

export interface JobDefinition<S extends StandardSchemaV1 = StandardSchemaV1> {
  readonly kind: "cronledger.job";
  readonly name: string;
  readonly payload: S;
  readonly retry: RetryPolicy;
  readonly retryClass: RetryClass | "custom";
  readonly timeoutMs: number;
  readonly queue: string;
  readonly priority: number;
  run(payload: PayloadOutput<S>, ctx: JobContext): Promise<JobResult> | JobResult;
}

/** Job names become row values, metric labels and identity parts, so they stay plain. */
export const JOB_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,199}$/;
const QUEUE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$/;
export const DEFAULT_TIMEOUT = "5m";

// A job without a payload schema accepts an absent payload (stored as {}) or any object.
// cronledger's own zod makes it; its type is the validator-neutral AnyPayloadSchema.
const ANY_PAYLOAD: AnyPayloadSchema = z.record(z.string(), z.unknown()).optional();

/** What defineJob takes, checked strictly: an unknown key is refused with a did-you-mean, like every other options object. */
const jobShape = {
  name: z
    .string({ error: 'must be a job name such as "email.send-digest"' })
    .regex(JOB_NAME_PATTERN, 'must be 1-200 letters, digits and . _ : / - (for example "email.send-digest")'),
  payload: z
    .custom<StandardSchemaV1>(isStandardSchema, {
      error:
        'is not a Standard Schema validator (no "~standard" property): use zod 3.24 or later (classic or "zod/v4"), zod 4, valibot 1, arktype 2 or another validator that implements standardschema.dev',
    })
    .optional(),
  retry: retryPolicySchema.optional(),
  timeout: duration("timeout").optional(),
  queue: z.string({ error: "must be a queue name" }).regex(QUEUE_PATTERN, "must be 1-100 letters, digits and . _ : -").optional(),
  priority: z.number({ error: "must be an integer" }).int("must be an integer").optional(),
  run: fn<JobOptions<StandardSchemaV1>["run"]>(),
} satisfies OptionShape<JobOptions<StandardSchemaV1>>;
type _JobShapeTakesJobOptions = Check<Takes<JobOptions<StandardSchemaV1>, typeof jobShape>>;
const jobOptionsSchema = z.strictObject(jobShape);

function parseJobOptions(options: unknown): z.output<typeof jobOptionsSchema> {
  const result = jobOptionsSchema.safeParse(options);
  if (result.success) return result.data;
  const name: unknown = (options as { name?: unknown } | undefined)?.name;
  const problems = describeShapeIssues(result.error, jobOptionsSchema, { noun: "option", list: "defineJob takes" });
  throw new ConfigError(`Invalid defineJob(${typeof name === "string" ? JSON.stringify(name) : ""}) options: ${problems}.`);
}

export function defineJob<S extends StandardSchemaV1 = AnyPayloadSchema>(options: JobOptions<S>): JobDefinition<S> {
  const parsed = parseJobOptions(options);
  // The values as given, not zod's copies: the payload schema, the handler and a retry policy's delayMs keep their identity.
  const retry = options.retry ?? "entity";
  return {
    kind: "cronledger.job",
    name: parsed.name,
    payload: (options.payload ?? ANY_PAYLOAD) as S,
    retry: jobRetryPolicy(retry),
    retryClass: typeof retry === "string" ? retry : "custom",
    timeoutMs: parsed.timeout ?? parseDuration(DEFAULT_TIMEOUT, "timeout"),
    queue: parsed.queue ?? "default",
    priority: parsed.priority ?? 0,
    run: options.run,
  };
}

export function isJobDefinition(value: unknown): value is JobDefinition {
  return typeof value === "object" && value !== null && (value as { kind?: unknown }).kind === "cronledger.job";
}

/** The stored payload checked by the job's schema, as the worker reads it. */
export function validatePayload(job: JobDefinition, payload: unknown): Validated {
  // A job without a schema takes any object: what JSON.parse made of a stored object is one as it stands, so
  // zod is not asked to copy it (a record parse per job was 5 % of the bytes a no-op drain's worker allocated).
  if (job.payload === ANY_PAYLOAD && isPlainObject(payload)) return { ok: true, value: payload };
  return validateWith(job.payload, payload);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && Object.getPrototypeOf(value) === Object.prototype;
}

/**
 * The payload as it will be stored, checked the way the worker will read it:
 * serialised to JSON, parsed back, validated by the job's schema. A payload
 * that only validates before the round trip (a Date for `z.date()`, a
 * BigInt, undefined inside an array) would fail terminally at run time, so
 * it is refused here, with the reason, before anything is written. So is
 * one whose JSON is over `maxBytes` (see payloadTooLarge).
 */
export function storablePayload(
  job: JobDefinition,
  payload: unknown,
  maxBytes: number = DEFAULT_MAX_PAYLOAD_BYTES,
): { ok: true; json: string } | { ok: false; issues: string[] } | { ok: false; tooLarge: { bytes: number; atLeast: boolean } } {
  let json: string;
  try {
    json = JSON.stringify(payload ?? {});
  } catch (error) {
    return { ok: false, issues: [`payload: cannot be stored as JSON (${error instanceof Error ? error.message : String(error)})`] };
  }
  // Before any parsing: a 20 MB payload costs a length check here, not a parse and a schema walk first.
  const tooLarge = bytesOverLimit(json, maxBytes);
  if (tooLarge !== undefined) return { ok: false, tooLarge };
  // One parse when the payload is good; the given value is parsed as well only to say why it is not.
  const stored = validateWith(job.payload, JSON.parse(json));
  if (stored.ok) return { ok: true, json };
  const given = validateWith(job.payload, payload);
  if (!given.ok) return { ok: false, issues: given.issues };
  return {
    ok: false,
    issues: stored.issues.map((issue) => `${issue} after the JSON round trip it is stored through (use a JSON-safe schema, e.g. z.coerce.date() or an ISO string)`),
  };
}

// ---------------------------------------------------------------- what a handler and the application enqueue with

/**
 * What enqueue takes after the job: its payload, required when the job's
 * schema requires one (`enqueue(job)` does not compile then), and the options.
 */
export type EnqueueArgs<S extends StandardSchemaV1> = undefined extends PayloadInput<S>
  ? [payload?: PayloadInput<S>, options?: EnqueueOptions]
  : [payload: PayloadInput<S>, options?: EnqueueOptions];

/** What a handler and the application use to enqueue (`ctx.enqueue`, `ledger.enqueue`). */
export interface Enqueuer {
  enqueue<S extends StandardSchemaV1>(job: JobReference<S>, ...args: EnqueueArgs<S>): Promise<EnqueuedJob>;
  /** Validates every payload first, then inserts all jobs in one statement; each payload is checked against its job's schema at compile time. */
  enqueueMany<const R extends readonly object[]>(requests: EnqueueRequests<R>, options?: EnqueueManyOptions): Promise<EnqueuedJob[]>;
}

export interface EnqueuedJob {
  readonly id: number;
  readonly jobName: string;
  /** False when the idempotency key already existed and this is that earlier job. */
  readonly created: boolean;
}

export type JobReference<S extends StandardSchemaV1 = StandardSchemaV1> = JobDefinition<S> | string;

/** One job of `enqueueMany`, loosely typed: a job by definition or name, and any payload its schema takes. */
export interface EnqueueRequest<S extends StandardSchemaV1 = StandardSchemaV1> {
  readonly job: JobReference<S>;
  readonly payload?: PayloadInput<S>;
  readonly options?: Omit<EnqueueOptions, "db">;
}

/** One job of `enqueueMany` by its definition: the payload has the schema's input type, and is required when the schema requires one. */
export type TypedEnqueueRequest<S extends StandardSchemaV1 = StandardSchemaV1> = {
  readonly job: JobDefinition<S>;
  readonly options?: Omit<EnqueueOptions, "db">;
} & (undefined extends PayloadInput<S> ? { readonly payload?: PayloadInput<S> } : { readonly payload: PayloadInput<S> });

/** One job of `enqueueMany` by name: its payload is checked at run time, by the registered job's schema. */
export interface NamedEnqueueRequest {
  readonly job: string;
  readonly payload?: unknown;
  readonly options?: Omit<EnqueueOptions, "db">;
}

type CheckedRequest<R> = R extends { readonly job: JobDefinition<infer S> } ? TypedEnqueueRequest<S> : R extends { readonly job: string } ? NamedEnqueueRequest : EnqueueRequest;

/** `enqueueMany`'s requests, each checked against its own job's payload schema (as defineSchedule checks entries). */
export type EnqueueRequests<R extends readonly object[]> = R & { readonly [K in keyof R]: CheckedRequest<R[K]> };

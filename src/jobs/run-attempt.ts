import type { ClaimedJob } from "../db/sql/jobs.js";
import { InvalidStoredJobError, JobNotRegisteredError, JobTimeoutError, NonRetryableError, WorkerShutdownError } from "../errors.js";
import { redactError } from "../redact.js";
import type { AttemptInput } from "./attempt.js";
import type { Attempt } from "./attempt.js";
import type { Completion } from "./completion.js";
import { validatePayload, type JobDefinition } from "./define-job.js";
import { retryDelayMs } from "./retry.js";
import { effectiveRetryPolicy, readStoredRetryPolicy } from "./retry-override.js";
import { stoppedCompletion } from "./stops.js";
import type { WorkerDependencies } from "./worker-deps.js";

/**
 * One claimed job's run, as the worker starts it and reads its end: the
 * payload checked against the job's schema, the timeout armed, the handler
 * run (inside its attempt's span with tracing on), and what the run became:
 * a success, a retry after the policy's delay, a terminal failure, a
 * hand-back on shutdown, or the end of a job an operator asked to stop. The
 * worker (src/jobs/worker.ts) owns the slots and the writes; this is the
 * part a reader looks for when asking "why did this attempt end this way".
 */

/** What running an attempt needs of the worker: its events, its tracing, the random source of retry jitter. */
export interface AttemptRunner {
  readonly events: WorkerDependencies["events"];
  readonly tracing: WorkerDependencies["tracing"];
  readonly random: () => number;
}

/** The `ctx` fields of a claimed job's attempt. */
export function attemptInput(job: ClaimedJob): AttemptInput {
  return {
    jobId: job.id,
    jobName: job.jobName,
    attempt: job.attempts,
    maxAttempts: job.maxAttempts,
    scheduledFor: job.scheduledForMs === null ? null : new Date(job.scheduledForMs),
    scheduleKey: job.scheduleKey,
    idempotencyKey: job.idempotencyKey,
  };
}

export async function runAttempt(runner: AttemptRunner, job: ClaimedJob, definition: JobDefinition | undefined, attempt: Attempt): Promise<Completion> {
  const { scheduleKey, queue, traceContext } = job;
  runner.events.jobStarted({ jobId: job.id, jobName: job.jobName, attempt: job.attempts, maxAttempts: job.maxAttempts, queue, scheduleKey, scheduledFor: attempt.scheduledFor, traceContext });
  if (definition === undefined) return failedAttempt(runner, job, undefined, new JobNotRegisteredError(job.jobName));
  const parsed = validatePayload(definition, JSON.parse(job.payload));
  if (!parsed.ok) return failedAttempt(runner, job, definition, new InvalidStoredJobError(job.jobName, job.id, parsed.issues));
  const timeout = setTimeout(() => attempt.abort(new JobTimeoutError(job.jobName, definition.timeoutMs)), definition.timeoutMs);
  try {
    // With tracing on, the handler runs inside its attempt's span (src/tracing.ts); without, as it always did.
    const { tracing } = runner;
    const result = tracing === undefined ? await attempt.run(definition, parsed.value) : await tracing.attempt(job.id, job.attempts, () => attempt.run(definition, parsed.value));
    const stopped = stoppedCompletion(job, attempt);
    if (stopped !== null) return stopped;
    const outcome = result && typeof result === "object" && (result.outcome === "skip" || result.outcome === "noop") ? result.outcome : null;
    return { kind: "succeeded", id: job.id, attempt: job.attempts, outcome };
  } catch (error) {
    // A hand-back of a job asked to stop ends it cancelled all the same (the completion statement sees the request).
    if (attempt.abortReason instanceof WorkerShutdownError) return { kind: "returned", id: job.id, attempt: job.attempts };
    const stopped = stoppedCompletion(job, attempt);
    if (stopped !== null) return stopped;
    return failedAttempt(runner, job, definition, attempt.isAborted ? attempt.abortReason : error);
  } finally {
    clearTimeout(timeout);
  }
}

/** Decides what a failed attempt becomes: a retry after the policy's delay, or a terminal failure. */
export function failedAttempt(runner: Pick<AttemptRunner, "random">, job: ClaimedJob, definition: JobDefinition | undefined, error: unknown): Completion {
  const terminal =
    definition === undefined ||
    error instanceof NonRetryableError ||
    error instanceof InvalidStoredJobError ||
    (error as { code?: unknown } | null)?.code === "non_retryable" ||
    job.attempts >= job.maxAttempts;
  const message = redactError(error);
  if (terminal) return { kind: "failed", id: job.id, attempt: job.attempts, error: message };
  const policy = effectiveRetryPolicy(definition.retry, readStoredRetryPolicy(job.retryPolicy));
  return { kind: "retry", id: job.id, attempt: job.attempts, error: message, delayMs: retryDelayMs(policy, job.attempts, runner.random) };
}

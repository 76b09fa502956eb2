import type { Database } from "../db/connection.js";
import type { DatabaseHealth } from "../db/health.js";
import { completeJobs, type CompletionRow, type LateCompletion } from "../db/sql/completions.js";
import { claimJobs, heartbeatJobs, JOBS_CHANNEL, type ClaimedJob, type ClaimRequest, type HeartbeatAnswer, type HeldAttempt } from "../db/sql/jobs.js";
import { CANCEL_CHANNEL } from "../db/sql/jobs.js";
import { unregisterWorker, type WorkerRegistration } from "../db/sql/workers.js";
import type { CronledgerEvents } from "../events.js";
import type { Logger } from "../log.js";
import type { Tracing } from "../tracing.js";
import type { AttemptServices } from "./attempt.js";
import type { JobDefinition } from "./define-job.js";

/**
 * What a worker asks of the database, and nothing else: claim, complete,
 * heartbeat (which also registers it and brings stop requests), unregister,
 * and the wake-ups and stop requests of LISTEN. The worker is given one (src/jobs/worker.ts); `workerStore` is
 * the one over cronledger's connection and the statements of
 * src/db/sql/jobs.ts and workers.ts.
 */
export interface WorkerStore {
  /** Claims up to `request.limit` ready jobs of the worker's names and queues (and its ready chores). */
  claim(request: ClaimRequest): Promise<ClaimedJob[]>;
  /** Writes a batch of finished attempts, fenced by their claims; resolves with what became of those the fence turned away. */
  complete(workerId: string, rows: readonly CompletionRow[], now?: Date): Promise<readonly LateCompletion[]>;
  /** Registers the worker (or refreshes its row) and the heartbeats of the attempts it holds; resolves with the ids it still holds and their stop requests. */
  heartbeat(worker: WorkerRegistration, held: readonly HeldAttempt[]): Promise<HeartbeatAnswer>;
  /** Takes a stopped worker out of the registry. */
  unregister(workerId: string): Promise<void>;
  /** Calls `onReady(queue)` whenever a queue gains ready jobs (LISTEN/NOTIFY); resolves with the way to stop. */
  listen(onReady: (queue: string) => void): Promise<() => Promise<void>>;
  /** Calls `onStop(id)` whenever a running job is asked to stop (cancelJob's NOTIFY); resolves with the way to stop listening. */
  listenForStops(onStop: (jobId: number) => void): Promise<() => Promise<void>>;
}

export function workerStore(database: Database): WorkerStore {
  const db = database.db;
  return {
    claim: (request) => claimJobs(db, request),
    complete: (workerId, rows, now) => completeJobs(db, workerId, rows, now),
    heartbeat: (worker, held) => heartbeatJobs(db, worker, held),
    unregister: (workerId) => unregisterWorker(db, workerId),
    listen: (onReady) => database.listen(JOBS_CHANNEL, onReady),
    listenForStops: (onStop) => database.listen(CANCEL_CHANNEL, (payload) => onStop(Number(payload))),
  };
}

/**
 * What a worker is given besides its settings, each as narrow as it uses it:
 * the statements of its jobs' life (`store`), the job definitions it runs,
 * what handlers reach through `ctx` (`attempts`), and the logger, events and
 * database health it reports to. It reaches into nothing else.
 */
export interface WorkerDependencies {
  readonly store: WorkerStore;
  /** The jobs it can run, by name (chores included): it registers and claims their names. */
  readonly jobs: ReadonlyMap<string, JobDefinition>;
  /** `ctx.enqueue`, `ctx.schedule` and the parent of `ctx.log`. */
  readonly attempts: AttemptServices;
  readonly logger: Logger;
  readonly events: Pick<CronledgerEvents, "jobsClaimed" | "jobStarted" | "jobFinished" | "lateCompletion">;
  /** With the `tracing` option: runs each handler inside its attempt's span (src/tracing.ts). */
  readonly tracing?: Pick<Tracing, "attempt"> | undefined;
  /** Whether the database answers, as claims, heartbeats and completions find out; an outage is logged once. */
  readonly health: Pick<DatabaseHealth, "sent" | "down" | "whenBack">;
}

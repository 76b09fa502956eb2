import type { ClaimedJob } from "../db/sql/jobs.js";
import { withinDeadline } from "../deadline.js";
import type { Logger } from "../log.js";
import type { WorkerDependencies } from "./worker-deps.js";

/**
 * One claim statement as a worker sends it: its names and queues (its
 * chores' too, with room for a few), waited for at most the claim
 * timeout, each answer reported as a `jobsClaimed` event. A claim that has not
 * answered by then is let go, so the next one can go out; its rows, if it
 * ever answers, are handed to `late` (a worker still running takes them in).
 */

/** What sending a claim needs of its worker. */
export interface Claimer {
  readonly deps: Pick<WorkerDependencies, "store" | "events" | "health">;
  readonly log: Logger;
  readonly workerId: string;
  readonly queues: readonly string[];
  /** The job names claimed into the slots. */
  readonly jobNames: readonly string[];
  /** The chores' queue and names, claimed beside them (src/jobs/worker.ts, WorkerSettings). */
  readonly chores: { readonly queue: string; readonly jobNames: readonly string[] } | undefined;
  readonly timeoutMs: number;
}

/** Chores claimed per statement at most: one reap and one prune slot, with room for a late one. */
const CHORE_CLAIM_LIMIT = 4;

/**
 * Claims up to `limit` rows (and the ready chores) as of `now` (default the
 * database clock): the rows; null when it has not answered within the
 * timeout. Rejects as the statement does.
 */
export async function claimWithin(claimer: Claimer, limit: number, now: Date | undefined, late: (rows: ClaimedJob[]) => void): Promise<ClaimedJob[] | null> {
  const claimedFrom = performance.now();
  const { chores } = claimer;
  const pending = claimer.deps.store.claim({
    workerId: claimer.workerId,
    queues: claimer.queues,
    jobNames: claimer.jobNames,
    limit,
    chores: chores === undefined ? undefined : { ...chores, limit: CHORE_CLAIM_LIMIT },
    now,
  });
  const answer = await withinDeadline(pending, claimer.timeoutMs);
  if (!answer.done) {
    // Stop waiting, so the next claim can go out; whatever this one claimed still runs when it answers.
    // During a known outage that is expected (the outage is logged once, src/db/health.ts): debug only.
    const level = claimer.deps.health.down ? "debug" : "warn";
    claimer.log[level]("a claim has not answered; claiming again without waiting for it", { claimTimeoutMs: claimer.timeoutMs });
    pending.then(
      (answered) => {
        claimed(claimer, answered.length, claimedFrom);
        late(answered);
      },
      () => undefined,
    );
    return null;
  }
  claimed(claimer, answer.value.length, claimedFrom);
  return answer.value;
}

function claimed(claimer: Claimer, count: number, fromMs: number): void {
  claimer.deps.events.jobsClaimed({ workerId: claimer.workerId, queues: claimer.queues, count, durationSeconds: (performance.now() - fromMs) / 1000 });
}

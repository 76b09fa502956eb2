import { describeDatabaseError } from "../db/diagnose.js";
import { ChoreFailedError } from "../errors.js";
import { defineJob, type JobDefinition } from "../jobs/define-job.js";
import type { ScheduleEntry } from "../schedule/define-schedule.js";
import type { ResolvedChores } from "./chore-options.js";

export type { ChoreOptions, ChoresSetting } from "./chore-options.js";
export { DEFAULT_PRUNE_CRON, DEFAULT_REAP_CRON } from "./chore-options.js";

/** The queue chore jobs run on; workers serve it by default wherever chores are enabled. */
export const CHORE_QUEUE = "cronledger";
export const REAP_JOB = "cronledger.reap";
export const PRUNE_JOB = "cronledger.prune";

/** What the chore handlers call on their Cronledger. */
export interface ChoreHost {
  reap(): Promise<unknown>;
  prune(): Promise<unknown>;
}

/**
 * The chores as ordinary jobs and schedule entries: the ledger makes each
 * slot fire once across the cluster, so no replica needs to be the leader.
 */
export function choreSchedule(host: ChoreHost, chores: ResolvedChores): { jobs: JobDefinition[]; schedule: ScheduleEntry[] } {
  if (chores.when === "never") return { jobs: [], schedule: [] };
  const chore = (name: string, timeout: "1m" | "30m", run: () => Promise<unknown>) =>
    defineJob({
      name,
      queue: CHORE_QUEUE,
      retry: "maintenance",
      timeout,
      run: async () => {
        try {
          await run();
        } catch (error) {
          // Not the error itself: drizzle's wrapper carries the statement, text and parameters (src/db/diagnose.ts).
          throw new ChoreFailedError(name, describeDatabaseError(error));
        }
      },
    });
  const reap = chore(REAP_JOB, "1m", () => host.reap());
  const prune = chore(PRUNE_JOB, "30m", () => host.prune());
  return {
    jobs: [reap, prune],
    schedule: [
      { job: reap, cron: chores.reapCron },
      { job: prune, cron: chores.pruneCron },
    ],
  };
}

import { defineJob, type JobDefinition } from "../jobs/define-job.js";
import type { RetentionOptions } from "../jobs/retention.js";
import type { ScheduleEntry } from "../schedule/define-schedule.js";

/** The queue chore jobs run on; workers serve it by default wherever chores are enabled. */
export const CHORE_QUEUE = "cronledger";
export const REAP_JOB = "cronledger.reap";
export const PRUNE_JOB = "cronledger.prune";

export interface ChoreOptions {
  /** When the reaper runs (a 6-field cron); default every 15 seconds. */
  readonly reapCron?: string;
  /** When the prune chore runs; default hourly. */
  readonly pruneCron?: string;
  /** How long finished jobs are kept before the prune chore deletes them. */
  readonly retention?: RetentionOptions;
}

/**
 * - `undefined` (default): chores run wherever `start()` runs; a bare `tick()` leaves them out.
 * - `true` / options: chores are part of every tick, `start()` or not.
 * - `false`: no chores (reap and prune yourself, e.g. with `reap()` and `prune()`).
 */
export type ChoresSetting = boolean | ChoreOptions | undefined;

/** What the chore handlers call on their Cronledger. */
export interface ChoreHost {
  reap(): Promise<unknown>;
  prune(): Promise<unknown>;
}

export const DEFAULT_REAP_CRON = "*/15 * * * * *";
export const DEFAULT_PRUNE_CRON = "7 * * * *";

/**
 * The chores as ordinary jobs and schedule entries: the ledger makes each
 * slot fire once across the cluster, so no replica needs to be the leader.
 */
export function choreSchedule(host: ChoreHost, setting: ChoresSetting): { jobs: JobDefinition[]; schedule: ScheduleEntry[] } {
  if (setting === false) return { jobs: [], schedule: [] };
  const options = typeof setting === "object" ? setting : {};
  const chore = (name: string, timeout: "1m" | "30m", run: () => Promise<unknown>) =>
    defineJob({
      name,
      queue: CHORE_QUEUE,
      retry: "maintenance",
      timeout,
      run: async () => {
        await run();
      },
    });
  const reap = chore(REAP_JOB, "1m", () => host.reap());
  const prune = chore(PRUNE_JOB, "30m", () => host.prune());
  return {
    jobs: [reap, prune],
    schedule: [
      { job: reap, cron: options.reapCron ?? DEFAULT_REAP_CRON },
      { job: prune, cron: options.pruneCron ?? DEFAULT_PRUNE_CRON },
    ],
  };
}

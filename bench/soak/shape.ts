// What the soak's replicas run and the checker checks: shared by bench/soak/replica.ts, orchestrate.ts and check.ts.
import { z } from "zod";

/** The enqueued job: the orchestrator enqueues it continuously, each with an idempotency key. */
export const WORK_JOB = "soak.work";
/** Its payload: how long the handler works, and whether its first attempt throws (a retry). */
export const workPayload = z.object({ ms: z.number(), failFirst: z.boolean() });
/** Every 2 s: a slot every other second, with handlers of 0.4-3 s, so the overlap policies decide often. */
export const SOAK_CRON = "*/2 * * * * *";
export const SLOT_MS = 2_000;
/** The schedule entry's overlap policies (spelt out here: the type's public home is moving). */
export type Overlap = "allow_all" | "skip" | "buffer_one" | "cancel_other";
/** One entry per overlap policy, each with its own job. */
export const OVERLAP_ENTRIES: readonly { readonly job: string; readonly overlap: Overlap }[] = [
  { job: "soak.allow_all", overlap: "allow_all" },
  { job: "soak.skip", overlap: "skip" },
  { job: "soak.buffer_one", overlap: "buffer_one" },
  { job: "soak.cancel_other", overlap: "cancel_other" },
];

/** One line of the handlers' side-effect log. */
export interface Effect {
  readonly e: "start" | "end";
  readonly job: string;
  readonly id: number;
  readonly attempt: number;
  readonly t: number;
  readonly replica: string;
  readonly pid: number;
  readonly ok?: boolean;
  readonly aborted?: boolean;
  readonly slot?: number | null;
}

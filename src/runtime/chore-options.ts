import { z } from "zod";
import type { Duration } from "../duration.js";
import type { ResolvedRetention, RetentionOptions } from "../operators/operations.js";
import { duration, positiveInteger, type Check, type OptionShape, type Takes } from "../option-schema.js";

/** The `chores` option: what users write, its defaults beside its schema, and what it resolves to. */

export interface ChoreOptions {
  /** When the reaper runs (a 6-field cron); default every 15 seconds. */
  readonly reapCron?: string;
  /** When the prune chore runs; default hourly. */
  readonly pruneCron?: string;
  /** How long finished jobs are kept before the prune chore deletes them. */
  readonly retention?: RetentionOptions;
  /**
   * How long a ledger row may go without any process evaluating it (no pass
   * wrote it, no running schedule has it) before the prune chore deletes it;
   * default 7 days: longer than any rolling deploy, whose two versions must
   * not prune each other's entries.
   */
  readonly ledgerGrace?: Duration;
  /**
   * A queued job whose name no live worker has registered is failed with
   * JobNotRegisteredError once it has waited this long (a job that can
   * never run); until then it waits for a worker that knows it. Default 7
   * days; false: never.
   */
  readonly failUnregisteredAfter?: Duration | false;
}

/**
 * - `undefined` (default): chores run wherever `start()` runs; a bare `tick()` leaves them out.
 * - `true` / options: chores are part of every tick, `start()` or not.
 * - `false`: no chores (reap and prune yourself, e.g. with `reap()` and `prune()`).
 */
export type ChoresSetting = boolean | ChoreOptions | undefined;

export const DEFAULT_RETENTION_MS = 7 * 86_400_000;
export const DEFAULT_RETENTION_BATCH_SIZE = 1_000;
export const DEFAULT_REAP_CRON = "*/15 * * * * *";
export const DEFAULT_PRUNE_CRON = "7 * * * *";
export const DEFAULT_LEDGER_GRACE_MS = 7 * 86_400_000;
export const DEFAULT_FAIL_UNREGISTERED_AFTER_MS = 7 * 86_400_000;

const retentionShape = {
  succeeded: duration("retention.succeeded").default(DEFAULT_RETENTION_MS),
  failed: duration("retention.failed").default(DEFAULT_RETENTION_MS),
  batchSize: positiveInteger().default(DEFAULT_RETENTION_BATCH_SIZE),
} satisfies OptionShape<RetentionOptions>;
type _RetentionShapeTakesRetentionOptions = Check<Takes<RetentionOptions, typeof retentionShape>>;

const retentionSchema = z
  .strictObject(retentionShape)
  .transform((parsed): ResolvedRetention => ({ succeededMs: parsed.succeeded, failedMs: parsed.failed, batchSize: parsed.batchSize }));

const choreShape = {
  reapCron: z.string().min(1).default(DEFAULT_REAP_CRON),
  pruneCron: z.string().min(1).default(DEFAULT_PRUNE_CRON),
  retention: retentionSchema.default({ succeededMs: DEFAULT_RETENTION_MS, failedMs: DEFAULT_RETENTION_MS, batchSize: DEFAULT_RETENTION_BATCH_SIZE }),
  ledgerGrace: duration("chores.ledgerGrace").default(DEFAULT_LEDGER_GRACE_MS),
  failUnregisteredAfter: z.union([z.literal(false), duration("chores.failUnregisteredAfter")]).default(DEFAULT_FAIL_UNREGISTERED_AFTER_MS),
} satisfies OptionShape<ChoreOptions>;
type _ChoreShapeTakesChoreOptions = Check<Takes<ChoreOptions, typeof choreShape>>;

const choreOptionsSchema = z.strictObject(choreShape);

const DEFAULT_CHORE_OPTIONS = choreOptionsSchema.parse({});

/** The `chores` option's schema; resolves to ResolvedChores. */
export const choresSchema = z
  .union([z.boolean(), choreOptionsSchema])
  .optional()
  .transform((chores) => {
    const options = typeof chores === "object" ? chores : DEFAULT_CHORE_OPTIONS;
    return {
      /** `start`: ticked where start() runs; `always`: in every tick; `never`. */
      when: (chores === undefined ? "start" : chores === false ? "never" : "always") as "start" | "always" | "never",
      reapCron: options.reapCron,
      pruneCron: options.pruneCron,
      retention: options.retention,
      ledgerGraceMs: options.ledgerGrace,
      failUnregisteredAfterMs: options.failUnregisteredAfter,
    };
  });

export type ResolvedChores = z.output<typeof choresSchema>;

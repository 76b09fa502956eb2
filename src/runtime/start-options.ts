import { z } from "zod";
import type { Duration } from "../duration.js";
import { resolveWorkerShape, workerShape, type WorkOptions } from "../jobs/work-options.js";
import { duration, parseOptions, type Check, type OptionShape, type Takes } from "../option-schema.js";

/** What `start()` takes (its workers' options and the ticker's), its defaults beside its schema, and what it resolves to. */

export interface StartOptions extends Omit<WorkOptions, "once"> {
  /** Run the scheduler ticker in this process; default true (every replica may tick: the ledger dedupes). */
  readonly ticker?: boolean;
  /** Run workers in this process; default true. */
  readonly workers?: boolean;
  /** Stop gracefully on SIGTERM / SIGINT, then close the database and re-raise the signal; default true. */
  readonly handleSignals?: boolean;
  /** Longest sleep between ticks, so a replica notices other replicas' progress; default 30 s. */
  readonly maxTickInterval?: Duration;
}

export const DEFAULT_MAX_TICK_INTERVAL_MS = 30_000;

const startShape = {
  ...workerShape,
  ticker: z.boolean().default(true),
  workers: z.boolean().default(true),
  handleSignals: z.boolean().default(true),
  maxTickInterval: duration("maxTickInterval").default(DEFAULT_MAX_TICK_INTERVAL_MS),
} satisfies OptionShape<StartOptions>;
type _StartShapeTakesStartOptions = Check<Takes<StartOptions, typeof startShape>>;

const startSchema = z
  .strictObject(startShape)
  .transform((parsed) => ({
    ...resolveWorkerShape(parsed),
    ticker: parsed.ticker,
    workers: parsed.workers,
    handleSignals: parsed.handleSignals,
    maxTickMs: parsed.maxTickInterval,
  }));

export type ResolvedStartOptions = z.output<typeof startSchema>;

export function resolveStartOptions(options: StartOptions | undefined): ResolvedStartOptions {
  return parseOptions(startSchema, options, "start() options");
}

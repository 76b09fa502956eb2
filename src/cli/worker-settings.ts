import { z } from "zod";
import type { CronledgerConfig } from "../config.js";
import { ConfigError } from "../errors.js";
import { describeShapeIssues } from "../suggest.js";

/**
 * The `worker` and `admin` sections of a config, checked whole before
 * `cronledger worker` touches the database: a mistake there must stop the
 * worker before it ticks, enqueues or claims anything, not after.
 */
const workerSection = z.strictObject({
  concurrency: z.number().int().min(1).max(10_000).optional(),
  queues: z.array(z.string().min(1)).min(1).optional(),
});

const adminSection = z.strictObject({
  port: z.number().int().min(0).max(65_535).optional(),
  host: z.string().min(1).optional(),
  token: z.string().optional(),
});

function check<T>(schema: z.ZodType<T>, section: string, value: unknown, fields: readonly string[]): T | undefined {
  if (value === undefined) return undefined;
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new ConfigError(`Invalid ${section} settings in the config: ${describeShapeIssues(parsed.error, fields, `${section} takes`)}.`);
  return parsed.data;
}

/** The config's `worker` section, checked; undefined when there is none. */
export function workerConfig(config: CronledgerConfig | undefined): z.infer<typeof workerSection> | undefined {
  return check(workerSection, "worker", config?.worker, Object.keys(workerSection.shape));
}

/** The config's `admin` section, checked; undefined when there is none. */
export function adminConfig(config: CronledgerConfig | undefined): z.infer<typeof adminSection> | undefined {
  return check(adminSection, "admin", config?.admin, Object.keys(adminSection.shape));
}

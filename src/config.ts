import type { DatabaseSetting } from "./db/connection.js";
import type { JobDefinition } from "./jobs/define-job.js";
import type { CronledgerOptions } from "./options.js";

/**
 * What `cronledger.config.ts` default-exports: the same options as
 * createCronledger (checked by the same schema, src/options.ts), so the CLI,
 * CI preflight and the app's own entry point all read one definition of the
 * jobs and the schedule. `worker` and `admin` configure `cronledger worker`.
 */
export interface CronledgerConfig extends Omit<CronledgerOptions, "database" | "jobs"> {
  /** Every job this app runs; schedule entries and enqueued jobs must name one of them. */
  readonly jobs: readonly JobDefinition[];
  /** PostgreSQL URL, "memory://" or "pglite:<dir>"; omitted: DATABASE_URL, else embedded PGlite in ./.cronledger. */
  readonly database?: DatabaseSetting;
}

/** Types a config file's default export; returns it unchanged. */
export function defineConfig(config: CronledgerConfig): CronledgerConfig {
  return config;
}

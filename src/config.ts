import type { CronledgerOptions } from "./cronledger.js";
import type { DatabaseSetting } from "./db/connection.js";
import type { JobDefinition } from "./jobs/define-job.js";
import type { ScheduleEntry } from "./schedule/define-schedule.js";

/**
 * What `cronledger.config.ts` default-exports: the same options as
 * createCronledger, so the CLI, CI preflight and the app's own entry point
 * all read one definition of the jobs and the schedule.
 */
export interface CronledgerConfig extends Omit<CronledgerOptions, "database" | "jobs" | "schedule"> {
  /** Every job this app runs; schedule entries and enqueued jobs must name one of them. */
  readonly jobs: readonly JobDefinition[];
  readonly schedule?: readonly ScheduleEntry[];
  /** PostgreSQL URL, "memory://" or "pglite:<dir>"; omitted: DATABASE_URL, else embedded PGlite in ./.cronledger. */
  readonly database?: DatabaseSetting;
  /** Defaults for `cronledger worker`; its --concurrency and --queues flags override them. */
  readonly worker?: {
    readonly concurrency?: number;
    readonly queues?: readonly string[];
  };
  /**
   * The admin HTTP server `cronledger worker` starts (status, failures, Schedule page, /metrics).
   * Its --admin-port flag overrides `port`; the token defaults to CRONLEDGER_ADMIN_TOKEN. Without
   * a token it only binds loopback.
   */
  readonly admin?: {
    readonly port?: number;
    /** Interface to bind; default 127.0.0.1. */
    readonly host?: string;
    readonly token?: string;
  };
}

/** Types a config file's default export; returns it unchanged. */
export function defineConfig(config: CronledgerConfig): CronledgerConfig {
  return config;
}

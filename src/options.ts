import type { Registry } from "prom-client";
import { z } from "zod";
import type { Database, DatabaseSetting } from "./db/connection.js";
import { databaseSettingSchema } from "./db/settings.js";
import type { Duration } from "./duration.js";
import { ConfigError } from "./errors.js";
import type { CronledgerHooks } from "./events.js";
import { isJobDefinition, type JobDefinition } from "./jobs/define-job.js";
import { maxPayloadBytesSchema } from "./jobs/payload-limit.js";
import { DEFAULT_LEASE_MS } from "./jobs/work-options.js";
import { DEFAULT_STOP_GRACE_MS } from "./jobs/stops.js";
import type { Logger } from "./log.js";
import { duration, object, overlapPolicy, parseOptions, positiveInteger, type Check, type OptionShape, type Takes } from "./option-schema.js";
import { choresSchema, type ChoresSetting } from "./runtime/chore-options.js";
import type { OverlapPolicy } from "./schema.js";
import type { ScheduleEntry } from "./schedule/define-schedule.js";
import { tracingSchema, type TracingSetting } from "./tracing.js";

/**
 * createCronledger's options and the config file's, as one strict zod
 * schema each, built from the schemas of the groups that live with their
 * users (the chores in src/runtime/chore-options.ts, the database setting in
 * src/db/settings.ts; work() and start() in src/jobs/work-options.ts and
 * src/runtime/start-options.ts). Each parse rejects unknown keys with a
 * did-you-mean, checks every value, and yields resolved values (durations
 * in milliseconds, defaults filled in), so the rest of the code never
 * parses an option again.
 */

// ---------------------------------------------------------------- the option types users write

export interface CronledgerOptions {
  /**
   * PostgreSQL URL; omitted: DATABASE_URL, else embedded PGlite in ./.cronledger ("memory://" for in-memory).
   * An already-open Database (from openDatabase) is shared, and close() leaves it open.
   */
  readonly database?: DatabaseSetting | Database;
  readonly jobs?: readonly JobDefinition[];
  readonly schedule?: readonly ScheduleEntry[];
  /** Separates apps sharing one database: each prunes and evaluates only its own ledger rows. */
  readonly namespace?: string;
  /**
   * Where cronledger's log lines go; default: the console. Any object with
   * debug/info/warn/error taking `(message, fields)` (console, winston), or
   * a pino logger, which takes `(fields, message)` and is called that way.
   */
  readonly logger?: Logger;
  /** Listeners for ticks and job attempts (metrics, logs, the demo's event lines). */
  readonly hooks?: CronledgerHooks | readonly CronledgerHooks[];
  /** Prometheus metrics, on by default in a Registry of their own (`ledger.metrics.registry`); pass yours to share it, or false to turn them off. */
  readonly metrics?: { readonly registry?: Registry } | false;
  /**
   * OpenTelemetry traces (needs the optional peer dependency `@opentelemetry/api` and an SDK that exports).
   * Off by default. `true`: spans through the tracer provider registered with the API; `{ tracerProvider }`:
   * through that one; `spanRelationship: "child"` makes each attempt a child of its enqueue instead of a
   * linked root. Each enqueue, run-now, backfill and pass is a producer span whose context is stored with
   * its jobs; each attempt a consumer span linked to it, its handler running in its context; claims are
   * client spans. Metrics stay Prometheus. See README, "Traces".
   */
  readonly tracing?: TracingSetting;
  /**
   * The reaper and prune chores, run as ledger entries (each slot once across
   * the cluster). Default: on wherever `start()` runs, left out of bare
   * `tick()` calls; `true` or options: always; `false`: never.
   */
  readonly chores?: ChoresSetting;
  /** A running job without a heartbeat for this long is reaped; default 30 s. Heartbeats go every lease/3. */
  readonly lease?: Duration;
  /**
   * How long a handler asked to stop (`cancelJob` on a running job) may run
   * on after its `ctx.signal` is aborted before its job is failed as killed
   * (not retried); default 30 s. Reported with every stop request.
   */
  readonly stopGrace?: Duration;
  /**
   * Largest payload, in bytes of its stored JSON, that enqueue, enqueueMany and
   * schedule entries accept; default 1 MiB (1048576). Larger ones are refused
   * with a PayloadTooLargeError before anything is written.
   */
  readonly maxPayloadBytes?: number;
  /**
   * What a schedule with invalid entries does (an invalid cron, an unregistered job, a bad payload, a duplicate...).
   * `"quarantine"` (default): the valid entries run; each invalid one is logged, listed as broken with its
   * problems in the status, on the Schedule page and in `cronledger status`, and counted in
   * `cronledger_schedule_entries{state="invalid"}`. `"fail"`: createCronledger throws one
   * ScheduleValidationError listing every problem, and nothing runs (fail fast; `cronledger preflight` in CI
   * catches the same problems before a deploy).
   */
  readonly invalidEntries?: InvalidEntriesMode;
  /** The catch-up window of every schedule entry that sets none (an entry's own `catchUpWindow` wins); default 24 h, floored at 2 minutes. */
  readonly catchUpWindow?: Duration;
  /** The overlap policy of every schedule entry that sets none (an entry's own `overlap` wins); default `"allow_all"`. */
  readonly overlap?: OverlapPolicy;
  /**
   * How long one statement of a scheduler pass may run before the server is
   * asked to cancel it; default 10 s. A pass that hits it fails as a
   * transient TickError naming its phase, and the next pass tries again.
   */
  readonly passTimeout?: Duration;
  /** Defaults for `cronledger worker`; its --concurrency and --queues flags override them. The ledger itself ignores them. */
  readonly worker?: {
    readonly concurrency?: number;
    readonly queues?: readonly string[];
  };
  /**
   * The admin HTTP server `cronledger worker` starts (status, failures, Schedule page, /metrics).
   * Its --admin-port flag overrides `port`; the token defaults to CRONLEDGER_ADMIN_TOKEN. Without
   * a token it only binds loopback. The ledger itself ignores it.
   */
  readonly admin?: {
    readonly port?: number;
    /** Interface to bind; default 127.0.0.1. */
    readonly host?: string;
    readonly token?: string;
  };
}

/**
 * What `cronledger.config.ts` default-exports (typed by `defineConfig`, src/config.ts): the same options as
 * createCronledger (checked by the same schema), so the CLI, CI preflight and the app's own entry point all
 * read one definition of the jobs and the schedule. `worker` and `admin` configure `cronledger worker`.
 */
export interface CronledgerConfig extends Omit<CronledgerOptions, "database" | "jobs"> {
  /** Every job this app runs; schedule entries and enqueued jobs must name one of them. */
  readonly jobs: readonly JobDefinition[];
  /** PostgreSQL URL, "memory://" or "pglite:<dir>"; omitted: DATABASE_URL, else embedded PGlite in ./.cronledger. */
  readonly database?: DatabaseSetting;
}

export type InvalidEntriesMode = "quarantine" | "fail";

// ---------------------------------------------------------------- defaults

export const DEFAULT_NAMESPACE = "default";
export const DEFAULT_INVALID_ENTRIES: InvalidEntriesMode = "quarantine";
export const DEFAULT_PASS_TIMEOUT_MS = 10_000;

// ---------------------------------------------------------------- their schemas

const NAMESPACE = /^[A-Za-z0-9_.:-]{1,64}$/;

const hooksObject = object<CronledgerHooks>("must be an object of listener functions", () => true);

/** The config file's `worker` block; `cronledger worker`'s --concurrency and --queues flags are checked by the same schemas. */
export const workerBlockSchema = z.strictObject({
  concurrency: positiveInteger().max(10_000, "must be at most 10000").optional(),
  queues: z.array(z.string().min(1)).min(1, "needs at least one queue").readonly().optional(),
} satisfies OptionShape<NonNullable<CronledgerOptions["worker"]>>);

const PORT = "must be a port number from 0 to 65535";
/** The config file's `admin` block; `cronledger worker`'s --admin-port flag is checked by the same schema. */
export const adminBlockSchema = z.strictObject({
  port: z.number({ error: PORT }).int(PORT).min(0, PORT).max(65_535, PORT).optional(),
  host: z.string().min(1).optional(),
  token: z.string().optional(),
} satisfies OptionShape<NonNullable<CronledgerOptions["admin"]>>);

const cronledgerShape = {
  database: databaseSettingSchema.optional(),
  jobs: z.array(z.custom<JobDefinition>(isJobDefinition, { error: "must be a defineJob() result" })).readonly().default([]),
  schedule: z.array(z.custom<ScheduleEntry>(() => true), { error: "must be an array of entries (defineSchedule([...]))" }).readonly().default([]),
  namespace: z
    .string()
    .regex(NAMESPACE, "must be 1-64 letters, digits and . _ : -")
    .default(DEFAULT_NAMESPACE),
  logger: object<Logger>("must have debug, info, warn and error methods", (value) =>
    ["debug", "info", "warn", "error"].every((level) => typeof (value as Record<string, unknown>)[level] === "function"),
  ).optional(),
  hooks: z.union([hooksObject, z.array(hooksObject).readonly()]).optional(),
  metrics: z
    .union([
      z.literal(false),
      z.strictObject({ registry: object<Registry>("must be a prom-client Registry", (value) => "registerMetric" in value).optional() }),
    ])
    .optional(),
  tracing: tracingSchema,
  chores: choresSchema,
  lease: duration("lease").default(DEFAULT_LEASE_MS),
  stopGrace: duration("stopGrace").default(DEFAULT_STOP_GRACE_MS),
  maxPayloadBytes: maxPayloadBytesSchema,
  invalidEntries: z.enum(["quarantine", "fail"], { error: 'must be "quarantine" (run the valid entries, show the invalid ones as broken) or "fail" (throw)' }).default(DEFAULT_INVALID_ENTRIES),
  catchUpWindow: duration("catchUpWindow").optional(),
  overlap: overlapPolicy().optional(),
  passTimeout: duration("passTimeout")
    .refine((ms) => ms >= 1, "must be at least 1 ms")
    .default(DEFAULT_PASS_TIMEOUT_MS),
  // The CLI's settings: accepted here too, so a config file's object can be passed to createCronledger as it is.
  worker: workerBlockSchema.optional(),
  admin: adminBlockSchema.optional(),
} satisfies OptionShape<CronledgerOptions>;
type _CronledgerShapeTakesCronledgerOptions = Check<Takes<CronledgerOptions, typeof cronledgerShape>>;

const cronledgerSchema = z.strictObject(cronledgerShape).transform((parsed) => ({
  database: parsed.database,
  jobs: parsed.jobs,
  schedule: parsed.schedule,
  namespace: parsed.namespace,
  logger: parsed.logger,
  hooks: (parsed.hooks === undefined ? [] : "length" in parsed.hooks ? parsed.hooks : [parsed.hooks]) as readonly CronledgerHooks[],
  metrics: parsed.metrics ?? {},
  /** Undefined: no tracing, and `@opentelemetry/api` is never loaded. */
  tracing: parsed.tracing,
  chores: parsed.chores,
  leaseMs: parsed.lease,
  stopGraceMs: parsed.stopGrace,
  maxPayloadBytes: parsed.maxPayloadBytes,
  invalidEntries: parsed.invalidEntries,
  /** Undefined: entries without their own window get DEFAULT_CATCH_UP_WINDOW_MS (src/schedule/validate.ts). */
  catchUpWindowMs: parsed.catchUpWindow,
  /** Undefined: entries without their own policy allow all overlaps. */
  overlap: parsed.overlap,
  passTimeoutMs: parsed.passTimeout,
}));

const configShape = {
  ...cronledgerShape,
  database: databaseSettingSchema.optional(),
  jobs: z.array(z.custom<JobDefinition>(isJobDefinition, { error: "must be a defineJob() result" }), { error: "must be an array of defineJob() results" }).readonly(),
} satisfies OptionShape<CronledgerConfig>;
type _ConfigShapeTakesCronledgerConfig = Check<Takes<CronledgerConfig, typeof configShape>>;
const configSchema = z.strictObject(configShape);

// ---------------------------------------------------------------- what they resolve to

export type ResolvedCronledgerOptions = z.output<typeof cronledgerSchema>;

/** The parsed config file: the createCronledger options plus the CLI worker's and admin server's settings. */
export type ParsedConfig = z.output<typeof configSchema>;

export function resolveCronledgerOptions(options: CronledgerOptions | undefined): ResolvedCronledgerOptions {
  return parseOptions(cronledgerSchema, options, "createCronledger options");
}

/** A config file's default export, checked whole; `file` names it in the error. */
export function parseConfig(value: unknown, file: string): ParsedConfig {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ConfigError(`Config file ${file} has no default export object; it must \`export default defineConfig({ jobs: [...], schedule: [...] })\`.`);
  }
  if (!("jobs" in value)) {
    throw new ConfigError(`Config file ${file} has no \`jobs\` array; it must \`export default defineConfig({ jobs: [...], schedule: [...] })\`.`);
  }
  return parseOptions(configSchema, value, `config file ${file}`);
}

import { innermostMessage } from "./error-chain.js";

/**
 * Every error cronledger throws or stores, in one place. Each is a
 * CronledgerError with a stable `code` from ErrorCode that callers can switch
 * on, and a message that says what to do about it. This file is longer than
 * most because it is the whole catalogue: one class per thing that can go
 * wrong, and the table that maps codes to HTTP statuses.
 */

/** The stable codes of every CronledgerError; part of the public API. */
export type ErrorCode =
  // Configuration and API use
  | "invalid_config"
  | "dependency_missing"
  | "invalid_argument"
  | "usage_error"
  | "invalid_duration"
  // Schedules
  | "invalid_cron"
  | "invalid_timezone"
  | "schedule_invalid"
  | "schedule_entry_invalid"
  | "tick_failed"
  // Jobs and payloads
  | "job_not_registered"
  | "chore_failed"
  | "invalid_payload"
  | "payload_too_large"
  | "invalid_stored_input"
  | "non_retryable"
  | "job_timeout"
  | "worker_shutdown"
  | "lease_lost"
  | "lease_expired"
  | "job_cancelled"
  | "job_killed"
  // Operators' views and actions
  | "invalid_filter"
  | "job_not_found"
  | "job_not_failed"
  | "job_not_cancellable"
  | "entry_not_found"
  | "backfill_too_large"
  // The database
  | "migration_failed"
  | "migration_required"
  // What the CLI prints for a database problem (src/db/diagnose.ts): the cause, not an error class of its own
  | DatabaseProblem;

/** The known causes of a database failure, as src/db/diagnose.ts names them. */
export type DatabaseProblem =
  | "connection_refused"
  | "host_not_found"
  | "connection_timeout"
  | "authentication_failed"
  | "database_not_found"
  | "tls_required"
  | "tls_failed"
  | "setting_refused"
  | "too_many_connections"
  | "server_unavailable"
  // cronledger's tables (or its schema) are gone from a database that had them: dropped, or the database made again empty
  | "migration_required"
  // the application's `db` (a transaction or database) is on another database than the ledger's
  | "transaction_on_other_database";

/** A database failure's cause and its fix (diagnoseDatabaseError in src/db/diagnose.ts). */
export interface DatabaseDiagnosis {
  /** Stable name of the cause; the CLI prints it as the error code. */
  readonly problem: DatabaseProblem;
  /** One line: the cause, where when known, and what to do. Never SQL. */
  readonly message: string;
  /** Retrying cannot fix it; the configuration or the server must change (wrong password, missing database...). */
  readonly persistent: boolean;
}

export class CronledgerError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/**
 * What the admin API answers for each code, when an error reaches it: the
 * caller's mistakes are 4xx, everything the server could not do is 5xx.
 */
export const ERROR_HTTP_STATUS: Readonly<Record<ErrorCode, number>> = {
  invalid_config: 500,
  dependency_missing: 500,
  invalid_argument: 400,
  usage_error: 400,
  invalid_duration: 400,
  invalid_cron: 400,
  invalid_timezone: 400,
  schedule_invalid: 500,
  schedule_entry_invalid: 400,
  tick_failed: 503,
  job_not_registered: 400,
  chore_failed: 503,
  invalid_payload: 400,
  payload_too_large: 413,
  invalid_stored_input: 500,
  non_retryable: 500,
  job_timeout: 500,
  worker_shutdown: 503,
  lease_lost: 500,
  lease_expired: 500,
  job_cancelled: 409,
  job_killed: 500,
  invalid_filter: 400,
  job_not_found: 404,
  job_not_failed: 409,
  job_not_cancellable: 409,
  entry_not_found: 404,
  backfill_too_large: 400,
  migration_failed: 503,
  migration_required: 503,
  transaction_on_other_database: 500,
  connection_refused: 503,
  host_not_found: 503,
  connection_timeout: 503,
  authentication_failed: 503,
  database_not_found: 503,
  tls_required: 503,
  tls_failed: 503,
  setting_refused: 503,
  too_many_connections: 503,
  server_unavailable: 503,
};

// ---------------------------------------------------------------- configuration and API use

/** Configuration passed to createCronledger, a config file or the CLI that cannot work. */
export class ConfigError extends CronledgerError {
  constructor(message: string) {
    super("invalid_config", message);
  }
}

/**
 * An optional peer dependency the configuration needs is not installed (the
 * embedded database needs @electric-sql/pglite); the message names the
 * package and the command that installs it.
 */
export class DependencyMissingError extends CronledgerError {
  readonly packageName: string;

  constructor(packageName: string, message: string, options?: { cause?: unknown }) {
    super("dependency_missing", message, options);
    this.packageName = packageName;
  }
}

/** A call that cannot be made this way (both `runAt` and `delay`, `start()` twice, a worker run twice). */
export class InvalidArgumentError extends CronledgerError {
  constructor(message: string) {
    super("invalid_argument", message);
  }
}

/** The command line cannot be understood; the message says what was expected. The CLI exits with status 2. */
export class UsageError extends CronledgerError {
  constructor(message: string) {
    super("usage_error", message);
  }
}

export class InvalidDurationError extends CronledgerError {
  constructor(value: unknown, what: string) {
    super(
      "invalid_duration",
      `Invalid ${what} ${JSON.stringify(value)}: use a non-negative number of milliseconds or a string such as "500ms", "30s", "2m", "1h" or "1d".`,
    );
  }
}

// ---------------------------------------------------------------- schedules

/** A cron expression that cannot be used; `reason` says which part is wrong. */
export class InvalidCronError extends CronledgerError {
  readonly expression: string;

  constructor(expression: string, reason: string) {
    super("invalid_cron", `Invalid cron expression ${JSON.stringify(expression)}: ${reason}`);
    this.expression = expression;
  }
}

export class InvalidTimezoneError extends CronledgerError {
  readonly timezone: string;

  constructor(timezone: string) {
    super(
      "invalid_timezone",
      `Unknown timezone ${JSON.stringify(timezone)}: use an IANA name such as "UTC", "Europe/Berlin" or "America/New_York".`,
    );
    this.timezone = timezone;
  }
}

/** One problem with one schedule entry, as reported by validateSchedule / preflight. */
export interface ScheduleProblem {
  readonly code:
    | "invalid_entry"
    | "invalid_cron"
    | "invalid_timezone"
    | "unregistered_job"
    | "invalid_payload"
    | "duplicate_entry"
    | "invalid_jitter"
    | "invalid_key"
    | "never_matches";
  readonly severity: "error" | "warning";
  /** 0-based position in the schedule array. */
  readonly index: number;
  readonly jobName?: string;
  readonly identity?: string;
  /** The entry's field the problem is in (`cron`, `timezone`, `job`, `payload`, `jitter`, `key`...), where one is; given for dynamic entries. */
  readonly field?: string;
  readonly message: string;
}

/** The schedule has errors; `problems` lists every one of them, not just the first. */
export class ScheduleValidationError extends CronledgerError {
  readonly problems: readonly ScheduleProblem[];

  constructor(problems: readonly ScheduleProblem[]) {
    const errors = problems.filter((problem) => problem.severity === "error");
    super(
      "schedule_invalid",
      `The schedule has ${errors.length} error${errors.length === 1 ? "" : "s"}; fix them (run \`cronledger preflight\` to check without a database):\n` +
        errors.map((problem) => `  - [${problem.code}] ${problem.message}`).join("\n"),
    );
    this.problems = problems;
  }
}

/**
 * A dynamic entry (`ledger.schedules.upsert`) is invalid: `problems` lists
 * every problem of every entry given, each with its code (those of
 * preflight, plus `invalid_key`), the field and the entry's position;
 * nothing was written.
 */
export class ScheduleEntryError extends CronledgerError {
  readonly problems: readonly ScheduleProblem[];

  constructor(problems: readonly ScheduleProblem[]) {
    super(
      "schedule_entry_invalid",
      `${problems.length === 1 ? "The schedule entry is" : `${problems.length} problems in the schedule entries:`} invalid; nothing was stored:\n` +
        problems.map((problem) => `  - [${problem.code}]${problem.field === undefined ? "" : ` ${problem.field}:`} ${problem.message}`).join("\n"),
    );
    this.problems = problems;
  }
}

/**
 * `pass`: the one statement that reads, creates, repairs and claims the
 * ledger rows of every candidate entry and inserts the jobs of the slots it
 * claimed. `enqueue`: one entry's share of it, retried alone after the whole
 * statement failed.
 */
export type TickPhase = "pass" | "enqueue";

/** A tick pass that failed after its retries; names the phase and, where one is involved, the entry. */
export class TickError extends CronledgerError {
  readonly phase: TickPhase;
  readonly entry: string | undefined;

  /**
   * `reason`: what went wrong, in one line (the pass says it: a diagnosis of the
   * database problem, or the statement cancelled by the pass timeout); default
   * the innermost cause's message.
   */
  constructor(phase: TickPhase, entry: string | undefined, cause: unknown, attempts: number, reason?: string) {
    super(
      "tick_failed",
      `Scheduler tick failed in phase "${phase}"${entry ? ` for entry ${entry}` : ""} after ${attempts} attempt${attempts === 1 ? "" : "s"}: ${reason ?? innermostMessage(cause)}. ` +
        "Check database connectivity; the next pass retries and no slot is lost (see docs/operations.md, \"Scheduler stuck\").",
      { cause },
    );
    this.phase = phase;
    this.entry = entry;
  }
}

// ---------------------------------------------------------------- jobs and payloads

/**
 * A chore (reap, prune) failed: its database error in one line, never the
 * statement drizzle wraps around it (a chore's statements are cronledger's
 * own, and their text and parameters belong in no log line or failure
 * ticket). The next slot of the chore tries again.
 */
export class ChoreFailedError extends CronledgerError {
  constructor(chore: string, cause: string) {
    super("chore_failed", `ChoreFailedError: the ${chore} chore failed: ${cause}. Its next slot tries again; see docs/operations.md ("Scheduler stuck") if it keeps failing.`);
    this.name = "ChoreFailedError";
  }
}

/**
 * A stored job that can never run: no worker has its name. Workers claim
 * only the names they have registered, so a job a rolling deploy's new code
 * enqueued waits for a worker that knows it; the prune chore fails it with
 * this error only once it has been ready, unclaimable, for longer than
 * `chores.failUnregisteredAfter` (src/db/sql/workers.ts).
 */
export class JobNotRegisteredError extends CronledgerError {
  /** PostgreSQL `format()` template of what the prune chore stores: job name, queue, how long it waited. */
  static readonly UNCLAIMED_FORMAT =
    'JobNotRegisteredError [job_not_registered]: no running worker that serves queue "%2$s" has registered job "%1$s" for %3$s; ' +
    "failed as a job that can never run. Deploy a worker that has it (createCronledger({ jobs })) and retry this ticket.";

  readonly jobName: string;

  /** `didYouMean`: the registered name closest to a misspelt one. */
  constructor(jobName: string, didYouMean?: string) {
    super(
      "job_not_registered",
      `JobNotRegisteredError: job "${jobName}" is not registered in this worker${didYouMean === undefined ? "" : ` (did you mean "${didYouMean}"?)`}; pass its defineJob() result in createCronledger({ jobs }) or deploy a worker that has it.`,
    );
    this.jobName = jobName;
  }
}

/** A payload that fails its job's schema (zod, valibot, any Standard Schema); nothing was written. */
export class PayloadValidationError extends CronledgerError {
  readonly jobName: string;
  readonly issues: readonly string[];

  constructor(jobName: string, issues: readonly string[], context?: string) {
    super(
      "invalid_payload",
      `Payload for job "${jobName}"${context ? ` (${context})` : ""} does not match its schema: ${issues.join("; ")}. Fix the payload or the job's schema; nothing was written.`,
    );
    this.jobName = jobName;
    this.issues = issues;
  }
}

/** A payload whose stored JSON is over `maxPayloadBytes`; nothing was written. */
export class PayloadTooLargeError extends CronledgerError {
  readonly jobName: string;
  readonly bytes: number;
  readonly maxBytes: number;

  constructor(jobName: string, bytes: number, maxBytes: number, message: string) {
    super("payload_too_large", message);
    this.jobName = jobName;
    this.bytes = bytes;
    this.maxBytes = maxBytes;
  }
}

/** A stored payload that no longer matches the job's schema: terminal, because no retry can fix it. */
export class InvalidStoredJobError extends CronledgerError {
  readonly jobName: string;
  readonly issues: readonly string[];

  constructor(jobName: string, jobId: number, issues: readonly string[]) {
    super(
      "invalid_stored_input",
      `Payload of job "${jobName}" (id ${jobId}) does not match its schema: ${issues.join("; ")}. ` +
        "The job failed without retrying; fix the schema or re-enqueue it with a valid payload.",
    );
    this.jobName = jobName;
    this.issues = issues;
  }
}

/** Thrown by a handler to fail the job terminally, without retries. */
export class NonRetryableError extends CronledgerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("non_retryable", message, options);
  }
}

/** The handler ran past its job's timeout; its signal was aborted and the attempt counts as failed. */
export class JobTimeoutError extends CronledgerError {
  readonly jobName: string;
  readonly timeoutMs: number;

  constructor(jobName: string, timeoutMs: number) {
    super(
      "job_timeout",
      `Job "${jobName}" ran longer than its timeout of ${timeoutMs} ms; its ctx.signal was aborted. Raise \`timeout\` in defineJob or make the handler faster.`,
    );
    this.jobName = jobName;
    this.timeoutMs = timeoutMs;
  }
}

/** Aborts a handler when its worker shuts down past the grace period; the job goes back to the queue. */
export class WorkerShutdownError extends CronledgerError {
  constructor(workerId: string) {
    super("worker_shutdown", `Worker ${workerId} is shutting down: the job was interrupted and returned to the queue.`);
  }
}

/** Who asked a running job to stop, when, and why: what `cancelJob` wrote in its row (cancel_requested_*). */
export interface StopRequest {
  readonly jobId: number;
  readonly requestedAt: Date;
  /** The operator's surface and identity (`cli:alice@host`, `admin`, an overlap policy). */
  readonly requestedBy: string;
  readonly reason: string | null;
}

/**
 * The reason of a handler's aborted `ctx.signal` when an operator (or an
 * entry's overlap policy) asked its running job to stop: `requestedBy` and
 * `reason` say who and why. The job ends `cancelled` when its handler
 * returns, never retried; one still running `graceMs` later is failed as
 * killed (JobKilledError).
 */
export class JobCancelledError extends CronledgerError {
  readonly jobId: number;
  readonly requestedAt: Date;
  readonly requestedBy: string;
  readonly reason: string | null;
  readonly graceMs: number;

  constructor(request: StopRequest, graceMs: number) {
    super(
      "job_cancelled",
      `Job ${request.jobId} was asked to stop by ${request.requestedBy}${request.reason ? ` (${request.reason})` : ""}; ` +
        `return from the handler: the job ends cancelled, or is failed as killed if it still runs ${graceMs} ms after the request reached its worker.`,
    );
    this.jobId = request.jobId;
    this.requestedAt = request.requestedAt;
    this.requestedBy = request.requestedBy;
    this.reason = request.reason;
    this.graceMs = graceMs;
  }
}

/** A handler that went on running for the stop grace after its job was asked to stop: the job is failed (not retried) and its worker slot freed. */
export class JobKilledError extends CronledgerError {
  readonly jobId: number;

  constructor(stop: JobCancelledError) {
    super(
      "job_killed",
      `Job ${stop.jobId} was asked to stop by ${stop.requestedBy}${stop.reason ? ` (${stop.reason})` : ""} and its handler had not returned ${stop.graceMs} ms later: ` +
        "failed as killed, not retried. Make the handler honour ctx.signal, or raise `stopGrace` in createCronledger.",
    );
    this.jobId = stop.jobId;
  }
}

/** Aborts a handler whose job the reaper took back (its heartbeat went stale); another worker may run it. */
export class LeaseLostError extends CronledgerError {
  constructor(jobId: number) {
    super("lease_lost", `Job ${jobId} was reaped while this worker ran it (stale heartbeat); it will run again elsewhere.`);
  }
}

export interface LeaseExpiry {
  readonly workerId: string;
  readonly attempt: number;
  /** As the database prints it. */
  readonly lastHeartbeat: string;
  readonly leaseMs: number;
  /** True when the job went back to the queue, false when that attempt was its last. */
  readonly requeued: boolean;
}

/**
 * What the reaper stores as `last_error` of a job whose worker stopped
 * heartbeating. The reaper writes it inside its one statement, from
 * `format(LeaseExpiredError.FORMAT, ...)`; the class is the one place the
 * text is spelt, so a stored ticket reads like `String(new LeaseExpiredError(...))`.
 */
export class LeaseExpiredError extends CronledgerError {
  /** PostgreSQL `format()` template: worker, attempt, last heartbeat, lease in ms, then what happened. */
  static readonly FORMAT = "LeaseExpiredError [lease_expired]: worker %s stopped heartbeating during attempt %s (last heartbeat %s, lease %s ms); %s";
  static readonly REQUEUED = "returned to the queue.";
  static readonly FAILED = "no attempts left, failed.";

  constructor(expiry: LeaseExpiry) {
    super(
      "lease_expired",
      `worker ${expiry.workerId} stopped heartbeating during attempt ${expiry.attempt} (last heartbeat ${expiry.lastHeartbeat}, lease ${expiry.leaseMs} ms); ` +
        (expiry.requeued ? LeaseExpiredError.REQUEUED : LeaseExpiredError.FAILED),
    );
  }
}

// ---------------------------------------------------------------- operators' views and actions

/** A failures filter that cannot be used (limit out of range, malformed cursor). */
export class InvalidFailureFilterError extends CronledgerError {
  constructor(message: string) {
    super("invalid_filter", message);
  }
}

export class JobNotFoundError extends CronledgerError {
  readonly jobId: number;

  constructor(jobId: number) {
    super("job_not_found", `Job ${jobId} does not exist (retention may have deleted it).`);
    this.jobId = jobId;
  }
}

/** Only terminal failures can be retried: anything else is still running, done, or cancelled on purpose. */
export class JobNotFailedError extends CronledgerError {
  readonly jobId: number;
  readonly status: string;

  constructor(jobId: number, status: string) {
    super("job_not_failed", `Job ${jobId} is ${status}, not failed; only failed jobs can be retried.`);
    this.jobId = jobId;
    this.status = status;
  }
}

/** A finished job (succeeded, failed) cannot be cancelled: it is history. A queued job is cancelled, a running one asked to stop. */
export class JobNotCancellableError extends CronledgerError {
  readonly jobId: number;
  readonly status: string;

  constructor(jobId: number, status: string) {
    super(
      "job_not_cancellable",
      `Job ${jobId} is ${status}; only a queued job (waiting for its first run or for a retry) or a running one (asked to stop) can be cancelled.` +
        (status === "failed" ? " Retry it instead, or leave it: a failure ticket is kept for its retention." : ""),
    );
    this.jobId = jobId;
    this.status = status;
  }
}

// ---------------------------------------------------------------- the database

export class MigrationError extends CronledgerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("migration_failed", message, options);
  }
}

/**
 * The database lacks cronledger's tables, or has an older version of them
 * than this version of cronledger needs. Raised before anything is written,
 * by every entry point that needs the tables (enqueue, tick, work, start and
 * the CLI commands), so a deploy that skipped its migration fails loudly.
 */
export class MigrationRequiredError extends CronledgerError {
  /** Schema version found: how many of cronledger's migrations the tables match (0: none). */
  readonly foundVersion: number;
  /** Schema version this version of cronledger needs: the number of migrations it ships. */
  readonly requiredVersion: number;
  /** What is missing, as `table <schema>.<table>`, `column <schema>.<table>.<column>` or `index <schema>.<index>`. */
  readonly missing: readonly string[];

  constructor(details: {
    readonly database: string;
    readonly foundVersion: number;
    readonly requiredVersion: number;
    readonly requiredMigration: string;
    readonly missing: readonly string[];
    /** None of the tables exist. */
    readonly empty: boolean;
  }) {
    const shown = details.missing.slice(0, 5).join(", ") + (details.missing.length > 5 ? `, and ${details.missing.length - 5} more` : "");
    const found = details.empty
      ? `cronledger's tables do not exist in ${details.database} (schema version 0)`
      : `cronledger's tables in ${details.database} are at schema version ${details.foundVersion} and lack ${shown}`;
    // drizzle-kit cannot partition a table: only `cronledger migrate` can, whichever route made the tables.
    const partitioningOnly = details.missing.length > 0 && details.missing.every((object) => object.startsWith("partitioning of "));
    super(
      "migration_required",
      `${found}; this version of cronledger needs schema version ${details.requiredVersion} (migration ${details.requiredMigration}). ` +
        (partitioningOnly
          ? "Run `cronledger migrate` (or `await ledger.migrate()`) once: drizzle-kit cannot create partitioned tables, and it partitions " +
            "the tables your drizzle-kit migrations made, keeping their rows. Nothing was written."
          : "Run `cronledger migrate` (or `await ledger.migrate()`) first; if your own drizzle-kit migrations create cronledger's tables " +
            "from `cronledger/schema`, run `drizzle-kit generate` and `drizzle-kit migrate`, then `cronledger migrate` once. Nothing was written."),
    );
    this.foundVersion = details.foundVersion;
    this.requiredVersion = details.requiredVersion;
    this.missing = details.missing;
  }
}

/**
 * A `db` option (`enqueue`, `enqueueMany`, `ctx.enqueue`, `schedules.upsert`...)
 * whose transaction or database is on another database than the ledger's:
 * cronledger's tables are in the ledger's database only, so the write cannot
 * go there, and the job could never commit with the business rows anyway.
 */
export class TransactionOnOtherDatabaseError extends CronledgerError {
  /** The ledger's database, as `name` (`current_database()`) or its connection label. */
  readonly ledgerDatabase: string;
  /** The database the `db` option is on; null when it could not be read (the failed write aborted the transaction). */
  readonly transactionDatabase: string | null;

  constructor(details: { readonly ledgerDatabase: string; readonly transactionDatabase: string | null }, options?: { cause?: unknown }) {
    const where = details.transactionDatabase === null ? "another database" : `database ${JSON.stringify(details.transactionDatabase)}`;
    super(
      "transaction_on_other_database",
      `The \`db\` option is a transaction (or database) on ${where}, not on the ledger's database (${details.ledgerDatabase}), ` +
        "where cronledger's tables are: a job written beside your rows must be written in their database. " +
        "Point the ledger at the database your transaction uses (its URL as createCronledger's `database`, then `cronledger migrate` there), " +
        "or leave out `db` to write on the ledger's own connection (the job then commits on its own, not with your transaction). Nothing was written.",
      options,
    );
    this.ledgerDatabase = details.ledgerDatabase;
    this.transactionDatabase = details.transactionDatabase;
  }
}

/**
 * The database cannot be reached or refuses cronledger, for a reason the
 * process cannot fix by itself: `code` names the cause (`connection_refused`,
 * `authentication_failed`, `database_not_found`...), the message says what to
 * do, `cause` holds the driver's error. Thrown by the startup check, so
 * `start()`, `enqueue()` and the CLI fail with it before anything is written.
 */
export class DatabaseUnavailableError extends CronledgerError {
  /** Retrying cannot fix it (a wrong password, a missing database); false for a server that may come back. */
  readonly persistent: boolean;

  constructor(diagnosis: DatabaseDiagnosis, database: string, cause: unknown) {
    super(diagnosis.problem, `${diagnosis.message} (${database})`, { cause });
    this.persistent = diagnosis.persistent;
  }
}

/** An operator named a schedule entry (to pause, resume, trigger or backfill it) that this process's schedule does not have (a typo, or an entry of another deploy). */
export class EntryNotFoundError extends CronledgerError {
  readonly entry: string;

  constructor(entry: string, suggestion: string | undefined, known: readonly string[] = []) {
    super(
      "entry_not_found",
      `No schedule entry "${entry}" here.` +
        (suggestion === undefined ? "" : ` Did you mean "${suggestion}"?`) +
        ` Name an entry by its key, its job name (when one entry runs it), its identity or its ledger key (\`cronledger status\` lists them)` +
        (known.length === 0 ? "." : `: ${known.slice(0, 10).join(", ")}${known.length > 10 ? ", ..." : ""}.`),
    );
    this.entry = entry;
  }
}

/** Where a backfill was asked for: each names its switches its own way (`force: true`, `--force`, `"force": true`). */
export type BackfillSurface = "api" | "cli" | "http";

const BACKFILL_SWITCHES: Readonly<Record<BackfillSurface, { force: string; dryRun: string; max: string }>> = {
  api: { force: "force: true", dryRun: "dryRun: true", max: "max (and latest: true)" },
  cli: { force: "--force", dryRun: "--dry-run", max: "--max <n> (and --latest)" },
  http: { force: '"force": true in the body', dryRun: '"dry_run": true', max: '"max" (and "latest": true)' },
};

/** A backfill that would enqueue more jobs than an operator should start by accident. */
export class BackfillTooLargeError extends CronledgerError {
  /** Slots the request would cover (the range's count stops just past `limit`). */
  readonly slots: number;
  /** Slots allowed: the cap without force, the hard limit with it. */
  readonly limit: number;
  /** The request was forced already: only splitting the range helps. */
  readonly forced: boolean;
  readonly surface: BackfillSurface;

  constructor(details: { slots: number; limit: number; forced: boolean }, surface: BackfillSurface = "api") {
    super("backfill_too_large", backfillRefusal(details, surface));
    this.slots = details.slots;
    this.limit = details.limit;
    this.forced = details.forced;
    this.surface = surface;
  }

  /** The same refusal, worded with the switches of another surface (the CLI's flags, the HTTP body's fields). */
  on(surface: BackfillSurface): BackfillTooLargeError {
    return surface === this.surface ? this : new BackfillTooLargeError(this, surface);
  }
}

function backfillRefusal({ slots, limit, forced }: { slots: number; limit: number; forced: boolean }, surface: BackfillSurface): string {
  const switches = BACKFILL_SWITCHES[surface];
  if (forced) return `A backfill covers at most ${limit} slots even with ${switches.force} (this range has more); split the range.`;
  return (
    `This backfill covers ${slots > limit ? `more than ${limit}` : slots} slots, more than the ${limit} allowed without ${switches.force}: ` +
    `check the range with a dry run (${switches.dryRun}), bound it with ${switches.max}, or force it with ${switches.force}.`
  );
}

/**
 * Every error cronledger throws is a CronledgerError with a stable `code`
 * that callers can switch on; the message says what to do about it.
 */
export class CronledgerError extends Error {
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

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

export class InvalidDurationError extends CronledgerError {
  constructor(value: unknown, what: string) {
    super(
      "invalid_duration",
      `Invalid ${what} ${JSON.stringify(value)}: use a non-negative number of milliseconds or a string such as "500ms", "30s", "2m", "1h" or "1d".`,
    );
  }
}

/** A job name that this process has no definition for. */
export class JobNotRegisteredError extends CronledgerError {
  readonly jobName: string;

  constructor(jobName: string) {
    super(
      "job_not_registered",
      `JobNotRegisteredError: job "${jobName}" is not registered in this worker; pass its defineJob() result in createCronledger({ jobs }) or deploy a worker that has it.`,
    );
    this.jobName = jobName;
  }
}

/** A payload that fails its job's zod schema; nothing was written. */
export class PayloadValidationError extends CronledgerError {
  readonly jobName: string;
  readonly issues: readonly string[];

  constructor(jobName: string, issues: readonly string[], context?: string) {
    super(
      "invalid_payload",
      `Payload for job "${jobName}"${context ? ` (${context})` : ""} does not match its schema: ${issues.join("; ")}. Fix the payload or the job's zod schema; nothing was written.`,
    );
    this.jobName = jobName;
    this.issues = issues;
  }
}

/** Configuration passed to createCronledger or the CLI that cannot work. */
export class ConfigError extends CronledgerError {
  constructor(message: string) {
    super("invalid_config", message);
  }
}

/** Thrown by a handler to fail the job terminally, without retries. */
export class NonRetryableError extends CronledgerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("non_retryable", message, options);
  }
}

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
  /** What is missing, e.g. `table cronledger.jobs`, `column cronledger.jobs.outcome`, `index cronledger.jobs_ready_idx`. */
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
    super(
      "migration_required",
      `${found}; this version of cronledger needs schema version ${details.requiredVersion} (migration ${details.requiredMigration}). ` +
        "Run `cronledger migrate` (or `await ledger.migrate()`) first; if your own drizzle-kit migrations create cronledger's tables " +
        "from `cronledger/schema`, run `drizzle-kit generate` and `drizzle-kit migrate` instead. Nothing was written.",
    );
    this.foundVersion = details.foundVersion;
    this.requiredVersion = details.requiredVersion;
    this.missing = details.missing;
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
    | "never_matches";
  readonly severity: "error" | "warning";
  /** 0-based position in the schedule array. */
  readonly index: number;
  readonly jobName?: string;
  readonly identity?: string;
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

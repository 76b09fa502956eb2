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

  /** `didYouMean`: the registered name closest to a misspelt one. */
  constructor(jobName: string, didYouMean?: string) {
    super(
      "job_not_registered",
      `JobNotRegisteredError: job "${jobName}" is not registered in this worker${didYouMean === undefined ? "" : ` (did you mean "${didYouMean}"?)`}; pass its defineJob() result in createCronledger({ jobs }) or deploy a worker that has it.`,
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

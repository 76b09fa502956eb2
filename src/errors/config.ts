import { CronledgerError } from "./codes.js";

/** Errors of configuration and API use: options, config files, the command line, durations. */

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

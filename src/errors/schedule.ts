import { innermostMessage } from "../error-chain.js";
import { CronledgerError } from "./codes.js";

/** Errors of schedules: cron expressions, time zones, an entry's validation, a failed tick. */

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

import { CronledgerError } from "./codes.js";

/** Errors of operators' views and actions: failure filters, jobs and entries that are not there or not in a state for the action, backfills too large. */

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

/**
 * The root of every error cronledger throws or stores: the one `ErrorCode`
 * union (the public API's stable codes), the names of database problems,
 * `CronledgerError` that every error class extends, and the HTTP status the
 * admin API answers for each code. The classes live beside it, a file per
 * family; src/errors.ts re-exports them all.
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

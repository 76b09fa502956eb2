import { CronledgerError, type DatabaseDiagnosis } from "./codes.js";

/** Errors of the database: migrations missing or failed, a `db` option on another database, a database that cannot be reached. */

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

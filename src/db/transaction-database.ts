import { errorChain } from "../error-chain.js";
import { TransactionOnOtherDatabaseError } from "../errors.js";
import type { Database } from "./connection.js";
import type { Executor } from "./executor.js";
import { databaseIdentity, hasJobTable, sameDatabase, type DatabaseIdentity } from "./sql/database-identity.js";

/**
 * The application's `db` (its transaction or database, given to enqueue or
 * to a dynamic schedule's write) on another database than the ledger's first
 * looks like cronledger's tables missing: from the schema check read through
 * it, or from the write itself when the check had passed on the ledger's own
 * connection. Told apart here by comparing the two databases, and only on
 * those error paths: a write that works costs nothing more.
 */

async function identityOf(executor: Executor): Promise<DatabaseIdentity | undefined> {
  try {
    return await databaseIdentity(executor);
  } catch {
    // A transaction that a failed statement aborted answers nothing more (25P02).
    return undefined;
  }
}

/**
 * TransactionOnOtherDatabaseError when `executor` is on another database
 * than the ledger's; undefined when it is on the same one (the tables are
 * really missing) or when that cannot be told.
 */
export async function otherDatabaseError(database: Database, executor: Executor, cause: unknown): Promise<TransactionOnOtherDatabaseError | undefined> {
  // An embedded ledger runs one transaction at a time: asking it beside the application's open transaction would wait forever.
  if (executor === database.db || database.kind === "pglite") return undefined;
  const ledger = await identityOf(database.db);
  if (ledger === undefined) return undefined;
  const theirs = await identityOf(executor);
  if (theirs !== undefined) {
    return sameDatabase(ledger, theirs) ? undefined : new TransactionOnOtherDatabaseError({ ledgerDatabase: ledger.name, transactionDatabase: theirs.name }, { cause });
  }
  // The aborted transaction cannot be asked where it is; it missed a table the ledger's database has, so it is elsewhere.
  const ledgerHasTables = await hasJobTable(database.db).catch(() => false);
  return ledgerHasTables ? new TransactionOnOtherDatabaseError({ ledgerDatabase: ledger.name, transactionDatabase: null }, { cause }) : undefined;
}

/** An undefined table or schema of cronledger's (42P01, 3F000): what a write on another database meets first. */
function missesLedgerRelation(error: unknown): boolean {
  return errorChain(error).some(
    (item) => (item.code === "42P01" || item.code === "3F000") && typeof item.message === "string" && /\bcronledger\b/.test(item.message),
  );
}

/**
 * Runs a write on the application's `db`; when it fails because cronledger's
 * tables are not where that `db` is, throws TransactionOnOtherDatabaseError
 * instead, and otherwise the write's own error.
 */
export async function onLedgerDatabase<T>(database: Database, executor: Executor, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (executor !== database.db && missesLedgerRelation(error)) throw (await otherDatabaseError(database, executor, error)) ?? error;
    throw error;
  }
}

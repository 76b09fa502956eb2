import { hasTransientCode, innermostMessage } from "../error-chain.js";
import { diagnoseDatabaseError } from "./diagnose.js";

/** True for errors that a retry on a fresh connection can fix (drizzle wraps driver errors in `cause`). */
export function isTransientDatabaseError(error: unknown): boolean {
  // A pooler's 08P01 for a refused setting is in the 08 class, but no retry changes a wrong setting or password.
  if (diagnoseDatabaseError(error)?.persistent) return false;
  return hasTransientCode(error);
}

/**
 * The cause of a database error in one line, never the SQL text: the
 * diagnosis (cause and fix, see diagnose.ts) when it is a known connection
 * problem, else the innermost cause's message. Without a final period, as
 * it is quoted inside longer messages.
 */
export function rootMessage(error: unknown): string {
  const diagnosis = diagnoseDatabaseError(error);
  if (diagnosis) return diagnosis.message.replace(/\.$/, "");
  return innermostMessage(error);
}

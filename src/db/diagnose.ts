import { errorChain, findCode, type ErrorLike } from "../error-chain.js";
import type { DatabaseDiagnosis, DatabaseProblem } from "../errors.js";

/**
 * What went wrong talking to the database, in one line that names the cause
 * and the fix. drizzle wraps every driver error in a DrizzleQueryError whose
 * message is the whole SQL statement ("Failed query: ..."); the cause that
 * matters (a socket error, a PostgreSQL SQLSTATE) is further down its cause
 * chain, so the chain is searched and the statement never shown.
 *
 * Pure: no I/O, no logging. The CLI prints `message`; runtime log lines use
 * describeDatabaseError; the supervisor and workers slow their retries down
 * for `persistent` problems (retryCapMs). The chain is walked by
 * src/error-chain.ts; the problems' names are error codes (src/errors.ts).
 */
export type { DatabaseDiagnosis, DatabaseProblem } from "../errors.js";

/** Where the URL lives, for the fixes that say to change it. */
const URL_HINT = "DATABASE_URL (or the config's database.url)";

const text = (value: unknown): string => (typeof value === "string" ? value : value === undefined || value === null ? "" : String(value));

/** "127.0.0.1:5999" from a socket error (postgres.js keeps host lists as arrays, hence String()). */
function endpoint(error: ErrorLike): string | undefined {
  const address = text(error.address);
  if (address === "") return undefined;
  const port = text(error.port);
  return port === "" ? address : `${address.includes(":") && !address.startsWith("[") ? `[${address}]` : address}:${port}`;
}

const firstLine = (message: unknown): string => text(message).split("\n")[0]?.trim() ?? "";

const TLS_REQUIRED = /no encryption|(?:ssl|tls)\b.*\brequired|requires? (?:an? )?(?:ssl|tls|encrypt)/i;
const TLS_CLIENT_CODES = new Set(["EPROTO", "ERR_SSL_WRONG_VERSION_NUMBER", "ERR_TLS_CERT_ALTNAME_INVALID", "DEPTH_ZERO_SELF_SIGNED_CERT", "SELF_SIGNED_CERT_IN_CHAIN", "UNABLE_TO_VERIFY_LEAF_SIGNATURE", "CERT_HAS_EXPIRED"]);
const REFUSED_PARAMETER = /unsupported startup parameter:?\s*"?([\w.]+)"?|unrecognized configuration parameter "([\w.]+)"/i;

/** Names the cause of a database failure and its fix, or undefined when the error is not one of the known connection problems. */
export function diagnoseDatabaseError(error: unknown): DatabaseDiagnosis | undefined {
  const errors = errorChain(error);
  const diagnosis = (problem: DatabaseProblem, message: string, persistent: boolean): DatabaseDiagnosis => ({ problem, message, persistent });

  // SQLSTATEs first: a server that answered said exactly what is wrong.
  const refusedSetting = errors.find((item) => REFUSED_PARAMETER.test(text(item.message)) && (item.code === "08P01" || item.code === "42704" || item.code === undefined));
  if (refusedSetting) {
    const match = REFUSED_PARAMETER.exec(text(refusedSetting.message));
    const parameter = match?.[1] ?? match?.[2] ?? "a startup parameter";
    const fix =
      parameter === "client_connection_check_interval"
        ? "set `database: { url, clientConnectionCheck: false }` or CRONLEDGER_CLIENT_CONNECTION_CHECK=off (PostgreSQL 13 does not know it); behind PgBouncer set `database: { url, pooler: \"pgbouncer\" }`, which leaves it out"
        : `remove it from the connection settings, or list it in the pooler's ignore_startup_parameters`;
    return diagnosis("setting_refused", `the server or a pooler in front of it refused the startup parameter ${parameter} (${firstLine(refusedSetting.message)}): ${fix}.`, true);
  }
  const auth = findCode(error, (code) => code === "28P01" || code === "28000");
  if (auth) {
    const said = firstLine(auth.message);
    if (TLS_REQUIRED.test(said)) {
      return diagnosis("tls_required", `the server requires an encrypted connection (${said}): add ?sslmode=require to ${URL_HINT}.`, true);
    }
    return diagnosis(
      "authentication_failed",
      `${/authentication failed/i.test(said) ? said : `authentication failed: ${said}`}: check the user name and password in ${URL_HINT}, and the server's pg_hba.conf; retrying will not help.`,
      true,
    );
  }
  const missing = findCode(error, (code) => code === "3D000");
  if (missing) {
    const said = firstLine(missing.message);
    const name = /database "([^"]+)"/.exec(said)?.[1];
    return diagnosis(
      "database_not_found",
      `${said}: create it${name ? ` (createdb ${JSON.stringify(name)}, or CREATE DATABASE)` : ""} or fix the database name at the end of ${URL_HINT}.`,
      true,
    );
  }
  // cronledger's own tables or schema missing under a running process (dropped, or the database made again empty).
  const tables = errors.find((item) => (item.code === "42P01" || item.code === "3F000") && /\bcronledger\b/.test(text(item.message)));
  if (tables) {
    return diagnosis(
      "migration_required",
      `cronledger's tables are missing (${firstLine(tables.message)}): run \`cronledger migrate\` (or \`await ledger.migrate()\`); cronledger retries until they are there.`,
      false,
    );
  }
  const full = findCode(error, (code) => code === "53300" || code === "53000");
  if (full) {
    return diagnosis(
      "too_many_connections",
      `the server has no free connection slot (${firstLine(full.message)}): lower poolSize or the number of replicas (docs/operations.md, "Connection budget"), or raise max_connections.`,
      false,
    );
  }
  const readOnly = findCode(error, (code) => code === "25006");
  if (readOnly) {
    return diagnosis(
      "server_unavailable",
      `the server is read-only (${firstLine(readOnly.message)}): a standby, or a primary being demoted. cronledger reconnects; with a primary and standbys, list them all in ${URL_HINT} with target_session_attrs=read-write (docs/operations.md, "High availability").`,
      false,
    );
  }
  const unavailable = findCode(error, (code) => code === "57P03" || code === "57P01" || code === "57P02");
  if (unavailable) {
    return diagnosis("server_unavailable", `the server is not accepting connections right now (${firstLine(unavailable.message)}); cronledger retries until it is back.`, false);
  }

  // Then what the socket said: nothing answered at all.
  const refused = findCode(error, (code) => code === "ECONNREFUSED");
  if (refused) {
    const where = errors.map(endpoint).find((found) => found !== undefined);
    return diagnosis(
      "connection_refused",
      `connection refused${where ? ` at ${where}` : ""}: no PostgreSQL is listening there. Start it, or fix the host and port in ${URL_HINT}.`,
      false,
    );
  }
  const unknownHost = findCode(error, (code) => code === "ENOTFOUND" || code === "EAI_AGAIN");
  if (unknownHost) {
    const host = text(unknownHost.hostname) || "the database host";
    return diagnosis("host_not_found", `host ${JSON.stringify(host)} was not found (DNS lookup failed): fix the host name in ${URL_HINT}.`, false);
  }
  const timeout = findCode(error, (code) => code === "CONNECT_TIMEOUT" || code === "ETIMEDOUT" || code === "EHOSTUNREACH" || code === "ENETUNREACH");
  if (timeout) {
    const where = endpoint(timeout);
    return diagnosis(
      "connection_timeout",
      `timed out connecting to PostgreSQL${where ? ` at ${where}` : ""}: nothing answered. Check the host and port in ${URL_HINT}, and firewalls or security groups between here and the server.`,
      false,
    );
  }
  const tls = findCode(error, (code) => TLS_CLIENT_CODES.has(code)) ?? errors.find((item) => /secure TLS connection|SSL routines|does not support SSL/i.test(text(item.message)));
  if (tls) {
    return diagnosis(
      "tls_failed",
      `the TLS connection to the server failed (${firstLine(tls.message)}): check sslmode in ${URL_HINT} against what the server supports, and its certificate.`,
      true,
    );
  }
  return undefined;
}

/** drizzle's wrapper around a driver error: its message is the SQL statement and its parameters. */
function isStatementWrapper(error: ErrorLike): boolean {
  return error.name === "DrizzleQueryError" || text(error.message).startsWith("Failed query:");
}

/**
 * One line for a log or an error message: the diagnosis when the cause is
 * known, else the first error of the chain that is not drizzle's statement
 * wrapper, as `Name [code]: message`. Never the SQL text. Not redacted:
 * callers that show it pass it through redact().
 */
export function describeDatabaseError(error: unknown): string {
  const diagnosis = diagnoseDatabaseError(error);
  if (diagnosis) return diagnosis.message;
  const errors = errorChain(error);
  const shown = errors.find((item) => !isStatementWrapper(item)) ?? errors.at(-1);
  if (shown === undefined) return text(error);
  if (!(shown instanceof Error)) {
    try {
      return JSON.stringify(shown) ?? text(shown);
    } catch {
      return text(shown);
    }
  }
  const code = typeof (shown as ErrorLike).code === "string" ? ` [${text((shown as ErrorLike).code)}]` : "";
  const message = text(shown.message);
  return message.startsWith(`${shown.name}:`) ? `${shown.name}${code}${message.slice(shown.name.length)}` : `${shown.name}${code}: ${message}`;
}

/** Retries of a transient failure back off up to `transientCapMs`; a persistent one (wrong password, missing database) to once a minute, so the log is loud but not a flood. */
export const PERSISTENT_RETRY_CAP_MS = 60_000;

export function retryCapMs(error: unknown, transientCapMs: number): number {
  return diagnoseDatabaseError(error)?.persistent ? PERSISTENT_RETRY_CAP_MS : transientCapMs;
}

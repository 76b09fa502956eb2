import { DrizzleQueryError } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { describeDatabaseError, diagnoseDatabaseError, PERSISTENT_RETRY_CAP_MS, retryCapMs } from "../src/db/diagnose.js";
import { isTransientDatabaseError, rootMessage } from "../src/db/transient.js";
import { MigrationError } from "../src/errors.js";
import { TickError } from "../src/errors.js";

const STATEMENT = "select to_regclass('cronledger.jobs') is not null as present";

/** A driver error as drizzle hands it over: wrapped in the statement that failed. */
function wrapped(cause: Error): DrizzleQueryError {
  return new DrizzleQueryError(STATEMENT, [], cause);
}

/** The shapes postgres.js and node:net produce (fields as the real errors have them; see test/cli-database-errors.test.ts for the real ones). */
const socketError = (code: string, message: string, fields: Record<string, unknown> = {}) => Object.assign(new Error(message), { code, ...fields });
const serverError = (code: string, message: string) => Object.assign(new Error(message), { name: "PostgresError", code, severity: "FATAL" });

describe("diagnoseDatabaseError", () => {
  it.each([
    {
      name: "connection refused",
      error: wrapped(socketError("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:5999", { address: "127.0.0.1", port: 5999 })),
      problem: "connection_refused",
      says: /^connection refused at 127\.0\.0\.1:5999: no PostgreSQL is listening there\. Start it, or fix the host and port in DATABASE_URL/,
      persistent: false,
    },
    {
      name: "connection refused on every address of localhost",
      error: wrapped(
        Object.assign(new AggregateError([socketError("ECONNREFUSED", "connect ECONNREFUSED ::1:5999", { address: "::1", port: 5999 })], ""), { code: "ECONNREFUSED" }),
      ),
      problem: "connection_refused",
      says: /^connection refused at \[::1\]:5999/,
      persistent: false,
    },
    {
      name: "postgres.js connect timeout",
      error: wrapped(socketError("CONNECT_TIMEOUT", "write CONNECT_TIMEOUT 10.0.0.5:5432", { address: "10.0.0.5", port: 5432 })),
      problem: "connection_timeout",
      says: /^timed out connecting to PostgreSQL at 10\.0\.0\.5:5432: nothing answered/,
      persistent: false,
    },
    {
      name: "unknown host",
      error: wrapped(socketError("ENOTFOUND", "getaddrinfo ENOTFOUND db.internal", { hostname: "db.internal" })),
      problem: "host_not_found",
      says: /^host "db\.internal" was not found \(DNS lookup failed\)/,
      persistent: false,
    },
    {
      name: "wrong password",
      error: wrapped(serverError("28P01", 'password authentication failed for user "app"')),
      problem: "authentication_failed",
      says: /^password authentication failed for user "app": check the user name and password in DATABASE_URL .*retrying will not help\.$/,
      persistent: true,
    },
    {
      name: "unknown role",
      error: wrapped(serverError("28000", 'role "ghost" does not exist')),
      problem: "authentication_failed",
      says: /^authentication failed: role "ghost" does not exist: check the user name/,
      persistent: true,
    },
    {
      name: "TLS required by pg_hba.conf",
      error: wrapped(serverError("28000", 'no pg_hba.conf entry for host "10.1.2.3", user "app", database "app", no encryption')),
      problem: "tls_required",
      says: /^the server requires an encrypted connection \(no pg_hba\.conf entry .*\): add \?sslmode=require to DATABASE_URL/,
      persistent: true,
    },
    {
      name: "missing database",
      error: wrapped(serverError("3D000", 'database "app" does not exist')),
      problem: "database_not_found",
      says: /^database "app" does not exist: create it \(createdb "app", or CREATE DATABASE\) or fix the database name/,
      persistent: true,
    },
    {
      name: "PgBouncer refusing the startup parameter",
      error: wrapped(serverError("08P01", "unsupported startup parameter: client_connection_check_interval")),
      problem: "setting_refused",
      says: /refused the startup parameter client_connection_check_interval .*set `database: \{ url, clientConnectionCheck: false \}`/,
      persistent: true,
    },
    {
      name: "PostgreSQL 13 not knowing the parameter",
      error: wrapped(serverError("42704", 'unrecognized configuration parameter "client_connection_check_interval"')),
      problem: "setting_refused",
      says: /clientConnectionCheck: false/,
      persistent: true,
    },
    {
      name: "a pooler refusing another parameter",
      error: wrapped(serverError("08P01", "unsupported startup parameter: search_path")),
      problem: "setting_refused",
      says: /startup parameter search_path .*ignore_startup_parameters/,
      persistent: true,
    },
    {
      name: "no free connection slot",
      error: wrapped(serverError("53300", "sorry, too many clients already")),
      problem: "too_many_connections",
      says: /no free connection slot .*lower poolSize/,
      persistent: false,
    },
    {
      name: "server starting up",
      error: wrapped(serverError("57P03", "the database system is starting up")),
      problem: "server_unavailable",
      says: /not accepting connections right now/,
      persistent: false,
    },
    {
      name: "a read-only server (a standby, or a primary being demoted)",
      error: wrapped(serverError("25006", "cannot execute UPDATE in a read-only transaction")),
      problem: "server_unavailable",
      says: /server is read-only .*target_session_attrs=read-write/,
      persistent: false,
    },
    {
      name: "TLS handshake failure on the client side",
      error: wrapped(socketError("EPROTO", "write EPROTO 0020B0F7:error:0A00010B:SSL routines:ssl3_get_record:wrong version number")),
      problem: "tls_failed",
      says: /^the TLS connection to the server failed .*check sslmode/,
      persistent: true,
    },
  ])("names the cause and the fix: $name", ({ error, problem, says, persistent }) => {
    const diagnosis = diagnoseDatabaseError(error);
    expect(diagnosis).toMatchObject({ problem, persistent });
    expect(diagnosis?.message).toMatch(says);
    expect(diagnosis?.message).not.toContain("select");
    expect(diagnosis?.message.includes("\n")).toBe(false);
    // The same cause found below cronledger's own wrappers.
    expect(diagnoseDatabaseError(new MigrationError("cronledger migration failed", { cause: error }))?.problem).toBe(problem);
    expect(diagnoseDatabaseError(new TickError("pass", undefined, error, 3))?.problem).toBe(problem);
  });

  it("leaves other errors alone", () => {
    expect(diagnoseDatabaseError(wrapped(serverError("23505", 'duplicate key value violates unique constraint "jobs_pkey"')))).toBeUndefined();
    expect(diagnoseDatabaseError(new TypeError("Cannot read properties of undefined"))).toBeUndefined();
    expect(diagnoseDatabaseError("a string")).toBeUndefined();
    expect(diagnoseDatabaseError(undefined)).toBeUndefined();
  });

  it("survives a cause chain that loops", () => {
    const a = new Error("a");
    const b = new Error("b", { cause: a });
    (a as { cause?: unknown }).cause = b;
    expect(diagnoseDatabaseError(a)).toBeUndefined();
    expect(describeDatabaseError(a)).toBe("Error: a");
  });
});

describe("describeDatabaseError", () => {
  it("is the diagnosis when there is one", () => {
    const error = wrapped(socketError("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:5999", { address: "127.0.0.1", port: 5999 }));
    expect(describeDatabaseError(error)).toMatch(/^connection refused at 127\.0\.0\.1:5999/);
  });

  it("shows the driver's error instead of drizzle's statement wrapper", () => {
    const error = wrapped(serverError("23505", 'duplicate key value violates unique constraint "jobs_pkey"'));
    expect(error.message).toContain(STATEMENT);
    expect(describeDatabaseError(error)).toBe('PostgresError [23505]: duplicate key value violates unique constraint "jobs_pkey"');
  });

  it("keeps cronledger's own error, whose message already names the cause", () => {
    const tick = new TickError("pass", undefined, wrapped(serverError("23505", "duplicate key")), 1);
    expect(describeDatabaseError(tick)).toBe(`TickError [tick_failed]: ${tick.message}`);
    expect(describeDatabaseError(tick)).not.toContain(STATEMENT);
    expect(describeDatabaseError(new TypeError("x is not a function"))).toBe("TypeError: x is not a function");
  });
});

describe("retries of a persistent problem", () => {
  it("back off to once a minute, and the tick does not count them as transient", () => {
    const password = wrapped(serverError("28P01", 'password authentication failed for user "app"'));
    const refused = wrapped(socketError("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:5999", { address: "127.0.0.1", port: 5999 }));
    const pooler = wrapped(serverError("08P01", "unsupported startup parameter: client_connection_check_interval"));
    expect(retryCapMs(password, 5_000)).toBe(PERSISTENT_RETRY_CAP_MS);
    expect(retryCapMs(pooler, 5_000)).toBe(PERSISTENT_RETRY_CAP_MS);
    expect(retryCapMs(refused, 5_000)).toBe(5_000);
    expect(isTransientDatabaseError(password)).toBe(false);
    expect(isTransientDatabaseError(pooler)).toBe(false);
    expect(isTransientDatabaseError(refused)).toBe(true);
  });

  it("are named in the messages that quote the root cause (tick and migration errors)", () => {
    const missing = wrapped(serverError("3D000", 'database "app" does not exist'));
    expect(rootMessage(missing)).toMatch(/^database "app" does not exist: create it .*database\.url\)$/);
    // A pass says it in its TickError (test/cli-database-errors.test.ts runs one against a server that refuses it).
  });
});

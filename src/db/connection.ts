import type { Logger as DrizzleLogger } from "drizzle-orm/logger";
import { drizzle as drizzlePostgres } from "drizzle-orm/postgres-js";
import { mkdirSync } from "node:fs";
import { resolve } from "node:path";
import postgres from "postgres";
import { ConfigError } from "../errors.js";
import type { Executor } from "./executor.js";
import { guardedSockets } from "./guarded-socket.js";
import { resolveTargets } from "./hosts.js";
import { loadPglite } from "./pglite.js";
import { templateFor } from "./pglite-template.js";
import type { Database } from "./database.js";
import { resolveDatabaseSetting, resolvePostgresSettings, type PgliteInstance, type PostgresSettings, type ResolvedDatabaseSetting } from "./settings.js";
import { preparingClient } from "./prepared.js";
import { withReservedTransactions } from "./reserved-begin.js";
import { cancellingClient } from "./statement-timeout.js";

export { query } from "./executor.js";
export type { Database } from "./database.js";
export { resolveDatabaseSetting, type DatabaseSetting, type PgliteInstance, type ResolvedDatabaseSetting } from "./settings.js";

export const DEFAULT_EMBEDDED_DIR = ".cronledger";

function countingLogger(statements: { count: number }): DrizzleLogger {
  return {
    logQuery() {
      statements.count += 1;
    },
  };
}

function redactUrl(url: string): string {
  try {
    // Several hosts (db1:5432,db2:5432) are not one URL host: parse with the first, show them all.
    const hosts = /^[a-z]+:\/\/(?:[^@/?#]*@)?([^/?#]*)/i.exec(url)?.[1] ?? "";
    const parsed = new URL(url.replace(hosts, hosts.split(",")[0] ?? ""));
    const target = /[?&]target_session_attrs=([^&#]*)/.exec(url)?.[1];
    return `PostgreSQL ${parsed.protocol}//${parsed.username ? `${parsed.username}@` : ""}${hosts}${parsed.pathname}${target ? ` (target_session_attrs=${target})` : ""}`;
  } catch {
    return "PostgreSQL";
  }
}

/**
 * postgres.js's reconnect backoff (random 50-100 % of 3^retries / 100 s,
 * retries counted across the pool since the last good connection) with its
 * cap lowered from 20 s to `maxMs`.
 */
function reconnectBackoff(maxMs: number): (retries: number) => number {
  return (retries) => (0.5 + Math.random() / 2) * Math.min(3 ** retries / 100, maxMs / 1000);
}

/** How long a migration waiting for the lock sleeps between tries. */
const LOCK_RETRY_MS = 100;

function describePostgres(settings: PostgresSettings): string {
  const base = redactUrl(settings.url);
  if (settings.pooler === undefined) return settings.listenUrl === settings.url ? base : `${base} (LISTEN on ${redactUrl(settings.listenUrl ?? "")})`;
  const wakeUps = settings.listenUrl === undefined ? "no listenUrl: workers poll for new jobs" : `LISTEN on ${redactUrl(settings.listenUrl)}`;
  return `${base} through PgBouncer (transaction pooling; ${wakeUps})`;
}

/**
 * A postgres.js pool for cronledger's own statements. `fetch_types: false`:
 * postgres.js 3.4 otherwise runs an array-types query as the first statement
 * of every new connection and drops its promise, so a server that terminates
 * or cancels that statement (a restart, a failover, pg_terminate_backend, a
 * statement timeout) ends the process with an unhandled rejection
 * (porsager/postgres#1192, #1205). cronledger sends its arrays as array
 * literals with explicit casts (`arrayLiteral`, src/db/sql/fragments.ts) and
 * reads none, so it needs no array types. Its connections go through
 * src/db/guarded-socket.ts, which picks the host and keeps a terminated
 * backend's error from reaching the next statement.
 */
function openPool(url: string, options: postgres.Options<Record<string, postgres.PostgresType>>): postgres.Sql {
  const targets = resolveTargets(url);
  const first = targets.endpoints[0];
  // `socket` is a postgres.js option its types leave out (its README, "Custom socket").
  const guarded: { socket: ReturnType<typeof guardedSockets> } = { socket: guardedSockets(targets) };
  return postgres(targets.driverUrl, {
    ...options,
    ...guarded,
    fetch_types: false,
    // One host and no TLS as far as postgres.js knows: the socket does both (src/db/hosts.ts says why).
    ...(first === undefined ? {} : { host: first.host, port: first.port }),
    ssl: false,
  });
}

function openPostgres(settings: PostgresSettings): Database {
  const statements = { count: 0 };
  const connection = { application_name: "cronledger" };
  const backoff = reconnectBackoff(settings.reconnectDelayMs);
  // max_pipeline is a postgres.js option its types leave out (its src/index.js reads it; default 100).
  // 0: one query in flight per connection, transactions on reserved connections (src/db/reserved-begin.ts).
  const pipelining: { max_pipeline: number } = { max_pipeline: settings.pipeline ? 100 : 0 };
  const pooled = openPool(settings.url, {
    ...pipelining,
    max: settings.poolSize,
    prepare: settings.prepare,
    onnotice: () => {},
    backoff,
    connection: {
      ...connection,
      ...(settings.clientConnectionCheckMs === false ? {} : { client_connection_check_interval: String(settings.clientConnectionCheckMs) }),
    },
  });
  const unprepared = settings.pipeline ? pooled : withReservedTransactions(pooled);
  const client = settings.prepare ? preparingClient(unprepared) : unprepared;
  // Behind a pooler, LISTEN needs a connection of its own to the server itself.
  const listener =
    settings.listenUrl === undefined
      ? undefined
      : settings.listenUrl === settings.url
        ? client
        : openPool(settings.listenUrl, { max: 1, onnotice: () => {}, backoff, connection });
  const db = drizzlePostgres(client, { logger: countingLogger(statements) }) as unknown as Executor;
  const timed = new Map<number, Executor>();
  return {
    kind: "postgres",
    label: describePostgres(settings),
    db,
    statements,
    withStatementTimeout(timeoutMs) {
      let executor = timed.get(timeoutMs);
      if (executor === undefined) {
        executor = drizzlePostgres(cancellingClient(client, timeoutMs), { logger: countingLogger(statements) }) as unknown as Executor;
        timed.set(timeoutMs, executor);
      }
      return executor;
    },
    async listen(channel, onMessage) {
      // No listener: workers find new jobs by polling.
      if (listener === undefined) return async () => {};
      const subscription = await listener.listen(channel, (payload) => onMessage(payload));
      return () => subscription.unlisten();
    },
    /**
     * A transaction-level lock held by an open transaction, taken with a try
     * and retried: no session state, so it works through PgBouncer in
     * transaction mode, and a waiter holds no server connection.
     */
    async withAdvisoryLock(key, fn) {
      for (;;) {
        const outcome = (await client.begin(async (tx) => {
          const [row] = await tx<{ locked: boolean }[]>`select pg_try_advisory_xact_lock(${key[0]}, ${key[1]}) as locked`;
          if (!row?.locked) return { locked: false };
          // The lock is held while this transaction stays open, idle, for as long as `fn` runs elsewhere.
          await tx`set local idle_in_transaction_session_timeout = 0`;
          return { locked: true, value: await fn() };
        })) as { locked: boolean; value?: unknown };
        if (outcome.locked) return outcome.value as Awaited<ReturnType<typeof fn>>;
        await new Promise((resolve) => setTimeout(resolve, LOCK_RETRY_MS * (0.5 + Math.random())));
      }
    },
    async close() {
      await Promise.all([client.end({ timeout: 5 }), listener !== undefined && listener !== client ? listener.end({ timeout: 5 }) : undefined]);
    },
  };
}

function openPglite(dataDir: string | undefined, purpose: string, env: NodeJS.ProcessEnv): Database {
  const { PGlite, version } = loadPglite(purpose);
  const loadDataDir = templateFor(dataDir, env, version);
  const options = loadDataDir === undefined ? {} : { loadDataDir };
  if (dataDir !== undefined) mkdirSync(dataDir, { recursive: true });
  const client = dataDir === undefined ? new PGlite(options) : new PGlite(dataDir, options);
  return wrapPglite(client, dataDir === undefined ? "embedded PGlite (in memory)" : `embedded PGlite at ${dataDir}`, true);
}

/** A PGlite client as a Database; `owned`: close() closes the client too. */
function wrapPglite(client: PgliteInstance, label: string, owned: boolean): Database {
  const statements = { count: 0 };
  const db = loadPglite("A PGlite database").drizzle(client, { logger: countingLogger(statements) });
  return {
    kind: "pglite",
    label,
    db,
    statements,
    withStatementTimeout: () => db,
    async listen(channel, onMessage) {
      const unsubscribe = await client.listen(channel, onMessage);
      return unsubscribe;
    },
    // PGlite is a single connection in a single process: there is nobody to race.
    async withAdvisoryLock(_key, fn) {
      return fn();
    },
    async close() {
      if (owned && !client.closed) await client.close();
    },
  };
}

/**
 * Opens the database a resolved setting names (an open Database is returned
 * as it is), or, without one, DATABASE_URL and then, unless NODE_ENV is
 * production, embedded PGlite in ./.cronledger.
 */
export function openDatabase(setting: ResolvedDatabaseSetting | undefined, env: NodeJS.ProcessEnv = process.env): Database {
  const url = env.DATABASE_URL;
  const resolved = setting ?? (url === undefined || url === "" ? undefined : resolveDatabaseSetting(url, "DATABASE_URL"));
  if (resolved === undefined) {
    // A production deploy that lost its DATABASE_URL would otherwise "work" on a private, empty database.
    if (env.NODE_ENV === "production") {
      throw new ConfigError(
        "No database configured and NODE_ENV is production: set DATABASE_URL, or `database` in createCronledger() / cronledger.config.ts. " +
          'cronledger does not fall back to the embedded PGlite database in production; to use it on purpose, set database to "pglite:./.cronledger".',
      );
    }
    return openPglite(resolve(DEFAULT_EMBEDDED_DIR), `No database is configured (no DATABASE_URL), so cronledger would use the embedded database in ./${DEFAULT_EMBEDDED_DIR}; it`, env);
  }
  switch (resolved.kind) {
    case "open":
      return resolved.database;
    case "app-pglite":
      return wrapPglite(resolved.client, "the application's PGlite database", false);
    case "embedded":
      return openPglite(resolved.dataDir, `The embedded database ${JSON.stringify(resolved.url)}`, env);
    case "postgres":
      return openPostgres(resolvePostgresSettings(resolved.setting, env));
  }
}

import postgres from "postgres";
import type { TestProject } from "vitest/node";
import { startPgBouncer } from "./pgbouncer.js";
import { canConnect, LOCAL_URL } from "./postgres-url.js";

declare module "vitest" {
  export interface ProvidedContext {
    postgresUrl: string;
    /** A PgBouncer in transaction mode in front of postgresUrl's server (see test/support/pgbouncer.ts). */
    pgbouncerUrl: string;
  }
}

let stopContainer: (() => Promise<void>) | undefined;

async function startContainer(): Promise<string | undefined> {
  try {
    const { PostgreSqlContainer } = await import("@testcontainers/postgresql");
    const container = await new PostgreSqlContainer("postgres:16-alpine").start();
    stopContainer = async () => {
      await container.stop();
    };
    return container.getConnectionUri();
  } catch {
    return undefined;
  }
}

async function resolvePostgresUrl(): Promise<string> {
  const fromEnv = process.env.TEST_DATABASE_URL;
  if (fromEnv) {
    if (await canConnect(fromEnv)) return fromEnv;
    throw new Error(`TEST_DATABASE_URL is set but cannot be reached (${new URL(fromEnv).host}). Start that server or unset the variable.`);
  }
  if (await canConnect(LOCAL_URL)) return LOCAL_URL;
  const containerUrl = await startContainer();
  if (containerUrl) return containerUrl;
  throw new Error(
    "cronledger's tests need PostgreSQL and none was found: set TEST_DATABASE_URL, start a server on 127.0.0.1:5432 " +
      "(`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`), or make Docker available for testcontainers.",
  );
}

/** Longer than any run: a test database this old was left by a run killed before its cleanup. */
const LEFTOVER_AGE_S = 3 * 3_600;

function createdAtSeconds(datname: string): number | undefined {
  const stamp = /_([0-9a-z]+)_[0-9a-f]{8}$/.exec(datname)?.[1];
  return stamp === undefined ? undefined : parseInt(stamp, 36);
}

/**
 * Drops databases left behind by test runs that were killed before their
 * cleanup. Only old ones: another run on the same server (a second checkout,
 * a helper) may be between two connections to a database it just created.
 */
async function dropLeftoverDatabases(url: string): Promise<void> {
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const rows = await admin<{ datname: string }[]>`select datname from pg_database where datname like 'cl\_test\_%'`;
    const nowS = Date.now() / 1000;
    for (const { datname } of rows) {
      const created = createdAtSeconds(datname);
      if (created !== undefined && nowS - created < LEFTOVER_AGE_S) continue;
      await admin.unsafe(`drop database if exists "${datname.replace(/"/g, '""')}" with (force)`);
    }
  } finally {
    await admin.end({ timeout: 1 });
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const url = await resolvePostgresUrl();
  await dropLeftoverDatabases(url);
  project.provide("postgresUrl", url);
  const pgbouncer = await startPgBouncer(url);
  project.provide("pgbouncerUrl", pgbouncer.url);
  return async () => {
    await pgbouncer.stop();
    await stopContainer?.();
  };
}

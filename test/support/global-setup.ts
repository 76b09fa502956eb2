import postgres from "postgres";
import type { TestProject } from "vitest/node";
import { canConnect, LOCAL_URL } from "./postgres-url.js";

declare module "vitest" {
  export interface ProvidedContext {
    postgresUrl: string;
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

/** Drops databases left behind by test runs that were killed before their cleanup. */
async function dropLeftoverDatabases(url: string): Promise<void> {
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const rows = await admin<{ datname: string }[]>`
      select datname from pg_database
      where datname like 'cl\_test\_%' and age(datfrozenxid) >= 0
        and not exists (select 1 from pg_stat_activity a where a.datname = pg_database.datname)`;
    for (const { datname } of rows) {
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
  return async () => {
    await stopContainer?.();
  };
}

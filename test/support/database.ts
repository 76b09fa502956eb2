import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { basename } from "node:path";
import postgres from "postgres";
import { afterAll, beforeAll, inject } from "vitest";
import { query, type Executor } from "../../src/db/executor.js";
import { withDatabase } from "./postgres-url.js";

/** The server the suite runs against (resolved once by the global setup). */
export function serverUrl(): string {
  return inject("postgresUrl");
}

/** The same database reached through the suite's PgBouncer (transaction pooling, see test/support/pgbouncer.ts). */
export function throughPgBouncer(url: string): string {
  const bouncer = new URL(inject("pgbouncerUrl"));
  const target = new URL(url);
  target.host = bouncer.host;
  return target.toString();
}

/**
 * Creates an empty database of its own for one test file (or one test), so
 * files run in parallel without seeing each other's rows.
 */
export async function createTestDatabase(label: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const server = serverUrl();
  const safeLabel = basename(label).replace(/\.test\.ts$/, "").replace(/[^a-z0-9]+/gi, "_").toLowerCase().slice(0, 30);
  // The creation second is part of the name, so the global setup can tell a leftover from a database another run is using.
  const name = `cl_test_${safeLabel}_${Math.floor(Date.now() / 1000).toString(36)}_${randomBytes(4).toString("hex")}`;
  const admin = postgres(server, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database "${name}"`);
  } finally {
    await admin.end({ timeout: 1 });
  }
  return {
    url: withDatabase(server, name),
    async drop() {
      const dropper = postgres(server, { max: 1, onnotice: () => {} });
      try {
        await dropper.unsafe(`drop database if exists "${name}" with (force)`);
      } finally {
        await dropper.end({ timeout: 1 });
      }
    },
  };
}

/**
 * A database of this file's own for the tests inside the calling describe
 * block: created before them, dropped after them. Read `url` inside tests.
 */
export function useTestDatabase(label: string): { readonly url: string } {
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined;
  beforeAll(async () => {
    database = await createTestDatabase(label);
  });
  afterAll(async () => {
    await database?.drop();
  });
  return {
    get url() {
      if (!database) throw new Error("useTestDatabase: the database exists only inside tests and hooks");
      return database.url;
    },
  };
}

/** How many sessions of the executor's database are in pg_sleep now: a statement a test made sleep has reached its sleep. */
export async function sleepingBackends(executor: Executor): Promise<number> {
  const [row] = await query<{ n: number }>(
    executor,
    sql`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event = 'PgSleep'`,
  );
  return row?.n ?? 0;
}

/**
 * Makes the claim of any job whose payload has the key `marker` sleep `seconds` inside its statement (a
 * trigger on the claim's update to running): a claim that is slow, or does not answer, on demand.
 */
export async function slowClaimsOf(executor: Executor, marker: string, seconds: number): Promise<void> {
  const name = `slow_claim_${marker.replace(/\W/g, "_")}`;
  await query(
    executor,
    sql.raw(`create function public.${name}() returns trigger language plpgsql as $$
        begin if new.status = 'running' and new.payload ? '${marker}' then perform pg_sleep(${seconds}); end if; return new; end $$;
      create trigger ${name} before update on cronledger.job_queue for each row execute function public.${name}()`),
  );
}

import { sql } from "drizzle-orm";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase, query, resolveDatabaseSetting, type Database, type DatabaseSetting } from "../src/db/connection.js";
import { diagnoseDatabaseError } from "../src/db/diagnose.js";
import { resolveTargets } from "../src/db/hosts.js";
import { ConfigError } from "../src/errors.js";
import { useTestDatabase } from "./support/database.js";
import { freePort } from "./support/ports.js";
import { withPort } from "./support/postgres-url.js";
import { startPrivateCluster, type PrivateCluster } from "./support/private-cluster.js";
import { until } from "./support/worker-processes.js";

/**
 * cronledger's own connections go through src/db/guarded-socket.ts: it picks
 * the host, does TLS, and keeps postgres.js 3.4 from carrying a dead
 * backend's state into the next statement. test/connection-faults.test.ts
 * covers terminations and cancels from a worker process; these are the
 * other paths, each on a real server.
 */

const withQuery = (url: string, parameters: string) => `${url}${url.includes("?") ? "&" : "?"}${parameters}`;

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the statement to fail");
}

function codeOf(error: unknown): string | undefined {
  for (let current: unknown = error, depth = 0; current && depth < 5; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string") return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

describe("the hosts and session target of a URL", () => {
  it("reads several hosts and target_session_attrs, and leaves the target out of what postgres.js sees", () => {
    const targets = resolveTargets("postgres://app:secret@db1:5432,db2:5433/app?sslmode=require&target_session_attrs=read-write&connect_timeout=5", {});
    expect(targets.endpoints).toEqual([
      { host: "db1", port: 5432 },
      { host: "db2", port: 5433 },
    ]);
    expect(targets.target).toBe("read-write");
    expect(targets.tls).toBe("require");
    expect(targets.driverUrl).toBe("postgres://app:secret@db1:5432,db2:5433/app?sslmode=require&connect_timeout=5");
    expect(resolveTargets("postgres://app@db1/app?target_session_attrs=primary", {}).driverUrl).toBe("postgres://app@db1/app");
    expect(resolveTargets("postgres://app@db1/app", { PGTARGETSESSIONATTRS: "read-write" }).target).toBe("read-write");
    expect(resolveTargets("postgres://app@db1/app", {}).target).toBe("any");
  });

  it("refuses a target that is a standby, naming what to write instead", () => {
    for (const target of ["standby", "read-only", "prefer-standby", "readwrite"]) {
      expect(() => resolveTargets(`postgres://app@db1,db2/app?target_session_attrs=${target}`, {})).toThrow(ConfigError);
    }
    expect(() => resolveTargets("postgres://app@db1,db2/app?target_session_attrs=standby", {})).toThrow(/needs the primary.*target_session_attrs=read-write/);
  });
});

describe("cronledger's own connections to the shared server", () => {
  const database = useTestDatabase("guarded-socket");
  const opened: Database[] = [];
  let admin: postgres.Sql;
  const open = (setting: DatabaseSetting) => {
    const db = openDatabase(resolveDatabaseSetting(setting), {});
    opened.push(db);
    return db;
  };

  beforeAll(() => {
    admin = postgres(database.url, { max: 1, onnotice: () => {} });
  });

  afterAll(async () => {
    await Promise.all(opened.map((db) => db.close()));
    await admin.end({ timeout: 1 });
  });

  it("hands the next statement its own rows after a terminated backend cut a result short", async () => {
    const db = open({ url: database.url, poolSize: 2 });
    await query(db.db, sql`select 1`);
    // Rows of 100 kB leave the server at once; the third sleeps, and its backend is terminated meanwhile.
    // Caught from the start: the rejection may come while the terminate below is still in flight.
    const cut = errorOf(query(db.db, sql`select n, repeat('x', 100000) as pad, case when n = 3 then pg_sleep(30) end as slept from generate_series(1, 5) as n`));
    await until("the long result is under way", async () => {
      const [row] = await admin<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where query like 'select n, repeat%' and wait_event = 'PgSleep'`;
      return row?.n === 1;
    });
    await admin`select pg_terminate_backend(pid) from pg_stat_activity where query like 'select n, repeat%' and wait_event = 'PgSleep'`;
    expect(codeOf(await cut)).toBe("57P01");
    // postgres.js 3.4 counted the two rows it had into the next result on that connection: [ <2 empty items>, { x: 1 } ].
    for (let i = 0; i < 4; i += 1) expect(await query<{ x: number }>(db.db, sql`select ${i}::int as x`)).toEqual([{ x: i }]);
  });

  it("hands the next statement its own rows after an error cut a result short (a cancel, a timeout, a division by zero)", async () => {
    const db = open({ url: database.url, poolSize: 2 });
    // Four rows go out, the fifth divides by zero: DataRow x4, then ErrorResponse, with no CommandComplete.
    expect(codeOf(await errorOf(query(db.db, sql`select 1 / (5 - n) as v from generate_series(1, 10) as n`)))).toBe("22012");
    // postgres.js 3.4 counted the four rows into the next result on that connection: [ <4 empty items>, { x: 0 } ].
    for (let i = 0; i < 3; i += 1) expect(await query<{ x: number }>(db.db, sql`select ${i}::int as x`)).toEqual([{ x: i }]);
  });

  it("hands a connection opened for a transaction to it (pooler mode reserves one per transaction)", async () => {
    const db = open({ url: database.url, pooler: "pgbouncer", poolSize: 2 });
    const inTransaction = db.db.transaction(async (tx) => query<{ x: number }>(tx, sql`select 1 as x`));
    const hung = new Promise((resolve) => setTimeout(resolve, 10_000, "hung")).then(() => "hung");
    expect(await Promise.race([inTransaction, hung])).toEqual([{ x: 1 }]);
  });

  it("does not keep a connection whose server answers read_only_sql_transaction (25006)", async () => {
    await admin`create table if not exists notes (n int)`;
    const name = new URL(database.url).pathname.slice(1);
    await admin.unsafe(`alter database "${name}" set default_transaction_read_only = on`);
    const db = open({ url: database.url, poolSize: 2 });
    const refused = await errorOf(query(db.db, sql`insert into notes values (1)`));
    expect(codeOf(refused)).toBe("25006");
    await admin.unsafe(`alter database "${name}" reset default_transaction_read_only`);
    // The sessions that answered 25006 are gone: the next write gets a new, writable one.
    await query(db.db, sql`insert into notes values (2)`);
    const [row] = await admin<{ n: number }[]>`select count(*)::int as n from notes`;
    expect(row?.n).toBe(1);
  });

  it("with target_session_attrs=read-write, refuses a read-only server at connect and names it", async () => {
    const name = new URL(database.url).pathname.slice(1);
    await admin.unsafe(`alter database "${name}" set default_transaction_read_only = on`);
    try {
      const db = open({ url: withQuery(database.url, "target_session_attrs=read-write"), poolSize: 2 });
      const refused = await errorOf(query(db.db, sql`select 1`));
      expect(codeOf(refused)).toBe("08001");
      expect(String((refused as { cause?: Error }).cause?.message ?? refused)).toMatch(/is read-only .*target_session_attrs=read-write/);
    } finally {
      await admin.unsafe(`alter database "${name}" reset default_transaction_read_only`);
    }
  });

  it("skips a host that refuses the connection, and sends a cancel to the server that runs the statement", async () => {
    const server = new URL(database.url);
    const dead = await freePort();
    const url = `postgres://${server.username}@127.0.0.1:${dead},${server.hostname}:${server.port}${server.pathname}`;
    const db = open({ url, poolSize: 2 });
    expect(db.label).toContain(`127.0.0.1:${dead},${server.hostname}:${server.port}`);
    expect(await query<{ x: number }>(db.db, sql`select 1 as x`)).toEqual([{ x: 1 }]);
    const started = Date.now();
    const cancelled = await errorOf(query(db.withStatementTimeout(300), sql`select pg_sleep(20)`));
    expect(codeOf(cancelled)).toBe("57014");
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe("TLS, negotiated by cronledger's socket", () => {
  let cluster: PrivateCluster;
  const opened: Database[] = [];

  beforeAll(async () => {
    cluster = await startPrivateCluster({ tls: true });
  });

  afterAll(async () => {
    await Promise.all(opened.map((db) => db.close()));
    await cluster?.destroy();
  });

  it("connects encrypted with sslmode=require and prefer, and fails verify-full against an unknown certificate as a TLS problem", async () => {
    for (const mode of ["require", "prefer"]) {
      const db = openDatabase(resolveDatabaseSetting(withQuery(cluster.url, `sslmode=${mode}`)), {});
      opened.push(db);
      expect(await query<{ ssl: boolean }>(db.db, sql`select ssl from pg_stat_ssl where pid = pg_backend_pid()`)).toEqual([{ ssl: true }]);
    }
    const strict = openDatabase(resolveDatabaseSetting(withQuery(withPort(cluster.url, cluster.port).replace("127.0.0.1", "localhost"), "sslmode=verify-full")), {});
    opened.push(strict);
    expect(diagnoseDatabaseError(await errorOf(query(strict.db, sql`select 1`)))?.problem).toBe("tls_failed");
  });
});

import { sql } from "drizzle-orm";
import postgres from "postgres";
import { describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { openDatabase, resolveDatabaseSetting, query } from "../src/db/connection.js";
import { availableMigrations } from "../src/db/migrate.js";
import { rootMessage } from "../src/db/transient.js";
import { defineJob, NonRetryableError } from "../src/index.js";
import { silentLogger } from "../src/log.js";
import { watch } from "./support/child.js";
import { serverUrl, throughPgBouncer, useTestDatabase } from "./support/database.js";
import { startPgBouncer } from "./support/pgbouncer.js";
import { until } from "./support/worker-processes.js";

const MIGRATE_FIXTURE = new URL("./fixtures/migrate-process.ts", import.meta.url).pathname;

describe("through PgBouncer in transaction mode", () => {
  const database = useTestDatabase(import.meta.url);
  const bounced = () => throughPgBouncer(database.url);

  /** Runs `body` with the server's view of this test's database, then closes it. */
  async function onServer<T>(body: (server: postgres.Sql) => Promise<T>): Promise<T> {
    const server = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      return await body(server);
    } finally {
      await server.end({ timeout: 1 });
    }
  }

  const listeningBackends = () =>
    onServer(async (server) => {
      const [row] = await server<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity where datname = current_database() and query ilike 'listen%'`;
      return row?.n ?? 0;
    });

  it("migrates once from 4 processes at once through a pool of 2 server connections, and leaves no lock or open transaction", async () => {
    // The smallest pool migrations can work with: one connection holds the lock's transaction, one applies.
    const small = await startPgBouncer(serverUrl(), { poolSize: 2 });
    try {
      const url = new URL(database.url);
      url.host = new URL(small.url).host;
      const outputs = await Promise.all(
        [1, 2, 3, 4].map(async () => {
          const finished = await watch(process.execPath, ["--import", "tsx", MIGRATE_FIXTURE], {
            env: { ...process.env, DATABASE_URL: url.toString(), POOLER: "pgbouncer" },
          }).exited;
          if (finished.code !== 0) throw new Error(`migrate process exited ${finished.code}: ${finished.stderr}`);
          return (JSON.parse(finished.stdout.trim()) as { applied: number }).applied;
        }),
      );
      expect(outputs.sort()).toEqual([0, 0, 0, availableMigrations()]);
      // Checked while PgBouncer still holds its server connections: a session lock left on one of them would show here.
      await onServer(async (server) => {
        const locks = await server`select 1 from pg_locks where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())`;
        expect(locks).toHaveLength(0);
        const idle = await server`select 1 from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'`;
        expect(idle).toHaveLength(0);
        const [journal] = await server<{ n: number }[]>`select count(*)::int as n from drizzle.__cronledger_migrations`;
        expect(journal?.n).toBe(availableMigrations());
      });
    } finally {
      await small.stop();
    }
  });

  it("enqueue, work, status, failures, retry, reap and prune work through it", async () => {
    const broken = defineJob({
      name: "bouncer.broken",
      retry: "maintenance",
      run: () => {
        throw new NonRetryableError("always fails");
      },
    });
    const fine = defineJob({ name: "bouncer.fine", run: () => {} });
    const ledger = createCronledger({ database: { url: bounced(), poolSize: 3, pooler: "pgbouncer" }, jobs: [broken, fine], logger: silentLogger });
    try {
      await ledger.migrate();
      const first = await ledger.enqueue(fine, undefined, { idempotencyKey: "once" });
      // The second enqueue with the key finds the first job in a statement of its own.
      expect(await ledger.enqueue(fine, undefined, { idempotencyKey: "once" })).toEqual({ ...first, created: false });
      await ledger.enqueue(broken);
      expect(await ledger.work({ once: true })).toMatchObject({ succeeded: 1, failed: 1 });
      const failures = await ledger.failures();
      expect(failures.failures.map((ticket) => ticket.jobType)).toEqual(["bouncer.broken"]);
      const retried = await ledger.retryJob(failures.failures[0]!.id);
      expect(retried.created).toBe(true);
      const status = await ledger.status();
      expect(status.queues.default).toEqual({ succeeded: 1, failed: 1, queued: 1 });
      expect(await ledger.reap()).toMatchObject({ requeued: 0, failed: 0 });
      // Thirty days on no worker is live, but this process defines the retried job, so it waits (never failed as
      // unregistered); the two finished rows are past their retention.
      expect(await ledger.prune({ now: new Date(Date.now() + 30 * 86_400_000) })).toEqual({ ledgerRows: 0, failedUnregistered: 0, jobRows: 2 });
    } finally {
      await ledger.close();
    }
  });

  /** Starts a worker, enqueues one job through PgBouncer once `ready()` holds, and waits for the job to start. */
  async function runOneJob(setting: { listenUrl?: string }, pollInterval: number | "1h", ready: () => Promise<boolean>): Promise<Cronledger> {
    let started!: () => void;
    const ran = new Promise<void>((resolve) => (started = resolve));
    const job = defineJob({ name: "bouncer.one", run: () => started() });
    const ledger = createCronledger({ database: { url: bounced(), poolSize: 2, pooler: "pgbouncer", ...setting }, jobs: [job], logger: silentLogger });
    await ledger.migrate();
    const working = ledger.work({ pollInterval });
    try {
      await until("the worker is ready", ready);
      await ledger.enqueue(job);
      await ran;
    } finally {
      await ledger.stop();
      await working;
    }
    return ledger;
  }

  it("a worker LISTENs on listenUrl, the server itself: a job enqueued through PgBouncer wakes it long before its poll", async () => {
    const ledger = await runOneJob({ listenUrl: database.url }, "1h", async () => (await listeningBackends()) === 1);
    await ledger.close();
    expect(ledger.database.label).toContain("through PgBouncer");
  });

  it("without listenUrl nothing LISTENs and workers find new jobs by polling", async () => {
    const ledger = await runOneJob({}, 50, async () => true);
    const listening = await listeningBackends();
    await ledger.close();
    expect(listening).toBe(0);
    expect(ledger.database.label).toContain("workers poll");
  });

  it("answers every statement when more run at once than the pool has connections, statuses included", async () => {
    // Statements with parameters behind ones without, on a pool of 2: pipelined, PgBouncer 1.18 dropped
    // the second's answer and the promise waited forever (src/db/reserved-begin.ts). Each round must end.
    const ledger = createCronledger({ database: { url: bounced(), poolSize: 2, pooler: "pgbouncer" }, logger: silentLogger, metrics: false });
    try {
      await ledger.migrate();
      const db = ledger.database.db;
      for (let round = 0; round < 30; round += 1) {
        const statements = Array.from({ length: 8 }, (_, index) =>
          index % 2 === 0 ? query<{ n: number }>(db, sql`select ${index}::int as n`) : query<{ n: number }>(db, sql`select 1::int as n`),
        );
        const answered = await Promise.race([
          Promise.all([...statements, ledger.status()]).then(() => true),
          new Promise<false>((resolve) => setTimeout(() => resolve(false), 10_000).unref()),
        ]);
        expect(answered, `round ${round}`).toBe(true);
      }
    } finally {
      await ledger.close();
    }
  });

  it("runs drizzle transactions through it: commit, rollback and a nested rollback to a savepoint", async () => {
    const ledger = createCronledger({ database: { url: bounced(), poolSize: 2, pooler: "pgbouncer" }, logger: silentLogger, metrics: false, chores: false });
    try {
      const db = ledger.database.db;
      await db.execute(sql`create table if not exists bouncer_tx (n int not null)`);
      await db.transaction(async (tx) => {
        await tx.execute(sql`insert into bouncer_tx values (1)`);
        await tx
          .transaction(async (inner) => {
            await inner.execute(sql`insert into bouncer_tx values (2)`);
            throw new Error("undo the inner one");
          })
          .catch(() => undefined);
        await tx.execute(sql`insert into bouncer_tx values (3)`);
      });
      await db
        .transaction(async (tx) => {
          await tx.execute(sql`insert into bouncer_tx values (4)`);
          throw new Error("undo all of it");
        })
        .catch(() => undefined);
      const rows = await query<{ n: number }>(db, sql`select n from bouncer_tx order by n`);
      expect(rows.map((row) => row.n)).toEqual([1, 3]);
      // Nothing left open on the server: every transaction ended and gave its connection back.
      await onServer(async (server) => {
        expect(await server`select 1 from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'`).toHaveLength(0);
      });
    } finally {
      await ledger.close();
    }
  });

  it("without pooler: \"pgbouncer\", connecting fails with a message naming the setting", async () => {
    const direct = openDatabase(resolveDatabaseSetting(bounced()), {});
    try {
      const error = await query(direct.db, sql`select 1`).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(rootMessage(error)).toMatch(/unsupported startup parameter: client_connection_check_interval.*pooler: "pgbouncer"/);
    } finally {
      await direct.close();
    }
  });
});

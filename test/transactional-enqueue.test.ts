import { PGlite } from "@electric-sql/pglite";
import { sql } from "drizzle-orm";
import { drizzle as drizzleNodePostgres } from "drizzle-orm/node-postgres";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { drizzle as drizzlePostgresJs } from "drizzle-orm/postgres-js";
import pg from "pg";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { templateFor } from "../src/db/pglite-template.js";
import { JOBS_CHANNEL } from "../src/db/sql/jobs.js";
import { InvalidArgumentError } from "../src/errors.js";
import { defineJob, type JobSchedule } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { createTestDatabase } from "./support/database.js";

type AppDb = PgDatabase<PgQueryResultHKT, Record<string, unknown>>;

/** What a handler saw, for the test to wait on. */
class Seen<T> {
  private readonly values: T[] = [];
  private readonly waiters: ((value: T) => void)[] = [];
  push(value: T): void {
    const waiter = this.waiters.shift();
    if (waiter) waiter(value);
    else this.values.push(value);
  }
  next(): Promise<T> {
    const value = this.values.shift();
    return value === undefined ? new Promise((resolve) => this.waiters.push(resolve)) : Promise.resolve(value);
  }
}

const reminders = new Seen<number>();
const followUps = new Seen<{ from: number }>();
const scheduled = new Seen<JobSchedule | null>();

const sendReminder = defineJob({
  name: "billing.send-reminder",
  payload: z.object({ invoiceId: z.number() }),
  run: ({ invoiceId }) => reminders.push(invoiceId),
});
const followUp = defineJob({ name: "billing.follow-up", payload: z.object({ from: z.number() }), run: (payload) => followUps.push(payload) });
const watchdog = defineJob({
  name: "billing.watchdog",
  payload: z.object({ invoiceId: z.number() }),
  async run({ invoiceId }, ctx) {
    scheduled.push(ctx.schedule);
    // The watchdog pattern: a job that enqueues the entity jobs it finds missing.
    await ctx.enqueue(followUp, { from: invoiceId }, { idempotencyKey: `follow-up-${invoiceId}` });
  },
});

interface Driver {
  readonly name: string;
  /** The application's drizzle database, and a cronledger over the same database. */
  open(): Promise<{ app: AppDb; ledger: Cronledger; close(): Promise<void> }>;
}

const postgresDriver = (name: string, makeApp: (url: string) => { app: AppDb; end(): Promise<void> }): Driver => ({
  name,
  async open() {
    const database = await createTestDatabase(`tx_enqueue_${name}`);
    const { app, end } = makeApp(database.url);
    const ledger = createCronledger({ database: { url: database.url, poolSize: 4 }, jobs: [sendReminder, followUp, watchdog], logger: silentLogger });
    return {
      app,
      ledger,
      async close() {
        await ledger.close();
        await end();
        await database.drop();
      },
    };
  },
});

const DRIVERS: readonly Driver[] = [
  postgresDriver("postgres-js", (url) => {
    const client = postgres(url, { max: 3, onnotice: () => {} });
    return { app: drizzlePostgresJs(client) as unknown as AppDb, end: () => client.end({ timeout: 5 }) };
  }),
  // An application that turned postgres.js's array-types query off (as cronledger does for its own pool): cronledger's
  // array parameters travel as array literals, so they need no array types from the driver.
  postgresDriver("postgres-js-no-fetch-types", (url) => {
    const client = postgres(url, { max: 3, onnotice: () => {}, fetch_types: false });
    return { app: drizzlePostgresJs(client) as unknown as AppDb, end: () => client.end({ timeout: 5 }) };
  }),
  postgresDriver("node-postgres", (url) => {
    const pool = new pg.Pool({ connectionString: url, max: 3 });
    return { app: drizzleNodePostgres(pool) as unknown as AppDb, end: () => pool.end() };
  }),
  {
    name: "pglite",
    async open() {
      // The application's own PGlite: cronledger shares it, so its tables sit beside the app's.
      // Started from the build's initdb template, as cronledger's own embedded database is: initdb in WebAssembly takes seconds.
      const template = templateFor(undefined);
      const client = new PGlite(template === undefined ? {} : { loadDataDir: template });
      const app = drizzlePglite(client) as unknown as AppDb;
      const ledger = createCronledger({ database: client, jobs: [sendReminder, followUp, watchdog], logger: silentLogger });
      return {
        app,
        ledger,
        async close() {
          await ledger.close();
          expect(client.closed).toBe(false);
          await client.close();
        },
      };
    },
  },
];

class Rollback extends Error {}

describe.each(DRIVERS)("enqueue inside the application's $name transaction", (driver) => {
  let app: AppDb;
  let ledger: Cronledger;
  let close: () => Promise<void>;
  /** Notifications on the jobs channel, as a worker would get them. */
  const notified: string[] = [];
  const sentinel = new Seen<string>();
  let unlisten: () => Promise<void>;

  beforeAll(async () => {
    ({ app, ledger, close } = await driver.open());
    await ledger.migrate();
    await app.execute(sql`create table invoices (id serial primary key, note text not null)`);
    unlisten = await ledger.database.listen(JOBS_CHANNEL, (queue) => {
      if (queue.startsWith("sentinel-")) sentinel.push(queue);
      else notified.push(queue);
    });
  });
  afterAll(async () => {
    await unlisten?.();
    await close?.();
  });

  const count = async (table: "invoices" | "jobs", where = sql`true`) => {
    const name = table === "jobs" ? sql`cronledger.jobs` : sql`invoices`;
    const [row] = await query<{ n: number }>(ledger.database.db, sql`select count(*)::int as n from ${name} where ${where}`);
    return row?.n ?? 0;
  };

  /** Every notification sent before this point has arrived: a sentinel sent after them arrives after them. */
  const flushNotifications = async (label: string) => {
    await app.execute(sql`select pg_notify(${JOBS_CHANNEL}, ${`sentinel-${label}`})`);
    expect(await sentinel.next()).toBe(`sentinel-${label}`);
  };

  it("rolls back with the business write: no job, and no worker woken", async () => {
    notified.length = 0;
    await expect(
      app.transaction(async (tx) => {
        await tx.execute(sql`insert into invoices (note) values ('rolled back')`);
        const job = await ledger.enqueue(sendReminder, { invoiceId: 1 }, { db: tx });
        expect(job.created).toBe(true);
        throw new Rollback("the business logic failed after the enqueue");
      }),
    ).rejects.toBeInstanceOf(Rollback);
    expect(await count("invoices")).toBe(0);
    expect(await count("jobs")).toBe(0);
    await flushNotifications("rollback");
    expect(notified).toEqual([]);
  });

  it("commits with the business write: exactly one job, which a running worker starts on its NOTIFY", async () => {
    notified.length = 0;
    // A poll far beyond the test's timeout: only the notification of the commit can wake this worker.
    const working = ledger.work({ pollInterval: "1h", concurrency: 2 });
    const invoiceId = await app.transaction(async (tx) => {
      const inserted = await tx.execute<{ id: number }>(sql`insert into invoices (note) values ('committed') returning id`);
      const id = (Array.isArray(inserted) ? inserted[0] : (inserted as unknown as { rows: { id: number }[] }).rows[0])!.id;
      await ledger.enqueue(sendReminder, { invoiceId: id }, { db: tx, idempotencyKey: `invoice-${id}` });
      return id;
    });
    expect(await reminders.next()).toBe(invoiceId);
    await ledger.stop();
    await working;
    expect(await count("invoices")).toBe(1);
    expect(await count("jobs", sql`job_name = 'billing.send-reminder' and status = 'succeeded'`)).toBe(1);
    await flushNotifications("commit");
    expect(notified).toEqual(["default"]);
  });

  it("keeps idempotency keys as outside a transaction, and enqueueMany takes the transaction too", async () => {
    const results = await app.transaction(async (tx) => {
      const first = await ledger.enqueue(sendReminder, { invoiceId: 7 }, { db: tx, idempotencyKey: "invoice-7" });
      const again = await ledger.enqueue(sendReminder, { invoiceId: 7 }, { db: tx, idempotencyKey: "invoice-7" });
      const many = await ledger.enqueueMany(
        [
          { job: sendReminder, payload: { invoiceId: 7 }, options: { idempotencyKey: "invoice-7" } },
          { job: sendReminder, payload: { invoiceId: 8 }, options: { idempotencyKey: "invoice-8" } },
        ],
        { db: tx },
      );
      return { first, again, many };
    });
    expect(results.again).toEqual({ id: results.first.id, jobName: "billing.send-reminder", created: false });
    expect(results.many[0]).toEqual({ id: results.first.id, jobName: "billing.send-reminder", created: false });
    expect(results.many[1]?.created).toBe(true);
    // Committed: outside any transaction the key holds as well.
    expect(await ledger.enqueue(sendReminder, { invoiceId: 7 }, { idempotencyKey: "invoice-7" })).toEqual({
      id: results.first.id,
      jobName: "billing.send-reminder",
      created: false,
    });
    await query(ledger.database.db, sql`truncate cronledger.job_queue, cronledger.job_history, cronledger.job_keys, cronledger.job_counts, cronledger.schedule_last_runs`);
  });

  it("refuses anything but a drizzle database or transaction as db, naming what it expects, and writes nothing", async () => {
    const raw = { query: () => undefined };
    await expect(ledger.enqueue(sendReminder, { invoiceId: 1 }, { db: raw as unknown as AppDb })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(ledger.enqueue(sendReminder, { invoiceId: 1 }, { db: raw as unknown as AppDb })).rejects.toThrow(
      /drizzle PostgreSQL database or transaction.*drizzle-orm\/node-postgres/,
    );
    await expect(ledger.enqueueMany([{ job: sendReminder, payload: { invoiceId: 1 } }], { db: "postgres://x" as unknown as AppDb })).rejects.toThrow(/got string/);
    expect(await count("jobs")).toBe(0);
  });

  it("gives a scheduled job's handler its entry and slot, and lets it enqueue follow-ups through ctx", async () => {
    const slot = new Date("2026-12-02T09:00:00.000Z");
    const scheduledLedger = createCronledger({
      database: ledger.database,
      jobs: [sendReminder, followUp, watchdog],
      schedule: [{ job: watchdog, cron: "0 9 * * *", key: "morning", payload: { invoiceId: 42 } }],
      logger: silentLogger,
    });
    await scheduledLedger.tick({ now: new Date(slot.getTime() - 60_000) });
    const report = await scheduledLedger.tick({ now: new Date(slot.getTime() + 1_000) });
    expect(report.enqueued).toHaveLength(1);
    const summary = await scheduledLedger.work({ once: true });
    expect(summary).toMatchObject({ succeeded: 2, failed: 0 });
    const seen = await scheduled.next();
    expect(seen).toEqual({ key: report.enqueued[0]!.key, identity: scheduledLedger.entries[0]!.identity, entryKey: "morning", slot, backfilled: false, trigger: null });
    expect(seen?.identity).toBe("billing.watchdog|morning|0 9 * * *|UTC");
    expect(await followUps.next()).toEqual({ from: 42 });
    await scheduledLedger.close();
  });
});

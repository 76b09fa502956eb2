import { PGlite } from "@electric-sql/pglite";
import { sql } from "drizzle-orm";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { MigrationRequiredError, TransactionOnOtherDatabaseError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { createTestDatabase } from "./support/database.js";

/**
 * An application passes `db: tx` from a transaction on its own database
 * while the ledger is on another one of the same server: cronledger's
 * tables are not where the transaction is. The error says so, whichever
 * write meets it first (the schema check read through the transaction, or
 * the write itself once the check had passed on the ledger's connection),
 * instead of saying cronledger's tables are missing from the ledger's
 * database; a real migration gap on the same database still says migrate.
 */
const notify = defineJob({ name: "orders.notify", payload: z.object({ orderId: z.number() }), run: () => undefined });

type Database = Awaited<ReturnType<typeof createTestDatabase>>;
let ledgerDatabase: Database;
let appDatabase: Database;
let appClient: ReturnType<typeof postgres>;
let app: ReturnType<typeof drizzle>;
const ledgers: Cronledger[] = [];

const nameOf = (url: string) => new URL(url).pathname.slice(1);

function openLedger(url = ledgerDatabase.url): Cronledger {
  const ledger = createCronledger({ database: { url, poolSize: 2 }, jobs: [notify], logger: silentLogger, metrics: false, chores: false });
  ledgers.push(ledger);
  return ledger;
}

/** Runs `write` in a transaction of the application's database that also inserts an order; the order must not survive a refused write. */
async function inAppTransaction(write: (tx: Parameters<Parameters<typeof app.transaction>[0]>[0]) => Promise<unknown>): Promise<unknown> {
  try {
    await app.transaction(async (tx) => {
      await tx.execute(sql`insert into orders (id) values (1)`);
      await write(tx);
    });
  } catch (error) {
    return error;
  }
  throw new Error("the write on another database was not refused");
}

beforeAll(async () => {
  ledgerDatabase = await createTestDatabase("tx_other_db_ledger");
  appDatabase = await createTestDatabase("tx_other_db_app");
  appClient = postgres(appDatabase.url, { max: 2, onnotice: () => {} });
  app = drizzle(appClient);
  await app.execute(sql`create table orders (id int primary key)`);
  await openLedger().migrate();
});

afterAll(async () => {
  for (const ledger of ledgers) await ledger.close();
  await appClient?.end({ timeout: 1 });
  await appDatabase?.drop();
  await ledgerDatabase?.drop();
});

async function orders(): Promise<number> {
  const [row] = await query<{ n: number }>(app, sql`select count(*)::int as n from orders`);
  return row?.n ?? -1;
}

describe("a db option on another database than the ledger's", () => {
  it("is named as such when the first write of the process is the enqueue in that transaction (the schema check reads through it)", async () => {
    const ledger = openLedger();
    const error = await inAppTransaction((tx) => ledger.enqueue(notify, { orderId: 1 }, { db: tx }));
    expect(error).toBeInstanceOf(TransactionOnOtherDatabaseError);
    expect(error).toMatchObject({
      code: "transaction_on_other_database",
      ledgerDatabase: nameOf(ledgerDatabase.url),
      transactionDatabase: nameOf(appDatabase.url),
    });
    const message = (error as Error).message;
    expect(message).toContain(`database "${nameOf(appDatabase.url)}"`);
    expect(message).toContain(nameOf(ledgerDatabase.url));
    expect(message).toMatch(/leave out `db`/);
    expect(message).not.toMatch(/tables do not exist|schema version/);
    expect(await orders()).toBe(0);
  });

  it("is named as such when the schema check had passed on the ledger's own connection and the write in the transaction fails", async () => {
    const ledger = openLedger();
    await ledger.enqueue(notify, { orderId: 0 });
    const error = await inAppTransaction((tx) => ledger.enqueueMany([{ job: notify, payload: { orderId: 2 } }], { db: tx }));
    expect(error).toBeInstanceOf(TransactionOnOtherDatabaseError);
    // The failed insert aborted the transaction, which answers nothing more: the ledger's database is named, the other is not.
    expect(error).toMatchObject({ code: "transaction_on_other_database", ledgerDatabase: nameOf(ledgerDatabase.url), transactionDatabase: null });
    expect((error as Error).message).toContain("on another database, not on the ledger's database");
    expect(await orders()).toBe(0);

    // The application's database itself (no transaction) can still be asked where it is.
    await expect(ledger.enqueue(notify, { orderId: 3 }, { db: app })).rejects.toMatchObject({
      code: "transaction_on_other_database",
      transactionDatabase: nameOf(appDatabase.url),
    });
  });

  it("is named as such for a dynamic schedule entry written in that transaction", async () => {
    const ledger = openLedger();
    await ledger.enqueue(notify, { orderId: 0 });
    const error = await inAppTransaction((tx) => ledger.schedules.upsert({ key: "tenant-1", job: notify, cron: "0 * * * *", payload: { orderId: 4 } }, { db: tx }));
    expect(error).toMatchObject({ code: "transaction_on_other_database" });
  });

  it("still writes in a transaction on the ledger's database, and still says migrate when that database lacks the tables", async () => {
    const ledger = openLedger();
    const same = drizzle(postgres(ledgerDatabase.url, { max: 1, onnotice: () => {} }));
    try {
      const job = await same.transaction((tx) => ledger.enqueue(notify, { orderId: 5 }, { db: tx }));
      expect(job.created).toBe(true);
    } finally {
      await same.$client.end({ timeout: 1 });
    }

    // A ledger on the application's (unmigrated) database, given a transaction there: the tables really are missing.
    const unmigrated = openLedger(appDatabase.url);
    const error = await inAppTransaction((tx) => unmigrated.enqueue(notify, { orderId: 6 }, { db: tx }));
    expect(error).toBeInstanceOf(MigrationRequiredError);
  });

  it("on an embedded ledger (one transaction at a time) still says migrate, without asking the ledger beside the open transaction", async () => {
    const pglite = new PGlite();
    const embedded = createCronledger({ database: pglite, jobs: [notify], logger: silentLogger, metrics: false, chores: false });
    try {
      const local = drizzlePglite(pglite);
      const refused = await local
        .transaction((tx) => embedded.enqueue(notify, { orderId: 7 }, { db: tx }))
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      expect(refused).toBeInstanceOf(MigrationRequiredError);
    } finally {
      await embedded.close();
      await pglite.close();
    }
  });
});

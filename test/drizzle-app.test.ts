import { fileURLToPath } from "node:url";
import { eq, sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
// Like the example itself, from the built package: the app's code and the test share one Cronledger type.
import { createCronledger, silentLogger } from "cronledger";
import config from "../examples/drizzle-app/cronledger.config.js";
import { cronledgerJobs, openAppDatabase } from "../examples/drizzle-app/src/db.js";
import { InvoiceNotDueError, invoicesWithReminderState, remindCustomer } from "../examples/drizzle-app/src/reminders.js";
import { invoices } from "../examples/drizzle-app/src/schema.js";
import { runCli, watch } from "./support/child.js";
import { useTestDatabase } from "./support/database.js";

const CONFIG = fileURLToPath(new URL("../examples/drizzle-app/cronledger.config.ts", import.meta.url));
const DRIZZLE_KIT = fileURLToPath(new URL("../node_modules/.bin/drizzle-kit", import.meta.url));

describe("examples/drizzle-app deploy flow", () => {
  const database = useTestDatabase(import.meta.url);

  it("CI: preflight passes without a database", async () => {
    const result = await runCli(["preflight", "--config", CONFIG], { env: { ...process.env, DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" } });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("preflight passed: 1 schedule entry");
  });

  it("deploy: cronledger's and the app's migrations keep separate journals, and the app queries both schemas", async () => {
    const env = { ...process.env, DATABASE_URL: database.url };
    const cronledgerMigrate = await runCli(["migrate", "--config", CONFIG], { env });
    expect(cronledgerMigrate.code).toBe(0);
    const appMigrate = await watch(DRIZZLE_KIT, ["migrate", "--config", "examples/drizzle-app/drizzle.config.ts"], { env }).exited;
    expect(appMigrate.stdout + appMigrate.stderr).not.toMatch(/error/i);
    expect(appMigrate.code).toBe(0);

    const app = openAppDatabase(database.url);
    const ledger = createCronledger({ ...config, database: database.url, logger: silentLogger });
    try {
      const journals = await app.db.execute<{ app: number; cronledger: number }>(
        sql`select (select count(*)::int from drizzle.__drizzle_migrations) as app, (select count(*)::int from drizzle.__cronledger_migrations) as cronledger`,
      );
      expect(journals[0]).toEqual({ app: 1, cronledger: expect.any(Number) });
      expect(journals[0]?.cronledger).toBeGreaterThan(0);

      const [invoice] = await app.db
        .insert(invoices)
        .values({ customerEmail: "ada@example.com", amountCents: 4200, dueAt: new Date("2026-11-30T00:00:00Z") })
        .returning();
      const first = await remindCustomer(app.db, ledger, invoice!.id, "2026-12-02");
      const again = await remindCustomer(app.db, ledger, invoice!.id, "2026-12-02");
      expect(again).toBe(first);
      expect(await invoicesWithReminderState(app.db)).toEqual([
        { invoiceId: invoice!.id, customerEmail: "ada@example.com", reminderStatus: "queued", reminderAttempts: 0, reminderError: null },
      ]);

      // A failure after the enqueue, inside the same transaction (the invoice is paid): neither the job nor the link remains.
      const [paid] = await app.db
        .insert(invoices)
        .values({ customerEmail: "grace@example.com", amountCents: 100, dueAt: new Date("2026-11-30T00:00:00Z"), paidAt: new Date("2026-12-01T00:00:00Z") })
        .returning();
      await expect(remindCustomer(app.db, ledger, paid!.id, "2026-12-02")).rejects.toBeInstanceOf(InvoiceNotDueError);
      const reminders = await app.db.select({ id: cronledgerJobs.id, payload: cronledgerJobs.payload }).from(cronledgerJobs);
      expect(reminders).toEqual([{ id: first, payload: { invoiceId: invoice!.id } }]);
      const [paidRow] = await app.db.select({ reminderJobId: invoices.reminderJobId }).from(invoices).where(eq(invoices.id, paid!.id));
      expect(paidRow).toEqual({ reminderJobId: null });

      // Once it ran, the job is in the history; the same join through the jobs view still finds it.
      expect(await ledger.work({ once: true })).toMatchObject({ succeeded: 1 });
      expect(await invoicesWithReminderState(app.db)).toEqual([
        { invoiceId: paid!.id, customerEmail: "grace@example.com", reminderStatus: null, reminderAttempts: null, reminderError: null },
        { invoiceId: invoice!.id, customerEmail: "ada@example.com", reminderStatus: "succeeded", reminderAttempts: 1, reminderError: null },
      ]);
    } finally {
      await ledger.close();
      await app.close();
    }
  });
});

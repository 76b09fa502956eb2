import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger } from "../src/cronledger.js";
import { DatabaseUnavailableError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { useTestDatabase } from "./support/database.js";
import { startCutProxy } from "./support/cut-proxy.js";
import { startFaultProxy, type FaultProxy } from "./support/fault-proxy.js";
import { withPort } from "./support/postgres-url.js";

// A server that is there but cancels or ends the schema check's one statement must not fail start(): the check is
// tried again (a fault soak lost a replica to one 57014 there). A server nobody answers for still fails it at once.
const job = defineJob({ name: "schema-retry.job", run: () => {} });

describe("the schema check on a server that cancels or ends its statement", () => {
  const database = useTestDatabase("schema-check-retry");
  let proxy: FaultProxy;

  beforeAll(async () => {
    const migrator = createCronledger({ database: database.url, logger: silentLogger, metrics: false });
    await migrator.migrate();
    await migrator.close();
    proxy = await startFaultProxy(database.url);
  });
  afterAll(async () => proxy?.close());

  it.each(["cancel", "terminate"] as const)("writes when the check's statement is hit by a %s (57014 / 57P01)", async (fault) => {
    const before = proxy.faults.length;
    const planned = proxy.planned();
    // The first statement of the first new connection: the catalog read of the schema check.
    proxy.arm((connection, statement) => (connection === planned + 1 && statement === 1 ? fault : undefined));
    const ledger = createCronledger({ database: { url: withPort(database.url, proxy.port), poolSize: 2 }, jobs: [job], chores: false, logger: silentLogger, metrics: false });
    try {
      // The check of start(), enqueue() and every entry point (src/db/schema-check.ts), before their first write.
      await ledger.enqueue(job);
      expect(proxy.faults.slice(before).map((record) => [record.fault, record.statements.some((text) => text.includes("pg_namespace"))])).toEqual([[fault, true]]);
    } finally {
      await ledger.close();
    }
  }, 30_000);
});

describe("the schema check through a link that stays cut", () => {
  const database = useTestDatabase("schema-check-cut");

  // A fault soak's replica started into 14 s of link cuts died of drizzle's raw "Failed query: select 'schema '..."
  // once the check's tries (about 7 s) ran out: start() must say the database is unavailable, with the cause.
  it("fails start() with DatabaseUnavailableError (server_unavailable) once its tries run out, never the raw statement", async () => {
    const migrator = createCronledger({ database: database.url, logger: silentLogger, metrics: false });
    await migrator.migrate();
    await migrator.close();
    const link = await startCutProxy(Number(new URL(database.url).port || 5432));
    link.cut();
    const ledger = createCronledger({ database: { url: withPort(database.url, link.port), poolSize: 2 }, jobs: [job], chores: false, logger: silentLogger, metrics: false });
    try {
      const error: unknown = await ledger.start().then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(error).toBeInstanceOf(DatabaseUnavailableError);
      expect((error as DatabaseUnavailableError).code).toBe("server_unavailable");
      expect((error as Error).message).toMatch(/schema check was cut short 5 times/);
      expect((error as Error).message).not.toMatch(/Failed query|pg_namespace/);
    } finally {
      await ledger.close();
      await link.close();
    }
  }, 60_000);
});

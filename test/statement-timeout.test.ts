import { sql } from "drizzle-orm";
import postgres from "postgres";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase, resolveDatabaseSetting, query, type Database } from "../src/db/connection.js";
import { useTestDatabase } from "./support/database.js";
import { until } from "./support/worker-processes.js";

// The scheduler's pass runs on db.withStatementTimeout(passTimeout) (src/db/statement-timeout.ts): each
// statement gets a timer that cancels it if it runs too long. The timer must neither keep an ended
// statement (its parameters, its rows) alive until it fires, nor lose a running one.
setFlagsFromString("--expose-gc");
const collectGarbage = runInNewContext("gc") as () => void;

function heapAfterCollection(): number {
  collectGarbage();
  collectGarbage();
  return process.memoryUsage().heapUsed;
}

describe("statements with a timeout", () => {
  const database = useTestDatabase(import.meta.url);
  let db: Database;
  let observer: postgres.Sql;

  beforeAll(() => {
    db = openDatabase(resolveDatabaseSetting({ url: database.url, poolSize: 2 }));
    observer = postgres(database.url, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await observer.end({ timeout: 1 });
    await db.close();
  });

  it("lets an ended statement's parameters go before its timeout fires", async () => {
    const timed = db.withStatementTimeout(10 * 60_000);
    await query(timed, sql`select 1`); // connects, so the connection is not counted below
    const before = heapAfterCollection();
    // Ten statements of 4 MB of parameters each, ended, their timers still 10 minutes away.
    for (let i = 0; i < 10; i += 1) {
      const big = String(i).repeat(4 * 1024 * 1024);
      const [row] = await query<{ n: number }>(timed, sql`select length(${big})::int as n`);
      expect(row?.n).toBe(big.length);
    }
    const grown = heapAfterCollection() - before;
    // Held until their timers fired, they were 40 MB; what is left is the connection's buffers.
    expect(grown).toBeLessThan(12 * 1024 * 1024);
  });

  it("still cancels a statement that runs too long when nothing but its connection holds it", async () => {
    const timed = db.withStatementTimeout(1_500);
    let outcome: unknown;
    // The caller keeps no reference: only the connection running it does.
    void query(timed, sql`select pg_sleep(30), 'timeout-probe'`).then(
      () => (outcome = "finished"),
      (error: unknown) => (outcome = error),
    );
    const running = async () => {
      const [row] = await observer<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
        where datname = current_database() and state = 'active' and query like '%timeout-probe%' and pid <> pg_backend_pid()`;
      return (row?.n ?? 0) > 0;
    };
    await until("the statement runs", running);
    collectGarbage();
    await until("the statement is cancelled", async () => !(await running()), 20_000);
    await until("its caller hears of it", () => outcome !== undefined, 5_000);
    expect(String((outcome as { cause?: { code?: string } }).cause?.code ?? (outcome as { code?: string }).code)).toBe("57014");
  });
});

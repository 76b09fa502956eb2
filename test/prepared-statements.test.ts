import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase, query, type Database } from "../src/db/connection.js";
import { migrateDatabase } from "../src/db/migrate.js";
import { claimJobs, completeJobs, insertJobs, type NewJobRow } from "../src/db/sql/jobs.js";
import { createTestDatabase, throughPgBouncer } from "./support/database.js";

const row: NewJobRow = {
  jobName: "prepared.noop",
  queue: "default",
  payloadJson: "{}",
  priority: 0,
  runAt: null,
  delayMs: 0,
  maxAttempts: 1,
  idempotencyKey: null,
  scheduleKey: null,
  scheduledFor: null,
  retryPolicyJson: null,
};

/** Enqueues, claims and finishes `rounds` times, one statement at a time, so each of the pool's connections runs them. */
async function drain(database: Database, rounds: number): Promise<void> {
  for (let round = 0; round < rounds; round += 1) {
    await insertJobs(database.db, [row, row]);
    const claimed = await claimJobs(database.db, { workerId: "w", queues: ["default"], jobNames: ["prepared.noop"], limit: 10 });
    await completeJobs(
      database.db,
      "w",
      claimed.map((job) => ({ id: job.id, status: "succeeded", outcome: null, error: null, delayMs: 0, returned: false })),
    );
  }
}

interface Prepared {
  statement: string;
  generic_plans: number;
  custom_plans: number;
}

/** The named statements of whichever pool connection answers, with how each was planned. */
async function preparedOnSomeConnection(database: Database): Promise<Prepared[]> {
  return query<Prepared>(
    database.db,
    sql`select statement, generic_plans::int as generic_plans, custom_plans::int as custom_plans from pg_prepared_statements where statement like '%cronledger%'`,
  );
}

describe("the hot path's statements on cronledger's own pool", () => {
  let database: { url: string; drop: () => Promise<void> };
  beforeAll(async () => {
    database = await createTestDatabase("prepared_statements");
    const setup = openDatabase({ url: database.url });
    await migrateDatabase(setup);
    await setup.close();
  });
  afterAll(() => database.drop());

  it("are named prepared statements, planned once generically, and the rest stay unnamed", async () => {
    const db = openDatabase({ url: database.url, poolSize: 2 });
    try {
      await drain(db, 8);
      // Whichever connection answers has run each of the three at least once (8 rounds over 2 connections).
      for (let check = 0; check < 4; check += 1) {
        const prepared = await preparedOnSomeConnection(db);
        const kinds = prepared.map((statement) =>
          /^\s*with\s+new_jobs/i.test(statement.statement) || /insert into "cronledger"."job_queue"/.test(statement.statement)
            ? "insert"
            : /^update "cronledger"."job_queue" as j\s+set "status" = 'running'/.test(statement.statement)
              ? "claim"
              : /delete from "cronledger"."job_queue"/.test(statement.statement)
                ? "completion"
                : "other",
        );
        expect(new Set(kinds)).toEqual(new Set(["insert", "claim", "completion"]));
        for (const statement of prepared) {
          expect(statement.custom_plans).toBe(0);
          expect(statement.generic_plans).toBeGreaterThan(0);
        }
      }
      const [mode] = await query<{ mode: string }>(db.db, sql`select current_setting('plan_cache_mode') as mode`);
      expect(mode?.mode).toBe("force_generic_plan");
    } finally {
      await db.close();
    }
  });

  it("are sent unnamed through PgBouncer, which cannot keep named statements in transaction mode", async () => {
    const db = openDatabase({ url: throughPgBouncer(database.url), pooler: "pgbouncer", listenUrl: database.url });
    try {
      await drain(db, 3);
      expect(await preparedOnSomeConnection(db)).toEqual([]);
      const [mode] = await query<{ mode: string }>(db.db, sql`select current_setting('plan_cache_mode') as mode`);
      expect(mode?.mode).toBe("auto");
    } finally {
      await db.close();
    }
  });
});

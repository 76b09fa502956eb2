import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase, resolveDatabaseSetting, query, type Database } from "../src/db/connection.js";
import { migrateDatabase } from "../src/db/migrate.js";
import { completeJobs } from "../src/db/sql/completions.js";
import { claimJobs, insertJobs, type NewJobRow } from "../src/db/sql/jobs.js";
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
      claimed.map((job) => ({ id: job.id, attempt: job.attempts, status: "succeeded", outcome: null, error: null, delayMs: 0, returned: false })),
    );
  }
}

/** Which of the hot path's statements a prepared statement's text is. */
function kindOf(text: string): string {
  if (/^\s*with\s+new_jobs/i.test(text)) return "insert";
  if (/^update "cronledger"."job_queue" as j\s+set "status" = 'running'/.test(text)) return "claim";
  if (/delete from "cronledger"."job_queue"/.test(text)) return "completion";
  return "other";
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
    sql`select statement, generic_plans::int as generic_plans, custom_plans::int as custom_plans from pg_prepared_statements where statement like '%cronledger%' and statement not like '%pg_prepared_statements%'`,
  );
}

describe("the hot path's statements on cronledger's own pool", () => {
  let database: { url: string; drop: () => Promise<void> };
  beforeAll(async () => {
    database = await createTestDatabase("prepared_statements");
    const setup = openDatabase(resolveDatabaseSetting({ url: database.url }));
    await migrateDatabase(setup);
    await setup.close();
  });
  afterAll(() => database.drop());

  it("are named prepared statements, the completion and the enqueue planned generically, and nothing else is named", async () => {
    const db = openDatabase(resolveDatabaseSetting({ url: database.url, poolSize: 2 }));
    try {
      await drain(db, 20);
      // Whichever connection answers has run each of the three several times (20 rounds over 2 connections).
      for (let check = 0; check < 4; check += 1) {
        const prepared = await preparedOnSomeConnection(db);
        const byKind = new Map(prepared.map((statement) => [kindOf(statement.statement), statement]));
        expect([...byKind.keys()].sort()).toEqual(["claim", "completion", "insert"]);
        expect(prepared).toHaveLength(3);
        // Past five executions PostgreSQL keeps a generic plan for these two: planned once, not per call.
        for (const kind of ["completion", "insert"]) {
          const statement = byKind.get(kind);
          expect(statement!.generic_plans + statement!.custom_plans).toBeGreaterThan(5);
          expect(statement!.generic_plans).toBeGreaterThan(0);
        }
      }
      // Not forced for the connection: unnamed statements with parameters (the scheduler's pass) keep custom plans.
      const [mode] = await query<{ mode: string }>(db.db, sql`select current_setting('plan_cache_mode') as mode`);
      expect(mode?.mode).toBe("auto");
    } finally {
      await db.close();
    }
  });

  it("are sent unnamed through PgBouncer, which cannot keep named statements in transaction mode", async () => {
    const db = openDatabase(resolveDatabaseSetting({ url: throughPgBouncer(database.url), pooler: "pgbouncer", listenUrl: database.url }));
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

import { fileURLToPath } from "node:url";
import { readMigrationFiles } from "drizzle-orm/migrator";
import postgres from "postgres";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createCronledger } from "../src/cronledger.js";
import { openDatabase, resolveDatabaseSetting } from "../src/db/connection.js";
import { availableMigrations, migrateDatabase, MIGRATIONS_FOLDER, MIGRATIONS_SCHEMA, MIGRATIONS_TABLE } from "../src/db/migrate.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { watch } from "./support/child.js";
import { useTestDatabase } from "./support/database.js";
import { cancelOld, claimOld, completeOld, enqueueOld } from "./fixtures/previous-release.js";

const PREVIOUS_RELEASE = fileURLToPath(new URL("./fixtures/previous-release.ts", import.meta.url));
/** The migrations the previous release shipped: its schema is theirs. */
const PREVIOUS_MIGRATIONS = 3;
const ENTRY_KEY = "default|report.daily||0 9 * * *|UTC";
const slotKey = (slot: Date) => `${ENTRY_KEY}@${slot.toISOString()}`;

/** A database as `cronledger migrate` of the previous release left it: its three migrations, recorded in cronledger's journal. */
async function migrateAsPreviousRelease(sql: postgres.Sql): Promise<void> {
  const migrations = readMigrationFiles({ migrationsFolder: MIGRATIONS_FOLDER }).slice(0, PREVIOUS_MIGRATIONS);
  await sql.begin(async (tx) => {
    for (const migration of migrations) for (const statement of migration.sql) if (statement.trim() !== "") await tx.unsafe(statement);
    await tx.unsafe(`create schema if not exists ${MIGRATIONS_SCHEMA}`);
    await tx.unsafe(`create table ${MIGRATIONS_SCHEMA}.${MIGRATIONS_TABLE} (id serial primary key, hash text not null, created_at bigint)`);
    for (const migration of migrations) {
      await tx.unsafe(`insert into ${MIGRATIONS_SCHEMA}.${MIGRATIONS_TABLE} (hash, created_at) values ($1, $2)`, [migration.hash, migration.folderMillis]);
    }
  });
}

type Row = Record<string, unknown> & { id: number; status: string };

/** Every job, every column, as JSON: the old table before the migration, the jobs view after. */
async function everyJob(sql: postgres.Sql): Promise<Map<number, Row>> {
  const rows = await sql<{ row: Row }[]>`select to_jsonb(j) as row from cronledger.jobs as j order by id`;
  return new Map(rows.map(({ row }) => [Number(row.id), { ...row, id: Number(row.id) }]));
}

describe("a database filled by the previous release, migrated while one of its workers runs jobs", () => {
  const database = useTestDatabase(import.meta.url);

  it("keeps every job (queued, running, retrying, finished, keyed, scheduled), and the new code finishes them", async () => {
    const sql = postgres(database.url, { max: 2, onnotice: () => {} });
    let oldWorker: ReturnType<typeof watch> | undefined;
    try {
      await migrateAsPreviousRelease(sql);

      // ---- what the previous release wrote
      const slots = [new Date("2026-11-30T09:00:00Z"), new Date("2026-12-01T09:00:00Z")];
      await sql`insert into cronledger.schedule_state (key, namespace, job_name, last_enqueued_slot) values (${ENTRY_KEY}, 'default', 'report.daily', ${slots[1]!})`;
      const [reportDone, reportQueued] = await enqueueOld(
        sql,
        slots.map((slot) => ({ jobName: "report.daily", scheduleKey: ENTRY_KEY, scheduledFor: slot, idempotencyKey: slotKey(slot), maxAttempts: 3 })),
      );
      const sends = await enqueueOld(sql, [
        { jobName: "mail.send", payload: { to: "ada@example.com" }, maxAttempts: 3 },
        { jobName: "mail.send", payload: { to: "grace@example.com", tags: ["vip", "ünïcode"] }, priority: -1, maxAttempts: 3 },
        { jobName: "mail.send", idempotencyKey: "welcome-1", maxAttempts: 5 },
        { jobName: "mail.send", delayMs: 3_600_000 },
        { jobName: "mail.send", retryPolicy: { maxAttempts: 2 }, maxAttempts: 2, queue: "bulk" },
      ]);
      const digests = await enqueueOld(sql, [
        { jobName: "mail.digest", maxAttempts: 5 },
        { jobName: "mail.digest", maxAttempts: 5 },
        { jobName: "mail.digest", idempotencyKey: "digest-7", maxAttempts: 1 },
        { jobName: "mail.digest", maxAttempts: 5 },
      ]);
      const [cancelled] = await enqueueOld(sql, [{ jobName: "mail.digest", idempotencyKey: "digest-cancelled" }]);
      await cancelOld(sql, cancelled!);
      // A worker of that release ran the digests and the first report: succeeded (one as `skip`), failed for good, failed and waiting for a retry.
      const filler = "previous-release:1:filler";
      const ran = await claimOld(sql, filler, "default", ["mail.digest", "report.daily"], 10);
      expect(ran.sort((a, b) => a - b)).toEqual([reportDone!, reportQueued!, ...digests].sort((a, b) => a - b));
      await completeOld(sql, filler, [
        { id: digests[0]!, status: "succeeded" },
        { id: digests[1]!, status: "succeeded", outcome: "skip" },
        { id: digests[2]!, status: "failed", error: "Error: downstream said no" },
        { id: digests[3]!, status: "queued", error: "Error: try again later", delayMs: 60_000 },
        { id: reportDone!, status: "succeeded" },
        { id: reportQueued!, status: "queued", delayMs: 0 },
      ]);
      // And one of its workers is running two sends when the migration comes.
      oldWorker = watch(process.execPath, ["--import", "tsx", PREVIOUS_RELEASE], {
        env: { ...process.env, DATABASE_URL: database.url, JOB_NAMES: "mail.send", CLAIM: "2", WORKER_ID: "previous-release:2:live" },
      });
      const claimed = (JSON.parse((/\{"claimed":.*\}/.exec(await oldWorker.waitFor(/"claimed"/, 30_000)) ?? ["{}"])[0]) as { claimed: number[] }).claimed;
      expect(claimed.sort((a, b) => a - b)).toEqual([sends[0]!, sends[1]!].sort((a, b) => a - b));
      await oldWorker.waitFor(/"beat":2/, 30_000);
      const before = await everyJob(sql);
      expect(before.size).toBe(12);
      expect([...before.values()].map((row) => row.status).sort()).toEqual(
        ["cancelled", "failed", "queued", "queued", "queued", "queued", "queued", "running", "running", "succeeded", "succeeded", "succeeded"].sort(),
      );

      // ---- the migration, with the old worker heartbeating
      const opened = openDatabase(resolveDatabaseSetting({ url: database.url, poolSize: 2 }));
      try {
        expect(await migrateDatabase(opened)).toEqual({ applied: availableMigrations() - PREVIOUS_MIGRATIONS, adopted: 0 });
      } finally {
        await opened.close();
      }

      // Every job, every column, as it was; the running ones still held by the old worker.
      const after = await everyJob(sql);
      expect([...after.keys()]).toEqual([...before.keys()]);
      for (const [id, old] of before) {
        const now = after.get(id)!;
        if (old.status === "running") {
          expect({ ...now, heartbeat_at: null }, `job ${id}`).toEqual({ ...old, heartbeat_at: null });
          expect(Date.parse(String(now.heartbeat_at))).toBeGreaterThanOrEqual(Date.parse(String(old.heartbeat_at)));
        } else {
          expect(now, `job ${id}`).toEqual(old);
        }
      }
      const placed = await sql<{ id: number; place: string }[]>`
        select id::float8 as id, 'queue' as place from cronledger.job_queue
        union all select id::float8, tableoid::regclass::text from cronledger.job_history order by id`;
      for (const { id, place } of placed) {
        const live = ["queued", "running"].includes(before.get(id)!.status);
        expect(place, `job ${id}`).toMatch(live ? /^queue$/ : /^cronledger\.job_history_legacy_\d{8}$/);
      }
      expect([...(await sql`select job_name, idempotency_key, job_id::float8 as id from cronledger.job_keys order by job_id`)]).toEqual(
        [...before.values()].filter((row) => row.idempotency_key !== null).map((row) => ({ job_name: row.job_name, idempotency_key: row.idempotency_key, id: row.id })),
      );
      expect([...(await sql`select id::float8 as id, status from cronledger.schedule_last_runs where schedule_key = ${ENTRY_KEY}`)]).toEqual([{ id: reportDone, status: "succeeded" }]);

      // The old worker's statements now fail (its table is a view): it writes nothing.
      await oldWorker.waitFor(/"failed":"55000"/, 30_000);
      oldWorker.child.kill("SIGKILL");
      await oldWorker.exited;

      // ---- the new code takes over
      const finished: number[] = [];
      const run = (payload: unknown, ctx: { jobId: number }) => void finished.push(ctx.jobId);
      const jobs = [
        defineJob({ name: "mail.send", payload: z.unknown(), queue: "default", run }),
        defineJob({ name: "mail.digest", payload: z.unknown(), run }),
        defineJob({ name: "report.daily", payload: z.unknown(), run }),
      ];
      const ledger = createCronledger({ database: { url: database.url, poolSize: 2 }, jobs, logger: silentLogger, chores: false });
      try {
        const totals = await ledger.status().then((status) => status.totals);
        expect(totals).toEqual({ queued: 5, held: 0, running: 2, succeeded: 3, failed: 1, cancelled: 1 });
        // Keys hold against finished jobs of the previous release too.
        expect(await ledger.enqueue("mail.digest", {}, { idempotencyKey: "digest-7" })).toEqual({ id: digests[2], jobName: "mail.digest", created: false });
        expect(await ledger.enqueue("mail.send", {}, { idempotencyKey: "welcome-1" })).toEqual({ id: sends[2], jobName: "mail.send", created: false });
        const fresh = await ledger.enqueue("mail.send", {});
        expect(fresh.id).toBeGreaterThan(Math.max(...before.keys()));
        // The old failure ticket is listed and can be retried.
        const failures = await ledger.failures();
        expect(failures.failures.map((failure) => failure.id)).toEqual([digests[2]]);
        const retried = await ledger.retryJob(digests[2]!);
        expect(retried.created).toBe(true);

        // The old worker's two jobs come back after its lease; everything then runs once more, on the new tables.
        const later = new Date(Date.now() + 2 * 3_600_000);
        expect(await ledger.reap({ now: later })).toEqual({ requeued: 2, failed: 0 });
        const summary = await ledger.work({ once: true, concurrency: 4, queues: ["default", "bulk"], clock: () => later });
        const live = [...before.values()].filter((row) => row.status === "queued" || row.status === "running").map((row) => row.id);
        expect(finished.sort((a, b) => a - b)).toEqual([...live, fresh.id, retried.id].sort((a, b) => a - b));
        expect(summary.succeeded).toBe(finished.length);
        const ends = await sql<{ status: string; n: number }[]>`select status, count(*)::int as n from cronledger.jobs group by 1 order by 1`;
        expect([...ends]).toEqual([
          { status: "cancelled", n: 1 },
          { status: "failed", n: 1 },
          { status: "succeeded", n: 12 },
        ]);
        const [reaped] = await sql<{ attempts: number }[]>`select attempts from cronledger.jobs where id = ${sends[0]!}`;
        expect(reaped?.attempts).toBe(2);

        // The previous release's history goes whole once all of it is past its retention: no row deleted one by one.
        const pruned = await ledger.prune({ now: new Date(Date.now() + 40 * 86_400_000) });
        expect(pruned.jobRows).toBe(14);
        expect([...(await sql`select count(*)::int as n from cronledger.jobs`)]).toEqual([{ n: 0 }]);
        expect([...(await sql`select count(*)::int as n from cronledger.job_keys`)]).toEqual([{ n: 0 }]);
        expect([...(await sql`select tablename from pg_tables where tablename like 'job_history_legacy%'`)]).toEqual([]);
      } finally {
        await ledger.close();
      }
    } finally {
      oldWorker?.child.kill("SIGKILL");
      await sql.end({ timeout: 1 });
    }
  }, 120_000);
});

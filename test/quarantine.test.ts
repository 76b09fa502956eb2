import type { ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { QUARANTINE_DEFERRAL_MS } from "../src/schedule/deferrals.js";
import { watch, type Watched } from "./support/child.js";
import { createTestDatabase } from "./support/database.js";
import { until } from "./support/worker-processes.js";

const FIXTURE = fileURLToPath(new URL("./fixtures/quarantine-process.ts", import.meta.url));
const STEP_MS = 10_000;
const REPLICAS = ["r1", "r2", "r3"];
/** The entry fires every minute: its first slot is due at step 6; every replica is restarted at step 15; the cause is fixed at step 20. */
const RESTART_AT = 15;
const REPAIR_AT = 20;
const STEPS = 26;

describe("a quarantine kept in the ledger row", () => {
  let database: { url: string; drop: () => Promise<void> };
  let observer: Cronledger;
  const children = new Set<ChildProcess>();
  const run = <T>(statement: ReturnType<typeof sql>) => query<T>(observer.database.db, statement);

  beforeAll(async () => {
    database = await createTestDatabase(import.meta.url);
    // The same schedule as the replicas; this process never ticks, it only looks.
    const broken = defineJob({ name: "q.broken", run: () => {} });
    observer = createCronledger({
      database: { url: database.url, poolSize: 2 },
      jobs: [broken],
      schedule: [{ job: broken, cron: "* * * * *" }],
      logger: silentLogger,
      metrics: false,
      chores: false,
    });
    await observer.migrate();
    await run(sql`create sequence attempts`);
    await run(
      sql.raw(`create function public.reject_broken() returns trigger language plpgsql as $$
        begin perform nextval('attempts'); raise exception 'reports backend is read-only, authorization: Bearer abc.def.ghi'; end $$;
        create trigger reject_broken before insert on cronledger.job_queue
        for each row when (new.job_name = 'q.broken') execute function public.reject_broken()`),
    );
    await run(sql`create table reports (replica text, generation int, step int, failed boolean, enqueued int, next_fire_ms float8)`);
    await run(sql`create table sim_clock (step int not null)`);
    await run(sql`insert into sim_clock values (-1)`);
    await run(sql`create table sim_progress (replica text primary key, step int not null)`);
  });

  afterAll(async () => {
    for (const child of children) child.kill("SIGKILL");
    await observer?.close();
    await database?.drop();
  });

  function spawnReplica(replica: string, generation: number, simStartMs: number): Watched {
    const watched = watch(process.execPath, ["--import", "tsx", FIXTURE], {
      env: {
        ...process.env,
        DATABASE_URL: database.url,
        REPLICA: replica,
        GENERATION: String(generation),
        SIM_START_MS: String(simStartMs),
        FIRST_STEP: String(generation === 0 ? 0 : RESTART_AT),
      },
    });
    children.add(watched.child);
    void watched.exited.finally(() => children.delete(watched.child));
    return watched;
  }


  const attempts = async () => (await run<{ n: number }>(sql`select case when is_called then last_value else 0 end::int as n from attempts`))[0]?.n ?? 0;
  const ledgerRow = async () =>
    (
      await run<{ until_ms: number | null; count: number; reason: string | null }>(
        sql`select (extract(epoch from quarantined_until) * 1000)::float8 as until_ms, quarantine_count as count, quarantine_reason as reason
            from cronledger.schedule_state where job_name = 'q.broken'`,
      )
    )[0];

  it("defers the entry to one instant for every replica, survives their restart, shows in a process that never ticked, and clears when it fires", async () => {
    const simStartMs = Math.ceil((Date.now() + 3_600_000) / 60_000) * 60_000;
    const nowAt = (step: number) => simStartMs + step * STEP_MS + 1_000;
    const spawnAll = async (generation: number) => {
      const spawned = REPLICAS.map((replica) => spawnReplica(replica, generation, simStartMs));
      await until("the replicas are ready", () => spawned.every((replica) => replica.output().includes("ready")), 60_000);
      return spawned;
    };
    let replicas = await spawnAll(0);
    const timeline: { step: number; attempts: number; untilMs: number | null; count: number }[] = [];
    let statusWhileBroken: Awaited<ReturnType<Cronledger["status"]>> | undefined;

    for (let step = 0; step < STEPS; step += 1) {
      if (step === RESTART_AT) {
        for (const replica of replicas) replica.child.kill("SIGKILL");
        await Promise.all(replicas.map((replica) => replica.exited));
        replicas = await spawnAll(1);
      }
      if (step === REPAIR_AT) {
        statusWhileBroken = await observer.status();
        await run(sql`drop trigger reject_broken on cronledger.job_queue`);
      }
      await run(sql`update sim_clock set step = ${step}`);
      await until(
        `every replica ticked step ${step}`,
        async () => (await run<{ n: number }>(sql`select count(*)::int as n from sim_progress where step >= ${step}`))[0]?.n === REPLICAS.length,
        60_000,
      );
      const row = await ledgerRow();
      timeline.push({ step, attempts: await attempts(), untilMs: row?.until_ms ?? null, count: row?.count ?? 0 });
    }

    // Attempts (statements that reached the insert) happen only where the deferral ran out: the first due step, then every minute.
    const attemptSteps = timeline.filter((point, index) => point.attempts > (timeline[index - 1]?.attempts ?? 0)).map((point) => point.step);
    process.stderr.write(
      `quarantine across ${REPLICAS.length} replicas: insert attempts per step ${JSON.stringify(attemptSteps.map((step) => [step, timeline[step]!.attempts - timeline[step - 1]!.attempts]))}\n`,
    );
    expect(attemptSteps).toEqual([6, 12, 18]);
    for (const step of attemptSteps) {
      const point = timeline[step]!;
      // The quarantine a round leaves: one minute from that round's instant, whichever replica failed first.
      expect(point.untilMs).toBe(nowAt(step) + QUARANTINE_DEFERRAL_MS);
      // Each round is bounded: a replica sends at most two statements for the entry (the one that skips
      // locked rows, then, if another replica's pass held the row, the one that waits for it), each
      // retried once on its own before the entry is quarantined: at most 4 attempts per replica.
      expect(point.attempts - timeline[step - 1]!.attempts).toBeLessThanOrEqual(4 * REPLICAS.length);
    }
    const reports = await run<{ replica: string; generation: number; step: number; failed: boolean; enqueued: number; next_fire_ms: number | null }>(
      sql`select replica, generation, step, failed, enqueued, next_fire_ms from reports order by step, replica`,
    );
    // Every replica, before and after the restart, waits for the ledger's instant: the same one for all of them.
    for (let step = 6; step < 24; step += 1) {
      const atStep = reports.filter((report) => report.step === step);
      expect(atStep.map((report) => report.replica).sort(), `step ${step}`).toEqual(REPLICAS);
      for (const report of atStep) expect(report.next_fire_ms, `${report.replica} at step ${step}`).toBe(timeline[step]!.untilMs);
    }
    // The restarted replicas' first passes (step 15: just started, no memory) attempted nothing: the ledger said wait.
    expect(reports.filter((report) => report.generation === 1 && report.step < 18 && report.failed)).toEqual([]);
    // The count is every failed attempt of every replica.
    const failures = reports.filter((report) => report.failed && report.step < REPAIR_AT).length;
    expect(failures).toBeGreaterThanOrEqual(attemptSteps.length);
    expect(timeline[REPAIR_AT - 1]!.count).toBe(failures);

    // A process that never ticked shows the entry as broken, with the ledger's instant, count and (redacted) reason.
    const entry = statusWhileBroken?.entries.find((candidate) => candidate.jobName === "q.broken");
    expect(entry?.quarantine).toMatchObject({ count: failures, until: new Date(timeline[REPAIR_AT - 1]!.untilMs!) });
    expect(entry?.quarantine?.reason).toContain("reports backend is read-only");
    expect(entry?.quarantine?.reason).not.toContain("abc.def.ghi");
    expect(entry?.problems.map((problem) => problem.code)).toEqual(["quarantined"]);
    expect(statusWhileBroken?.broken.map((broken) => broken.jobName)).toEqual(["q.broken"]);

    // Repaired: at the next deferred instant (step 24) the due slot fires once, and the quarantine is gone.
    const jobs = await run<{ slot_ms: number }>(sql`select (extract(epoch from scheduled_for) * 1000)::float8 as slot_ms from cronledger.jobs where job_name = 'q.broken'`);
    expect(jobs).toHaveLength(1);
    expect(reports.filter((report) => report.enqueued > 0).map((report) => report.step)).toEqual([24]);
    expect(timeline[24]).toMatchObject({ untilMs: null, count: 0 });
    const after = (await observer.status()).entries.find((candidate) => candidate.jobName === "q.broken");
    expect(after?.quarantine).toBeNull();
    expect(after?.problems).toEqual([]);
  }, 180_000);
});

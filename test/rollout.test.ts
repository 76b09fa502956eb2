import type { ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { silentLogger } from "../src/log.js";
import { parseCron } from "../src/schedule/cron.js";
import { entryIdentity, ledgerKey } from "../src/schedule/identity.js";
import { slotCalendar } from "../src/schedule/slot-calendar.js";
import { watch, type Watched } from "./support/child.js";
import { createTestDatabase } from "./support/database.js";
import { until } from "./support/worker-processes.js";

const FIXTURE = fileURLToPath(new URL("./fixtures/rollout-process.ts", import.meta.url));
const STEP_MS = 60_000;
const GRACE_MS = 5_000;
/** Steps run by A alone, then by A and B side by side; then A stops and B runs on. */
const B_STARTS = 60;
const A_STOPS = 160;
const MIN_STEPS = 240;
const MAX_STEPS = 2_000;

/** The entries of both versions (test/fixtures/rollout-process.ts): who has them, by key and cron. */
const ENTRIES = [
  { key: "a1", cron: "* * * * *", job: "rollout.common", versions: ["A", "B"] },
  { key: "a2", cron: "*/2 * * * *", job: "rollout.common", versions: ["A", "B"] },
  { key: "removed", cron: "* * * * *", job: "rollout.common", versions: ["A"] },
  { key: "retimed", cron: "*/3 * * * *", job: "rollout.common", versions: ["A"] },
  { key: "retimed", cron: "*/4 * * * *", job: "rollout.common", versions: ["B"] },
  { key: "b1", cron: "* * * * *", job: "rollout.new", versions: ["B"] },
  { key: "b2", cron: "*/2 * * * *", job: "rollout.common", versions: ["B"] },
] as const;

describe("a rolling deploy: two versions side by side, then the old one stops", () => {
  let database: { url: string; drop: () => Promise<void> };
  let ledger: Cronledger;
  const children = new Set<ChildProcess>();
  const run = <T>(statement: ReturnType<typeof sql>) => query<T>(ledger.database.db, statement);

  beforeAll(async () => {
    database = await createTestDatabase(import.meta.url);
    ledger = createCronledger({ database: { url: database.url, poolSize: 2 }, logger: silentLogger, metrics: false, chores: false });
    await ledger.migrate();
    await run(sql`create table runs (job_id bigint, version text, pid int)`);
    await run(sql`create table prunes (version text, table_name text, rows int, at timestamptz default clock_timestamp())`);
    await run(sql`create table sim_clock (step int not null)`);
    await run(sql`insert into sim_clock values (-1)`);
    await run(sql`create table sim_progress (version text primary key, step int not null)`);
  });

  afterAll(async () => {
    for (const child of children) child.kill("SIGKILL");
    await ledger?.close();
    await database?.drop();
  });

  function spawnVersion(version: "A" | "B", simStartMs: number): Watched {
    const watched = watch(process.execPath, ["--import", "tsx", FIXTURE], {
      env: { ...process.env, DATABASE_URL: database.url, VERSION: version, SIM_START_MS: String(simStartMs), GRACE_MS: String(GRACE_MS), FIRST_STEP: String(version === "A" ? 0 : B_STARTS) },
    });
    children.add(watched.child);
    void watched.exited.finally(() => children.delete(watched.child));
    return watched;
  }

  const progress = async (version: string) => (await run<{ step: number }>(sql`select step from sim_progress where version = ${version}`))[0]?.step ?? -1;
  const ledgerRowOf = async (key: string) =>
    (await run<{ updated_ms: number }>(sql`select (extract(epoch from updated_at) * 1000)::float8 as updated_ms from cronledger.schedule_state where key = ${key}`))[0];
  const dbNowMs = async () => (await run<{ ms: number }>(sql`select (extract(epoch from clock_timestamp()) * 1000)::float8 as ms`))[0]?.ms ?? 0;

  it("fires every slot of every entry some running version has exactly once, fails no job as unregistered, and prunes the removed entry only after the grace", async () => {
    // The simulated clock starts ahead of the real one, on a minute: the slots are minutes, the steps their middles.
    const simStartMs = Math.ceil((Date.now() + 3_600_000) / STEP_MS) * STEP_MS;
    const keyOf = (entry: (typeof ENTRIES)[number]) =>
      ledgerKey("default", entryIdentity({ jobName: entry.job, key: entry.key, canonicalCron: parseCron(entry.cron).canonical, timezone: "UTC" }));
    const a = spawnVersion("A", simStartMs);
    await until("A is ready", () => a.output().includes("ready"));
    let b: ReturnType<typeof spawnVersion> | undefined;
    const live = new Set<string>(["A"]);
    let aStoppedAt: number | undefined;
    let lastEvaluatedMs: number | undefined;
    /** The earliest last evaluation among A's retired rows (the removed and the retimed entry): no prune may come before it plus the grace. */
    let retiredEvaluatedMs: number | undefined;
    let removedSeenAt: number | undefined;
    let removedGoneAt: number | undefined;
    const removedKey = keyOf(ENTRIES[2]);
    const retimedOldKey = keyOf(ENTRIES[3]);

    let step = 0;
    for (; step < MAX_STEPS; step += 1) {
      if (step === B_STARTS) {
        b = spawnVersion("B", simStartMs);
        await until("B is ready", () => b!.output().includes("ready"));
        live.add("B");
      }
      if (step === A_STOPS) {
        a.child.kill("SIGTERM");
        await a.exited;
        live.delete("A");
        aStoppedAt = await dbNowMs();
        // A can no longer touch the removed entry: its row's last write and A's last schedule report are final.
        const row = await ledgerRowOf(removedKey);
        const [report] = await run<{ ms: number }>(
          sql`select (extract(epoch from max(reported_at)) * 1000)::float8 as ms from cronledger.schedule_versions where ${removedKey} = any(ledger_keys)`,
        );
        expect(row).toBeDefined();
        lastEvaluatedMs = Math.max(row?.updated_ms ?? 0, report?.ms ?? 0);
        const retimed = await ledgerRowOf(keyOf(ENTRIES[3]));
        retiredEvaluatedMs = Math.max(Math.min(row?.updated_ms ?? 0, retimed?.updated_ms ?? 0), report?.ms ?? 0);
      }
      await run(sql`update sim_clock set step = ${step}`);
      for (const version of live) await until(`${version} ticked step ${step}`, async () => (await progress(version)) >= step, 60_000);
      if (aStoppedAt !== undefined && removedGoneAt === undefined) {
        const now = await dbNowMs();
        if (await ledgerRowOf(removedKey)) removedSeenAt = now;
        else removedGoneAt = now;
      }
      if (step >= MIN_STEPS && removedGoneAt !== undefined && (await ledgerRowOf(retimedOldKey)) === undefined) break;
    }
    const lastStep = step;

    // B drains what is left (A's jobs and its own), then stops.
    await until(
      "every job ran",
      async () => (await run<{ n: number }>(sql`select count(*)::int as n from cronledger.jobs where status in ('queued', 'running')`))[0]?.n === 0,
      60_000,
    );
    b?.child.kill("SIGTERM");
    await b?.exited;

    // Expected: every slot after the step its row was created (the first step a version having it ticked)
    // up to the last step a version having it ticked.
    const firstStep = (versions: readonly string[]) => (versions.includes("A") ? 0 : B_STARTS);
    const lastStepOf = (versions: readonly string[]) => (versions.includes("B") ? lastStep : A_STOPS - 1);
    const stepNow = (index: number) => simStartMs + index * STEP_MS + 30_000;
    const expected = new Map<string, number[]>();
    for (const entry of ENTRIES) {
      const calendar = slotCalendar(entry.cron, {});
      const slots: number[] = [];
      for (let at = calendar.next(new Date(stepNow(firstStep(entry.versions)))); at && at.getTime() <= stepNow(lastStepOf(entry.versions)); at = calendar.next(at)) {
        slots.push(at.getTime());
      }
      expected.set(keyOf(entry), slots);
    }
    const jobs = await run<{ schedule_key: string; slot_ms: number; status: string; last_error: string | null; runs: number }>(
      sql`select j.schedule_key, (extract(epoch from j.scheduled_for) * 1000)::float8 as slot_ms, j.status, j.last_error,
            (select count(*)::int from runs r where r.job_id = j.id) as runs
          from cronledger.jobs j where j.job_name like 'rollout.%'`,
    );
    const fired = new Map<string, number[]>();
    for (const job of jobs) fired.set(job.schedule_key, [...(fired.get(job.schedule_key) ?? []), job.slot_ms]);
    let slotsExpected = 0;
    let duplicated = 0;
    let lost = 0;
    let unexpected = 0;
    for (const [key, slots] of expected) {
      const got = fired.get(key) ?? [];
      slotsExpected += slots.length;
      duplicated += got.length - new Set(got).size;
      lost += slots.filter((slot) => !got.includes(slot)).length;
      unexpected += got.filter((slot) => !slots.includes(slot)).length;
    }
    const counts = { slotsExpected, fired: jobs.length, duplicated, lost, unexpected };
    process.stderr.write(`rollout simulation: ${JSON.stringify({ ...counts, steps: lastStep + 1, aStoppedAt, removedGoneAfterMs: (removedGoneAt ?? 0) - (lastEvaluatedMs ?? 0) })}\n`);
    expect(slotsExpected).toBeGreaterThan(500);
    expect(counts).toEqual({ slotsExpected, fired: slotsExpected, duplicated: 0, lost: 0, unexpected: 0 });
    expect(new Set(jobs.map((job) => job.schedule_key))).toEqual(new Set(expected.keys()));

    // Every job ran, once, and none failed: A never claimed B's new job.
    expect(jobs.filter((job) => job.status !== "succeeded")).toEqual([]);
    expect(jobs.filter((job) => job.runs !== 1)).toEqual([]);
    const newJobRunners = await run<{ version: string }>(
      sql`select distinct r.version from runs r join cronledger.jobs j on j.id = r.job_id where j.job_name = 'rollout.new'`,
    );
    expect(newJobRunners).toEqual([{ version: "B" }]);
    expect(await run(sql`select 1 from cronledger.jobs where last_error like '%JobNotRegisteredError%'`)).toEqual([]);

    // The removed entry's row outlived A by the grace, and went soon after; only A's two retired rows went at all.
    expect(removedGoneAt).toBeDefined();
    expect(removedSeenAt).toBeDefined();
    expect(removedSeenAt!).toBeGreaterThanOrEqual(lastEvaluatedMs! + GRACE_MS - 1_000);
    expect(removedGoneAt! - lastEvaluatedMs!).toBeLessThan(GRACE_MS + 10_000);
    const pruned = await run<{ rows: number; at_ms: number }>(
      sql`select rows, (extract(epoch from at) * 1000)::float8 as at_ms from prunes where table_name = 'schedule_state'`,
    );
    expect(pruned.reduce((sum, row) => sum + row.rows, 0)).toBe(2);
    // Each retired row goes a grace after its own last evaluation, so none before the earliest of them plus the grace.
    for (const row of pruned) expect(row.at_ms).toBeGreaterThanOrEqual(retiredEvaluatedMs! + GRACE_MS);
  }, 300_000);
});

import type { ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import type { PlanDocument, PlanEntryDocument } from "../src/wire/plan.js";
import { runCli, watch, type Watched } from "./support/child.js";
import { createTestDatabase } from "./support/database.js";
import { until } from "./support/worker-processes.js";
import { EARLIER_ENTRIES, NEW_CHORES, scheduleWith } from "./fixtures/plan-acceptance-schedule.js";

const VERSION_PROCESS = fileURLToPath(new URL("./fixtures/plan-version.ts", import.meta.url));
const CONFIG = fileURLToPath(new URL("./fixtures/cli/plan-acceptance.config.ts", import.meta.url));
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/**
 * The acceptance of issue 18's deploy plan. An old version runs in its own
 * process (its worker and ticks on a simulated clock) against a ledger that
 * also holds two rows of an earlier version, hours behind. `cronledger plan`
 * (the real binary, another process) plans the new config at the switch;
 * then the old process stops, the new version starts as a process of its
 * own and runs the simulated clock on, and what happened is compared with
 * what the plan said: first fires, the doubled and the skipped run, the
 * overdue slot fired and the stale one skipped, the quarantine carried over,
 * the waiting jobs run by the new workers, the dropped job's jobs left
 * waiting, and exactly the retiring rows pruned, after the grace.
 */
describe("a deploy planned, then done: what happened is what the plan said", () => {
  let database: { url: string; drop: () => Promise<void> };
  let ledger: Cronledger;
  const children = new Set<ChildProcess>();
  const run = <T>(statement: ReturnType<typeof sql>) => query<T>(ledger.database.db, statement);

  beforeAll(async () => {
    database = await createTestDatabase("deploy_plan_acceptance");
    ledger = createCronledger({ database: { url: database.url, poolSize: 2 }, logger: silentLogger, metrics: false, chores: false });
    await ledger.migrate();
    await run(sql`create table sim_clock (now_ms float8 not null)`);
    await run(sql`insert into sim_clock values (-1)`);
    await run(sql`create table sim_progress (version text primary key, now_ms float8 not null)`);
  });

  afterAll(async () => {
    for (const child of children) child.kill("SIGKILL");
    await ledger?.close();
    await database?.drop();
  });

  function spawnVersion(version: "OLD" | "NEW", simStartMs: number): Watched {
    const watched = watch(process.execPath, ["--import", "tsx", VERSION_PROCESS], {
      env: { ...process.env, DATABASE_URL: database.url, VERSION: version, SIM_START_MS: String(simStartMs) },
    });
    children.add(watched.child);
    void watched.exited.finally(() => children.delete(watched.child));
    return watched;
  }

  /** Publishes a simulated instant and waits until `version` has ticked it. */
  async function tickAt(version: "OLD" | "NEW", nowMs: number): Promise<void> {
    await run(sql`update sim_clock set now_ms = ${nowMs}`);
    await until(`${version} ticked ${new Date(nowMs).toISOString()}`, async () => {
      const [row] = await run<{ now_ms: number }>(sql`select now_ms from sim_progress where version = ${version}`);
      return row?.now_ms === nowMs;
    }, 60_000);
  }

  const jobsOf = (key: string) =>
    run<{ slot: string; status: string; run_ms: number }>(
      sql`select to_char(scheduled_for at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as slot, status, (extract(epoch from run_at) * 1000)::float8 as run_ms
          from cronledger.jobs where schedule_key = ${key} order by scheduled_for`,
    );
  const rowExists = async (key: string) => (await run<{ n: number }>(sql`select count(*)::int as n from cronledger.schedule_state where key = ${key}`))[0]?.n === 1;

  it("fires, skips, carries and retires exactly as planned", { timeout: 240_000 }, async () => {
    // A simulated Monday ahead of the real clock; the switch at 09:14.
    const day = Math.ceil((Date.now() + 2 * 24 * HOUR) / (24 * HOUR)) * 24 * HOUR;
    const at = (hhmm: string) => day + Number(hhmm.slice(0, 2)) * HOUR + Number(hhmm.slice(3, 5)) * MINUTE;
    const iso = (ms: number) => new Date(ms).toISOString();
    const switchMs = at("09:14");

    // An earlier version last ran at 06:00: its two entries' rows are three hours behind.
    const earlierJobs = EARLIER_ENTRIES.map((entry) => defineJob({ name: entry.job, run: () => {} }));
    const earlier = createCronledger({
      database: { url: database.url, poolSize: 2 },
      jobs: earlierJobs,
      schedule: scheduleWith(EARLIER_ENTRIES, earlierJobs),
      logger: silentLogger,
      metrics: false,
      chores: false,
    });
    await earlier.tick({ now: new Date(at("06:00")) });
    await earlier.close();

    // The old version runs from 08:55 to the switch, a tick a minute.
    const old = spawnVersion("OLD", at("08:55"));
    await old.waitFor(/ready/, 60_000);
    for (let now = at("08:55"); now <= switchMs; now += MINUTE) await tickAt("OLD", now);
    // An operator paused one entry; another is quarantined until 09:40 (on the simulated clock every pass reads).
    await run(sql`update cronledger.schedule_state set paused_at = now(), paused_by = 'ops', paused_note = 'vendor change' where job_name = 'keep.paused'`);
    await run(sql`update cronledger.schedule_state set quarantined_until = ${iso(at("09:40"))}::timestamptz, quarantine_reason = 'flaky api', quarantine_count = 3, quarantined_since = ${iso(at("09:00"))}::timestamptz where job_name = 'keep.quarantined'`);

    // The plan, by the real binary, while the old version's worker runs.
    const planned = await runCli(["plan", "--config", CONFIG, "--at", iso(switchMs), "--json"], { env: { ...process.env, DATABASE_URL: database.url } });
    expect(planned.code, planned.stderr).toBe(3);
    const plan = JSON.parse(planned.stdout) as PlanDocument;
    const entry = (job: string) => plan.entries.find((item) => item.job === job) as PlanEntryDocument;
    expect(plan.live_workers).toBe(1);
    expect(plan.grace_ms).toBe(NEW_CHORES.ledgerGrace);

    // What the plan says, checked against the scenario by hand.
    expect(entry("retime.double")).toMatchObject({ kind: "retimed", first: { slot: iso(at("09:30")) }, switch: { verdict: "doubled", last_old: iso(at("09:00")) } });
    expect(entry("retime.skip")).toMatchObject({ kind: "retimed", first: { slot: iso(at("09:00") + 24 * HOUR) }, switch: { verdict: "skipped", last_old: iso(at("09:30") - 24 * HOUR) } });
    expect(entry("rekey.job")).toMatchObject({ kind: "rekeyed", first: { slot: iso(at("10:00")) }, switch: { verdict: "ok" } });
    expect(entry("keep.hourly")).toMatchObject({ kind: "unchanged", overdue: { slot: iso(at("09:00")), stale: false, passed_over: 2 }, first: { slot: iso(at("10:00")) } });
    expect(entry("keep.stale")).toMatchObject({ kind: "unchanged", overdue: { slot: iso(at("09:00")), stale: true, passed_over: 2 }, first: { slot: iso(at("10:00")) } });
    expect(entry("keep.quarantined")).toMatchObject({
      overdue: { slot: iso(at("09:40")), stale: false, passed_over: 2, handled_at: iso(at("09:40")) },
      row: { carried: { quarantine: { until: iso(at("09:40")), count: 3 } } },
      first: { slot: iso(at("09:50")) },
    });
    expect(entry("keep.paused").row?.carried.paused).toMatchObject({ by: "ops", note: "vendor change" });
    expect(entry("keep.unserved").row?.carried.waiting_for_worker).toBe(3);
    expect(entry("new.job")).toMatchObject({ kind: "added", served: false, first: { slot: iso(at("10:15")) } });
    expect(plan.removed.map((item) => item.row.job)).toEqual(["gone.job"]);
    expect(plan.dropped_job_names).toEqual([{ job: "gone.job", queued: 3, running: 0 }]);
    expect(plan.unserved_job_names).toEqual(["keep.hourly", "keep.stale", "new.job"]);

    // The deploy: the old version stops, the new one starts at the switch and runs to 10:20.
    const retiring = [...plan.removed.map((item) => item.row.key), ...plan.entries.filter((item) => item.kind === "retimed" || item.kind === "rekeyed").map((item) => item.row?.key ?? "")];
    const before = await run<{ key: string }>(sql`select key from cronledger.schedule_state order by key`);
    old.child.kill("SIGTERM");
    // start() stops gracefully (its worker's row stays, no longer live: a lease of 0), then re-raises the signal.
    expect((await old.exited).signal).toBe("SIGTERM");
    expect(await run(sql`select id from cronledger.workers where lease_ms > 0`)).toEqual([]);
    const stoppedAt = Date.now();
    const fresh = spawnVersion("NEW", switchMs);
    await fresh.waitFor(/ready/, 60_000);
    await tickAt("NEW", switchMs);
    // Within the grace: no row retired yet.
    for (const key of retiring) expect(await rowExists(key), key).toBe(true);
    for (let now = switchMs + MINUTE; now <= at("10:20"); now += MINUTE) await tickAt("NEW", now);

    // First fires, and what fired at once or was skipped, as planned.
    const keyOf = (job: string) => entry(job).identity && `default|${entry(job).identity}`;
    const slotsAfterSwitch = async (job: string) => (await jobsOf(keyOf(job) ?? "")).filter((job_) => job_.run_ms >= switchMs).map((job_) => job_.slot);
    expect(await slotsAfterSwitch("retime.double")).toEqual([iso(at("09:30"))]);
    const oldDouble = await jobsOf(entry("retime.double").row?.key ?? "");
    expect(oldDouble.map((job) => job.slot)).toEqual([iso(at("09:00"))]); // with 09:30: twice, as the plan warned
    expect(await slotsAfterSwitch("retime.skip")).toEqual([]); // nothing until tomorrow 09:00
    expect(await jobsOf(entry("retime.skip").row?.key ?? "")).toEqual([]); // and the old 09:30 never came
    expect(await slotsAfterSwitch("rekey.job")).toEqual([iso(at("10:00"))]);
    expect(await slotsAfterSwitch("keep.hourly")).toEqual([iso(at("09:00")), iso(at("10:00"))]);
    const hourly = await jobsOf(keyOf("keep.hourly") ?? "");
    expect(hourly[0]?.run_ms).toBe(switchMs); // the overdue 09:00, at the first tick
    expect(await slotsAfterSwitch("keep.stale")).toEqual([iso(at("10:00"))]); // 09:00 skipped as stale
    const [staleRow] = await run<{ slot: string }>(sql`select to_char(last_enqueued_slot at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as slot from cronledger.schedule_state where key = ${keyOf("keep.stale") ?? ""}`);
    expect(staleRow?.slot).toBe(iso(at("10:00")));
    expect(await slotsAfterSwitch("keep.quarantined")).toEqual([iso(at("09:40")), iso(at("09:50")), iso(at("10:00")), iso(at("10:10")), iso(at("10:20"))]);
    expect((await jobsOf(keyOf("keep.quarantined") ?? "")).find((job) => job.slot === iso(at("09:40")))?.run_ms).toBe(at("09:40"));
    expect(await slotsAfterSwitch("new.job")).toEqual([iso(at("10:15"))]);
    const [paused] = await run<{ by: string | null }>(sql`select paused_by as by from cronledger.schedule_state where job_name = 'keep.paused'`);
    expect(paused?.by).toBe("ops");

    // Waiting jobs: the new workers ran keep.unserved's; gone.job's still wait, no worker knowing the name.
    await until("the new workers ran the waiting jobs", async () =>
      (await run<{ n: number }>(sql`select count(*)::int as n from cronledger.jobs where job_name in ('keep.unserved', 'new.job', 'keep.hourly') and status <> 'succeeded'`))[0]?.n === 0,
    60_000);
    const gone = await run<{ status: string; n: number }>(sql`select status, count(*)::int as n from cronledger.jobs where job_name = 'gone.job' group by status`);
    expect(gone).toEqual([{ status: "queued", n: 3 }]);

    // Past the grace, the prune chore retires exactly the rows the plan said would retire.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, stoppedAt + NEW_CHORES.ledgerGrace + 1_000 - Date.now())));
    let now = at("10:20");
    await until("the retiring rows are pruned", async () => {
      now += MINUTE;
      await tickAt("NEW", now);
      return (await Promise.all(retiring.map(rowExists))).every((exists) => !exists);
    }, 120_000);
    const after = await run<{ key: string }>(sql`select key from cronledger.schedule_state order by key`);
    const gonePruned = before.map((row) => row.key).filter((key) => !after.some((row) => row.key === key));
    expect(gonePruned.sort()).toEqual([...retiring].sort());

    fresh.child.kill("SIGTERM");
    await fresh.exited;
  });
});

import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { silentLogger } from "../src/log.js";
import { rollup, digest, audit, slotSchedule } from "./fixtures/slot-schedule.js";
import { createTestDatabase } from "./support/database.js";
import { startSlotReplica, type ReplicaTick, type SlotReplica } from "./support/slot-replicas.js";

const MINUTE = 60_000;
const T0 = Date.parse("2026-04-01T12:00:00.000Z");
const slot = (minute: number) => T0 + minute * MINUTE;

describe("a pause set through one replica's admin API, across replicas, restarts and a deploy", () => {
  let database: { url: string; drop: () => Promise<void> };
  let observer: Cronledger;
  const replicas = new Set<SlotReplica>();

  beforeAll(async () => {
    database = await createTestDatabase(import.meta.url);
    observer = createCronledger({
      database: { url: database.url, poolSize: 2 },
      jobs: [rollup, digest, audit],
      schedule: slotSchedule(1),
      logger: silentLogger,
      metrics: false,
      chores: false,
    });
    await observer.migrate();
  });

  afterAll(async () => {
    for (const replica of replicas) replica.child.kill("SIGKILL");
    await observer?.close();
    await database?.drop();
  });

  const start = async (version: number, admin = false) => {
    const replica = await startSlotReplica({ databaseUrl: database.url, version, admin });
    replicas.add(replica);
    return replica;
  };
  const stopAll = async (group: SlotReplica[]) => {
    await Promise.all(group.map((replica) => replica.exit()));
    for (const replica of group) replicas.delete(replica);
  };
  /** Every replica ticks the same instant at the same time; the slots of each job, summed over them. */
  const tickAll = async (group: SlotReplica[], ms: number) => {
    const reports = await Promise.all(group.map((replica) => replica.send<ReplicaTick>(`tick ${ms + 1_000}`)));
    const count = (job: string, pick: (report: ReplicaTick) => readonly string[]) => reports.flatMap(pick).filter((name) => name === job).length;
    return {
      enqueued: (job: string) => count(job, (report) => report.enqueued),
      skipped: (job: string) => count(job, (report) => report.skipped.filter((skip) => skip.reason === "paused").map((skip) => skip.job)),
    };
  };
  const post = async (url: string, path: string, body: Record<string, string>) => {
    const response = await fetch(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  it("stops the entry on every replica within one pass, keeps it paused through a restart and a deploy, and resumes with the next slot only", async () => {
    const first = [await start(1, true), await start(1), await start(1)];
    const adminUrl = first[0]?.adminUrl ?? "";
    await tickAll(first, slot(0));
    const fired = await tickAll(first, slot(1));
    expect([fired.enqueued(rollup.name), fired.enqueued(digest.name)]).toEqual([1, 1]);

    const paused = await post(adminUrl, "/admin/scheduler/entries/pause", { entry: "minutely", note: "reports DB failover", by: "oncall:alice" });
    expect(paused, JSON.stringify(paused.body)).toMatchObject({ status: 200 });
    expect(paused.body).toMatchObject({ job: rollup.name, paused: true, changed: true, paused_by: "oncall:alice", note: "reports DB failover" });
    const unknown = await post(adminUrl, "/admin/scheduler/entries/pause", { entry: "minutly" });
    expect(unknown.status).toBe(404);
    expect(JSON.stringify(unknown.body)).toContain('Did you mean \\"minutely\\"');

    // The next pass of every replica: the slot is recorded as skipped once, and nobody enqueues it.
    const whilePaused = await tickAll(first, slot(2));
    expect([whilePaused.enqueued(rollup.name), whilePaused.skipped(rollup.name), whilePaused.enqueued(digest.name)]).toEqual([0, 1, 1]);

    // Every replica restarts, as a deploy of a new version of the schedule (one more entry, the paused one unchanged).
    await stopAll(first);
    const second = [await start(2, true), await start(2), await start(2)];
    const afterDeploy = await tickAll(second, slot(3));
    expect([afterDeploy.enqueued(rollup.name), afterDeploy.skipped(rollup.name), afterDeploy.enqueued(digest.name)]).toEqual([0, 1, 1]);

    // The page of a replica of the new version shows the pause, its note and who.
    const page = await (await fetch(`${second[0]?.adminUrl ?? ""}/admin/scheduler`)).text();
    expect(page).toContain("paused by oncall:alice");
    expect(page).toContain("reports DB failover");

    // Resumed through another replica's API at 3:30; no pass runs in minute 4: the pass at 5:01 fires slot 5 alone.
    const resumed = await post(second[0]?.adminUrl ?? "", "/admin/scheduler/entries/resume", { entry: rollup.name });
    expect(resumed.body).toMatchObject({ paused: false, changed: true });
    const afterResume = await tickAll(second, slot(5));
    expect([afterResume.enqueued(rollup.name), afterResume.skipped(rollup.name)]).toEqual([1, 0]);
    await stopAll(second);

    const runs = await query<{ status: string; outcome: string | null; slot_ms: number }>(
      observer.database.db,
      sql`select status, outcome, (extract(epoch from scheduled_for) * 1000)::float8 as slot_ms from cronledger.jobs where job_name = ${rollup.name} order by scheduled_for`,
    );
    expect(runs).toEqual([
      { status: "queued", outcome: null, slot_ms: slot(1) },
      { status: "skipped", outcome: "paused", slot_ms: slot(2) },
      { status: "skipped", outcome: "paused", slot_ms: slot(3) },
      { status: "queued", outcome: null, slot_ms: slot(5) },
    ]);
  }, 240_000);
});

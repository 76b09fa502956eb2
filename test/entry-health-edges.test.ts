import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import { formatLogLine, silentLogger, type Logger } from "../src/log.js";
import { useTestDatabase } from "./support/database.js";

/**
 * Entry health where it said the wrong thing (src/status/health.ts,
 * src/status/model.ts): an entry firing every 3 s whose jobs no worker
 * claims, and an entry whose ledger row another session holds locked.
 */
const frequent = defineJob({ name: "edge.frequent", run: () => {} });
const held = defineJob({ name: "edge.held", run: () => {} });

describe("entry health at the edges", () => {
  const database = useTestDatabase(import.meta.url);
  const ledgers: Cronledger[] = [];
  let other: postgres.Sql;

  beforeAll(() => {
    other = postgres(database.url, { max: 1, onnotice: () => {} });
  });

  afterAll(async () => {
    for (const ledger of ledgers) await ledger.close();
    await other?.end({ timeout: 1 });
  });

  it("shows an every-3-seconds entry whose jobs no worker claims as waiting_for_worker within its tolerance, and counts it in the gauge", async () => {
    const ledger = createCronledger({
      database: { url: database.url, poolSize: 3 },
      jobs: [frequent],
      schedule: [{ job: frequent, cron: "*/3 * * * * *" }],
      logger: silentLogger,
      chores: false,
    });
    ledgers.push(ledger);
    await ledger.migrate();
    // 37 s in the past, so every job is ready by the database clock and the last pass is the real one's; no worker ever runs.
    const start = Math.floor((Date.now() - 37_000) / 3_000) * 3_000;
    const at = (ms: number) => new Date(start + ms);
    await ledger.tick({ now: at(0) });
    for (let ms = 3_000; ms <= 36_000; ms += 3_000) await ledger.tick({ now: at(ms) });
    const stateAt = async (ms: number) => (await ledger.status({ now: at(ms) })).entries[0]!;

    // Its newest job is always younger than the 30 s tolerance; the oldest has waited 9 s: not yet.
    expect((await stateAt(12_000)).state).not.toBe("waiting_for_worker");
    // 33 s after the first job became ready: within the tolerance (30 s) plus one slot.
    const waiting = await stateAt(36_000);
    expect(waiting.state).toBe("waiting_for_worker");
    expect(waiting.reason).toContain("12 of its job's jobs wait");
    expect(waiting.reason).toContain(`oldest ready since ${at(3_000).toISOString()}`);
    expect(waiting.reason).toContain("no worker has claimed it");

    // Scraped at the database clock, about 38 s after the first job became ready.
    const exposition = await ledger.metrics!.registry.metrics();
    expect(exposition).toMatch(/^cronledger_schedule_entries\{state="waiting_for_worker"\} 1$/m);
    expect(exposition).toMatch(/^cronledger_jobs_waiting_for_worker\{job_type="edge\.frequent"\} 12$/m);
  });

  it("shows an entry whose ledger row another session holds as locked, naming the key, and logs the key unredacted", async () => {
    const warnings: string[] = [];
    const logger: Logger = { ...silentLogger, warn: (message, fields) => warnings.push(formatLogLine(message, fields)) };
    const ledger = createCronledger({
      database: { url: database.url, poolSize: 3 },
      jobs: [held],
      schedule: [{ job: held, cron: "* * * * *", key: "nightly-export" }],
      logger,
      metrics: false,
      chores: false,
    });
    ledgers.push(ledger);
    const start = Math.floor(Date.now() / 60_000) * 60_000 - 10 * 60_000;
    const at = (ms: number) => new Date(start + ms);
    await ledger.tick({ now: at(0) });
    const key = ledger.entries[0]!.ledgerKey;

    // Unlocked and overdue: late, as before.
    expect((await ledger.status({ now: at(2 * 60_000) })).entries[0]).toMatchObject({ state: "late" });

    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let taken!: () => void;
    const holding = new Promise<void>((resolve) => (taken = resolve));
    const transaction = other.begin(async (tx) => {
      await tx`select 1 from cronledger.schedule_state where key = ${key} for update`;
      taken();
      await released;
    });
    await holding;
    try {
      const report = await ledger.tick({ now: at(2 * 60_000) });
      expect(report.locked.map((slot) => slot.key)).toEqual([key]);
      const entry = (await ledger.status({ now: at(2 * 60_000) })).entries[0]!;
      expect(entry.state).toBe("locked");
      expect(entry.reason).toContain(`its ledger row (key ${key}) is held locked by another session`);
      expect(entry.reason).not.toContain("no scheduler is ticking");
    } finally {
      release();
      await transaction;
    }
    const line = warnings.find((text) => text.includes("held locked by another session"));
    expect(line).toContain(`"ledgerKey":${JSON.stringify(key)}`);
    expect(line).not.toContain("[redacted]");

    // The lock gone, the entry fires and is ok.
    await ledger.tick({ now: at(2 * 60_000 + 5_000) });
    expect((await ledger.status({ now: at(2 * 60_000 + 5_000) })).entries[0]?.state).not.toMatch(/late|locked/);
  });
});

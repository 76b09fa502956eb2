import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../src/cli/main.js";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import type { NextDocument, UpcomingEntryDocument } from "../src/wire/upcoming.js";
import { createTestDatabase } from "./support/database.js";

const CONFIG = fileURLToPath(new URL("./fixtures/cli/next.config.ts", import.meta.url));
const MINUTE = 60_000;
// The same job name, keys, crons, zones and jitter as the fixture: the same identities, so the same jitter per slot.
const probe = defineJob({ name: "next.probe", run: () => {} });
const ENTRIES = {
  "berlin-0230": { cron: "30 2 * * *", timezone: "Europe/Berlin" },
  "ny-0230": { cron: "30 2 * * *", timezone: "America/New_York" },
  "ny-0100": { cron: "0 1 * * *", timezone: "America/New_York" },
  seconds: { cron: "*/20 * * * * *", timezone: "Europe/Berlin", jitter: "5s" },
  hourly: { cron: "0 * * * *", timezone: "Europe/Berlin", catchUpWindow: "10m" },
} as const;
type Key = keyof typeof ENTRIES;

async function runNext(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(["next", "--config", CONFIG, ...args], { cwd: process.cwd(), env: process.env, stdout: (text) => out.push(text), stderr: (text) => err.push(text) });
  return { code, stdout: out.join("\n"), stderr: err.join("\n") };
}

async function printed(key: Key, from: string, count: number): Promise<UpcomingEntryDocument> {
  const result = await runNext([key, "--from", from, "-n", String(count), "--json"]);
  expect(result.code, result.stderr).toBe(0);
  const document = JSON.parse(result.stdout) as NextDocument;
  expect(document).toMatchObject({ version: 1, from: new Date(from).toISOString() });
  expect(document.entries).toHaveLength(1);
  return document.entries[0] as UpcomingEntryDocument;
}

describe("cronledger next prints what the ticker fires", () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  const ledgers: Cronledger[] = [];
  beforeAll(async () => {
    database = await createTestDatabase("next_slots");
  });
  afterAll(async () => {
    await Promise.all(ledgers.map((ledger) => ledger.close()));
    await database.drop();
  });

  /**
   * Ticks the entry with an injected clock every `stepMs` from an hour before `from` (so its ledger row is
   * running, as in production, when `from` comes) to the last printed fire time, and returns the slots
   * fired after `from` with the tick that fired each.
   */
  async function ticked(key: Key, from: string, untilMs: number, stepMs: number): Promise<{ slot: string; runAt: number }[]> {
    const ledger = createCronledger({ database: { url: database.url, poolSize: 2 }, jobs: [probe], schedule: [{ job: probe, key, ...ENTRIES[key] }], logger: silentLogger });
    ledgers.push(ledger);
    await ledger.migrate();
    const fromMs = Date.parse(from);
    for (let now = fromMs - 60 * MINUTE; now <= untilMs + stepMs; now += stepMs) await ledger.tick({ now: new Date(now) });
    const entry = ledger.entries[0];
    const jobs = await query<{ slot_ms: number; run_ms: number }>(
      ledger.database.db,
      sql`select (extract(epoch from scheduled_for) * 1000)::float8 as slot_ms, (extract(epoch from run_at) * 1000)::float8 as run_ms
          from cronledger.jobs where schedule_key = ${entry?.ledgerKey ?? ""} and run_at > ${new Date(fromMs).toISOString()}::timestamptz order by scheduled_for`,
    );
    return jobs.map((job) => ({ slot: new Date(job.slot_ms).toISOString(), runAt: job.run_ms }));
  }

  /** The printed slots are the fired ones, each fired by the first tick at or after its printed fire time. */
  async function expectSameAsTicker(key: Key, from: string, count: number, stepMs: number): Promise<UpcomingEntryDocument> {
    const document = await printed(key, from, count);
    expect(document.slots).toHaveLength(count);
    const lastFire = Date.parse(document.slots.at(-1)?.fires_at ?? "");
    const fired = await ticked(key, from, lastFire, stepMs);
    expect(fired.map((job) => job.slot)).toEqual(document.slots.map((slot) => slot.slot));
    const fromMs = Date.parse(from);
    document.slots.forEach((slot, index) => {
      const fireMs = Date.parse(slot.fires_at);
      expect(fired[index]?.runAt, slot.slot).toBe(fromMs + Math.ceil((fireMs - fromMs) / stepMs) * stepMs);
    });
    return document;
  }

  it("30 2 * * * in Europe/Berlin across the spring change: 02:30 does not exist, it fires at 03:30 CEST", async () => {
    const document = await expectSameAsTicker("berlin-0230", "2026-03-27T12:00:00Z", 4, 10 * MINUTE);
    expect(document.slots.map((slot) => slot.local)).toEqual([
      "2026-03-28T02:30:00+01:00",
      "2026-03-29T03:30:00+02:00",
      "2026-03-30T02:30:00+02:00",
      "2026-03-31T02:30:00+02:00",
    ]);
    expect(document.slots[1]?.notes).toEqual([
      { code: "shifted", message: "02:30 does not exist on 2026-03-29 in Europe/Berlin (clocks jump from 02:00 to 03:00): fires at 03:30+02:00 instead" },
    ]);
    expect(document.slots.filter((slot) => slot.notes.length > 0)).toHaveLength(1);
  });

  it("30 2 * * * in America/New_York across the spring change", async () => {
    const document = await expectSameAsTicker("ny-0230", "2026-03-07T12:00:00Z", 3, 10 * MINUTE);
    expect(document.slots.map((slot) => slot.slot)).toEqual(["2026-03-08T07:30:00.000Z", "2026-03-09T06:30:00.000Z", "2026-03-10T06:30:00.000Z"]);
    expect(document.slots[0]?.local).toBe("2026-03-08T03:30:00-04:00");
    expect(document.slots[0]?.notes[0]?.code).toBe("shifted");
    expect(document.slots[0]?.notes[0]?.message).toContain("02:30 does not exist on 2026-03-08 in America/New_York");
  });

  it("0 1 * * * in America/New_York across the autumn change: 01:00 happens twice and fires once, at the first", async () => {
    const document = await expectSameAsTicker("ny-0100", "2026-10-31T12:00:00Z", 3, 10 * MINUTE);
    expect(document.slots.map((slot) => slot.local)).toEqual(["2026-11-01T01:00:00-04:00", "2026-11-02T01:00:00-05:00", "2026-11-03T01:00:00-05:00"]);
    expect(document.slots[0]?.notes).toEqual([
      { code: "repeated_once", message: "01:00 happens twice on 2026-11-01 in America/New_York (-04:00, then -05:00): fires once, at the first (-04:00)" },
    ]);
  });

  it("a 6-field entry with jitter across the spring change: the jitter range, and each slot's own fire time", async () => {
    const document = await expectSameAsTicker("seconds", "2026-03-29T00:58:00Z", 12, 1_000);
    expect(document.notes.map((note) => note.code)).toEqual(["jitter"]);
    expect(document.notes[0]?.message).toContain("0 to 5s after it");
    for (const slot of document.slots) {
      const delay = Date.parse(slot.fires_at) - Date.parse(slot.slot);
      expect(delay).toBeGreaterThanOrEqual(0);
      expect(delay).toBeLessThanOrEqual(5_000);
    }
    // Real time does not jump: a slot every 20 s straight through 02:00 CET = 03:00 CEST.
    expect(document.slots.map((slot) => slot.slot)).toEqual(Array.from({ length: 12 }, (_, index) => new Date(Date.parse("2026-03-29T00:58:00Z") + index * 20_000).toISOString()));
    expect(document.slots.map((slot) => slot.local)).toContain("2026-03-29T03:00:00+02:00");
  });

  it("an hourly entry across the spring change, with a catch-up window shorter than its gap", async () => {
    const document = await expectSameAsTicker("hourly", "2026-03-28T23:30:00Z", 3, 10 * MINUTE);
    expect(document.slots.map((slot) => slot.local)).toEqual(["2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"]);
    expect(document.slots[1]?.notes.map((note) => note.code)).toEqual(["skipped_wall_times"]);
    expect(document.notes.map((note) => note.code)).toEqual(["catch_up_shorter_than_gap"]);
    expect(document.notes[0]?.message).toContain("(10m) is shorter than the gap between slots (1h)");
  });
});

describe("cronledger next as text and its arguments", () => {
  it("prints every entry with its zone, UTC and notes when no key is named", async () => {
    const result = await runNext(["--from", "2026-03-28T12:00:00Z", "-n", "2"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("next.probe [berlin-0230]  30 2 * * *  Europe/Berlin");
    expect(result.stdout).toContain("  2026-03-29T03:30:00+02:00  2026-03-29T01:30:00.000Z");
    expect(result.stdout).toContain("    02:30 does not exist on 2026-03-29 in Europe/Berlin");
    expect(result.stdout).toContain("note: each slot fires 0 to 5s after it");
    expect(result.stdout.match(/^next\.probe \[/gm)).toHaveLength(5);
  });

  it("names an unknown key with a did-you-mean, and a bad --from, as usage errors", async () => {
    const unknown = await runNext(["berlin-023"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('Did you mean "berlin-0230"?');
    const badFrom = await runNext(["--from", "tomorrow"]);
    expect(badFrom.code).toBe(2);
    expect(badFrom.stderr).toContain("--from must be an ISO 8601 instant");
  });
});

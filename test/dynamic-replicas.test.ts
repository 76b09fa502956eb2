import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useTestDatabase } from "./support/database.js";
import { startSlotReplica, type SlotReplica } from "./support/slot-replicas.js";

// Schedules as data across 3 separate OS processes (test/fixtures/dynamic-replica.ts), on a real PostgreSQL,
// each ticking with an injected clock in lock-step: exactly once per slot, rolled-back writes, retime and
// removal mid-run, and 300 tenants' fires across DST changes against a brute-force oracle.
const FIXTURE = new URL("./fixtures/dynamic-replica.ts", import.meta.url).pathname;
const T0 = Date.parse("2026-06-01T00:00:00.000Z");
const SECOND = 1_000;

interface Tick {
  readonly enqueued: [string, number][];
  readonly lostRace: number;
}

describe("schedules as data across 3 replicas", () => {
  const database = useTestDatabase(import.meta.url);
  let replicas: SlotReplica[] = [];
  let client: postgres.Sql;

  beforeAll(async () => {
    replicas = await Promise.all([0, 1, 2].map(() => startSlotReplica({ databaseUrl: database.url, fixture: FIXTURE })));
    client = postgres(database.url, { max: 1, onnotice: () => {} });
  }, 120_000);
  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.exit()));
    await client?.end({ timeout: 1 });
  });

  const tickAll = (ms: number) => Promise.all(replicas.map((replica) => replica.send<Tick>(`tick ${ms}`)));
  const slotsOf = async (key: string) =>
    (
      await client<{ slot: number; n: number }[]>`select extract(epoch from scheduled_for)::float8 * 1000 as slot, count(*)::int as n from cronledger.jobs
        where schedule_key = ${`default#dynamic|${key}`} group by scheduled_for order by scheduled_for`
    ).map((row) => [row.slot - T0, row.n]);

  it("a rolled-back upsert stores and fires nothing; a committed every-2-seconds entry fires each slot exactly once", async () => {
    const entry = [{ key: "tenant:1:sync", job: "tenant.sync", cron: "*/2 * * * * *" }];
    await replicas[0]!.send(`upsert-rollback ${T0} ${JSON.stringify(entry)}`);
    expect(await client`select key from cronledger.dynamic_schedules`).toEqual([]);
    for (let step = 1; step <= 4; step += 1) await tickAll(T0 + step * SECOND);
    expect(await client`select id from cronledger.jobs`).toEqual([]);
    expect(await replicas[1]!.send(`upsert ${T0 + 4_500} ${JSON.stringify(entry)}`)).toEqual([{ key: "tenant:1:sync", outcome: "created" }]);
    let reported = 0;
    for (let step = 5; step <= 24; step += 1) for (const tick of await tickAll(T0 + step * SECOND)) reported += tick.enqueued.length;
    const expected = Array.from({ length: 10 }, (_, index) => [(index + 3) * 2 * SECOND, 1]);
    expect(await slotsOf("tenant:1:sync")).toEqual(expected);
    expect(reported).toBe(10);
  }, 180_000);

  it("a retime and a removal while the replicas tick: no slot twice, none before the switch, none after the removal commits", async () => {
    const key = "tenant:2:sync";
    await replicas[0]!.send(`upsert ${T0 + 30_500} ${JSON.stringify([{ key, job: "tenant.sync", cron: "*/2 * * * * *" }])}`);
    for (let step = 31; step <= 50; step += 1) {
      const at = T0 + step * SECOND;
      const ticks = tickAll(at);
      // At 37 s, beside the ticks of that instant: every 3 seconds from now on. At 45 s: removed.
      const change =
        step === 37
          ? replicas[step % 3]!.send(`upsert ${at} ${JSON.stringify([{ key, job: "tenant.sync", cron: "*/3 * * * * *" }])}`)
          : step === 45
            ? replicas[step % 3]!.send(`remove ${key}`)
            : Promise.resolve(null);
      await Promise.all([ticks, change]);
    }
    const slots = await slotsOf(key);
    expect(slots.every(([, n]) => n === 1)).toBe(true);
    const fired = slots.map(([slot]) => slot! / SECOND);
    // Before the switch every 2 s (32..36), the switch's own instant never, then every 3 s; 45 only if its slot won the race with the removal.
    expect(fired.filter((s) => s !== 45)).toEqual([32, 34, 36, 39, 42]);
    expect(fired.every((s) => s <= 45)).toBe(true);
  }, 180_000);

  it("rolls back a removal: the entry keeps firing", async () => {
    const key = "tenant:3:sync";
    await replicas[2]!.send(`upsert ${T0 + 60_500} ${JSON.stringify([{ key, job: "tenant.sync", cron: "*/2 * * * * *" }])}`);
    expect(await replicas[1]!.send(`remove-rollback ${key}`)).toBe(true);
    for (let step = 61; step <= 64; step += 1) await tickAll(T0 + step * SECOND);
    expect(await slotsOf(key)).toEqual([
      [62 * SECOND, 1],
      [64 * SECOND, 1],
    ]);
  }, 120_000);

  it("300 tenants across four zones, driven across DST changes, fire exactly what a brute-force oracle says, none twice", async () => {
    const zones = ["America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata"];
    const crons = ["*/30 * * * *", "0 * * * *", "30 2 * * *", "15 2 * * *", "45 1 * * *"];
    const entries = Array.from({ length: 300 }, (_, index) => ({
      key: `dst:${index}`,
      job: "tenant.sync",
      cron: crons[index % crons.length]!,
      timezone: zones[Math.floor(index / crons.length) % zones.length]!,
      catchUpWindow: "2m",
    }));
    // New York springs forward, Berlin springs forward, Lord Howe falls back half an hour: a day around each.
    const windows = [
      ["2027-03-13T19:00:00Z", "2027-03-14T19:00:00Z"],
      ["2027-03-27T13:00:00Z", "2027-03-28T13:00:00Z"],
      ["2027-04-03T03:00:00Z", "2027-04-04T03:00:00Z"],
    ].map(([from, to]) => [Date.parse(from!), Date.parse(to!)] as const);
    await replicas[0]!.send(`upsert ${windows[0]![0] - 3_600_000} ${JSON.stringify(entries)}`);
    for (const [from, to] of windows) for (let at = from; at <= to; at += 15 * 60_000) await tickAll(at);
    const fired = await client<{ key: string; slot: number; n: number }[]>`
      select substr(schedule_key, length('default#dynamic|') + 1) as key, extract(epoch from scheduled_for)::float8 * 1000 as slot, count(*)::int as n
      from cronledger.jobs where schedule_key like 'default#dynamic|dst:%' group by 1, 2`;
    expect(fired.filter((row) => row.n !== 1)).toEqual([]);
    const actual = fired.map((row) => `${row.key}@${new Date(row.slot).toISOString()}`).sort();
    const expected = entries.flatMap((entry) => windows.flatMap(([from, to]) => oracle(entry.cron, entry.timezone, from, to).map((ms) => `${entry.key}@${new Date(ms).toISOString()}`))).sort();
    expect(actual.length).toBeGreaterThan(3_000);
    expect(actual).toEqual(expected);
  }, 600_000);

  it("leaves the storage of stored rows consistent: no ledger row without its entry", async () => {
    const orphans = await client`select key from cronledger.schedule_state where namespace = ${"default#dynamic"}
      and substr(key, length('default#dynamic|') + 1) not in (select key from cronledger.dynamic_schedules)`;
    expect(orphans).toEqual([]);
  });
});

const MINUTE = 60_000;
const formats = new Map<string, Intl.DateTimeFormat>();
const locals = new Map<string, { date: string; hour: number; minute: number }>();

/** The wall clock of `zone` at a UTC minute, by Intl (independent of the library's civil-time code). */
function local(zone: string, ms: number): { date: string; hour: number; minute: number } {
  const cacheKey = `${zone}@${ms}`;
  const hit = locals.get(cacheKey);
  if (hit) return hit;
  let format = formats.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat("en-CA", { timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
    formats.set(zone, format);
  }
  const parts = Object.fromEntries(format.formatToParts(new Date(ms)).map((part) => [part.type, part.value]));
  const found = { date: `${parts.year}-${parts.month}-${parts.day}`, hour: Number(parts.hour), minute: Number(parts.minute) };
  locals.set(cacheKey, found);
  return found;
}

/**
 * The slots of a 5-field cron with one minute and a wildcard or single hour, in [from, to], by brute force
 * over every UTC minute. Wildcard hour: every instant whose wall clock matches (both of a repeated hour).
 * Fixed hour: the first instant of each local day whose wall clock is that time; on a day the time is
 * skipped by a spring-forward, the instant the clock jumps to it shifted by the gap (02:30 -> 03:30).
 */
function oracle(cron: string, zone: string, from: number, to: number): number[] {
  const [minuteField, hourField] = cron.split(" ");
  const minutes = minuteField!.startsWith("*/") ? new Set(Array.from({ length: 60 / Number(minuteField!.slice(2)) }, (_, i) => i * Number(minuteField!.slice(2)))) : new Set([Number(minuteField)]);
  const out: number[] = [];
  if (hourField === "*") {
    for (let ms = from; ms <= to; ms += MINUTE) if (minutes.has(local(zone, ms).minute)) out.push(ms);
    return out;
  }
  const hour = Number(hourField);
  const target = hour * 60 + [...minutes][0]!;
  const byDate = new Map<string, number>();
  for (let ms = from - 86_400_000; ms <= to + 86_400_000; ms += MINUTE) {
    const now = local(zone, ms);
    const wall = now.hour * 60 + now.minute;
    if (wall === target && !byDate.has(now.date)) byDate.set(now.date, ms);
    const next = local(zone, ms + MINUTE);
    const nextWall = next.hour * 60 + next.minute;
    // A gap: the wall clock jumps over the target within the day; the slot is the target at the offset before the jump.
    if (next.date === now.date && nextWall > wall + 1 && target > wall && target < nextWall && !byDate.has(now.date)) {
      byDate.set(now.date, ms + (target - wall) * MINUTE);
    }
  }
  for (const ms of byDate.values()) if (ms >= from && ms <= to) out.push(ms);
  return out.sort((a, b) => a - b);
}

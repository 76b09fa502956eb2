import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seededRandom } from "../bench/soak/plan.js";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { dynamicIdentity, dynamicLedgerNamespace } from "../src/schedule/dynamic-entry.js";
import { slotIdempotencyKey } from "../src/schedule/identity.js";
import { MIN_CATCH_UP_WINDOW_MS } from "../src/schedule/validate.js";
import { DYNAMIC_LEASE_MS } from "../src/schedule/tick.js";
import { createTestDatabase } from "./support/database.js";
import { startSlotReplica, type SlotReplica } from "./support/slot-replicas.js";

/**
 * Dynamic entries fired by the take (src/db/sql/dynamic-fire.ts, fireDue) while replica processes are SIGKILLed
 * mid-pass. Three OS processes (test/fixtures/dynamic-replica.ts) tick OK_ENTRIES every-2-seconds entries, one more
 * whose first pass finds slots missed past its catch-up window, and three that always take the pass's path (paused,
 * overlap skip, overlap cancel_other) in lock-step at injected instants, one injected second per step: a slot's step
 * (slot + 500 ms) and the step between slots (slot + 1,500 ms). At a slot's step, when the entries' rows are as a
 * completed pass leaves them, one replica is SIGKILLed mid-pass, its server backends are waited out (each process has
 * its own application_name), and a process started ahead takes its place while a new one starts. The replicas have no
 * hook between the take and the release, so every other kill is aimed from outside: the victim ticks first, alone, and
 * is killed as soon as the rows show its take committed (a row's following slot unknown), before its release; the
 * others fall at a random instant of a pass ticked beside the rest. Where each fell is read from the rows afterwards
 * and printed: between the take's commit and the release when the take's moved rows are left with their following
 * slot unknown, or pass-path rows left under its lease. Afterwards every slot of every allow_all entry between the
 * first and the last tick has exactly one job with the slot's idempotency key, with no allowance.
 *
 * Why no allowance is needed: a kill is only made when no entry is mid-recovery (every row's following slot known, none
 * leased, none overdue), so the steps that repair a kill's rows are never killed themselves. One kill leaves each row
 * the victim took in one of two states, neither of which loses a slot: its take rolled back (still due, following slot
 * known: the take of the step between slots fires it), or fired and moved with its following slot unknown (left to the
 * pass at its next slot, which a surviving replica leases, fires and releases). A replica killed while it holds such
 * a recovering row under lease would delay it by DYNAMIC_LEASE_MS of the injected clock, past its next slots, and
 * catch-up fires the latest missed slot only (README, "Catch-up and DST"): that is the lease's documented cost, not
 * what this test is about, so it never kills then. The three others may be leased by a victim (taken for the pass and
 * not released): their checks do not depend on when they fire, and the run ends with more than a lease of clean steps.
 */
const FIXTURE = new URL("./fixtures/dynamic-replica.ts", import.meta.url).pathname;
const T0 = Date.parse("2026-06-01T00:00:00.000Z");
const PERIOD = 2_000;
const STEP = 1_000;
const OK_ENTRIES = 300;
/** Real time the kill phase lasts; then the clean tail. */
const KILL_PHASE_MS = 25_000;
/** Steps without kills at the end: more than a lease, so whatever a victim leased is fired and released again. */
const TAIL_STEPS = DYNAMIC_LEASE_MS / STEP + 4;
const NAMESPACE = "default";
const LEDGER_NS = dynamicLedgerNamespace(NAMESPACE);
const REPLICAS = 3;

interface Tick {
  readonly enqueued: [string, number][];
  readonly lostRace: number;
}

describe("dynamic entries across 3 replica processes SIGKILLed mid-pass", () => {
  let database: { url: string; drop: () => Promise<void> };
  let observer: Cronledger;
  let client: postgres.Sql;
  const everyProcess = new Set<SlotReplica>();
  let incarnation = 0;

  beforeAll(async () => {
    database = await createTestDatabase(import.meta.url);
    const sync = defineJob({ name: "tenant.sync", run: () => {} });
    observer = createCronledger({ database: { url: database.url, poolSize: 2 }, jobs: [sync], logger: silentLogger, metrics: false, chores: false });
    await observer.migrate();
    client = postgres(database.url, { max: 1, onnotice: () => {} });
  }, 60_000);
  afterAll(async () => {
    for (const replica of everyProcess) replica.child.kill("SIGKILL");
    await client?.end({ timeout: 1 });
    await observer?.close();
    await database?.drop();
  });

  /** A replica process whose server backends carry its own application_name, so the test can wait them out after a kill. */
  const start = async (): Promise<{ replica: SlotReplica; name: string }> => {
    const name = `dynkill_${(incarnation += 1)}`;
    const url = new URL(database.url);
    url.searchParams.set("application_name", name);
    const replica = await startSlotReplica({ databaseUrl: url.toString(), fixture: FIXTURE });
    everyProcess.add(replica);
    return { replica, name };
  };

  /** The server backends of a killed replica are gone: what its last statement did is committed or rolled back. */
  const backendsGone = async (name: string) => {
    for (let attempt = 0; attempt < 1_000; attempt += 1) {
      const [row] = await client<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where application_name = ${name}`;
      if (row!.n === 0) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`the backends of ${name} did not go away`);
  };

  /** The allow_all entries' rows, as the last step left them at `nowMs`. */
  const rowStates = async (nowMs: number) => {
    const now = new Date(nowMs);
    const [row] = await client<{ unknown: number; leased: number; overdue: number; others_leased_now: number }[]>`
      select count(*) filter (where key like 'ok:%' and following_fire_at is null)::int as unknown,
        count(*) filter (where key like 'ok:%' and next_fire_at > ${now}::timestamptz + interval '5 seconds')::int as leased,
        count(*) filter (where key like 'ok:%' and next_fire_at <= ${now}::timestamptz)::int as overdue,
        count(*) filter (where key not like 'ok:%' and next_fire_at = ${now}::timestamptz + ${DYNAMIC_LEASE_MS} * interval '1 millisecond')::int
          as others_leased_now
      from cronledger.dynamic_schedules where namespace = ${NAMESPACE}`;
    return row!;
  };

  it("fires every slot of every allow_all entry exactly once, the paused one nothing while paused, under repeated SIGKILLs", async () => {
    const seed = Number(process.env.DYNKILL_SEED ?? Math.floor(Math.random() * 2 ** 31));
    const random = seededRandom(seed);
    const entries = [
      ...Array.from({ length: OK_ENTRIES }, (_, index) => ({ key: `ok:${index}`, job: "tenant.sync", cron: "*/2 * * * * *" })),
      { key: "paused", job: "tenant.sync", cron: "*/2 * * * * *" },
      { key: "skip", job: "tenant.sync", cron: "*/2 * * * * *", overlap: "skip" as const },
      { key: "cancel", job: "tenant.sync", cron: "*/2 * * * * *", overlap: "cancel_other" as const },
    ];
    const upsertAt = T0 + 500;
    await observer.schedules.upsertMany(entries, { now: new Date(upsertAt) });
    // The smallest catch-up window there is (MIN_CATCH_UP_WINDOW_MS, src/schedule/validate.ts: a smaller one is
    // raised to it), stored 5 minutes before the first tick: its first pass finds slots missed, most of them past the
    // window, which the take leaves to the pass; it fires the latest (T0) alone. Then it is one more allow_all entry.
    await observer.schedules.upsert({ key: "ok:late", job: "tenant.sync", cron: "*/2 * * * * *", catchUpWindow: "1s" }, { now: new Date(T0 - 300_000) });
    const [late] = await client<{ ms: number }[]>`select catch_up_window_ms::float8 as ms from cronledger.dynamic_schedules where key = 'ok:late'`;
    expect(late?.ms).toBe(MIN_CATCH_UP_WINDOW_MS);
    await observer.pause("paused");

    type Started = { replica: SlotReplica; name: string };
    const slots: (Started | Promise<Started>)[] = await Promise.all(Array.from({ length: REPLICAS }, () => start()));
    // Processes started ahead, so a killed replica's place is taken at once (a start is 1-5 s on 2 busy cores).
    const spares = [start(), start()];
    const durations: number[] = [];
    /**
     * Each kill, and where it fell, from the rows after the victim's backends are gone: `unknown`, allow_all rows its take
     * fired and moved whose release never came; `leased`, pass-path rows its take leased at this step and never released
     * (both: between the take's commit and the release); `rolledBack`, rows its take held and never committed (overdue:
     * the survivors' takes skipped them); `answered`, its pass was over.
     */
    const kills: { step: number; targeted: boolean; delayMs: number; answered: boolean; unknown: number; leased: number; rolledBack: number }[] = [];
    const fired = async () => (await client<{ n: number }[]>`select count(*)::int as n from cronledger.dynamic_schedules where following_fire_at is null`)[0]!.n;
    const pausedSkips = async () =>
      (await client<{ n: number }[]>`select count(*)::int as n from cronledger.jobs where schedule_key = ${`${LEDGER_NS}|paused`} and status = 'skipped'`)[0]!.n;
    let resumedAt: number | undefined;
    let resumedStep = Number.POSITIVE_INFINITY;
    let clean = true;
    let step = 0;
    let tail = 0;
    const began = Date.now();
    // The tail goes on until the resumed entry has had a slot's step.
    while (tail < TAIL_STEPS || step < resumedStep + 2) {
      step += 1;
      const nowMs = T0 + step * STEP + 500;
      const slotStep = (nowMs - 500) % PERIOD === 0;
      const killing = Date.now() - began < KILL_PHASE_MS;
      if (!killing) tail += 1;
      // Between steps, from half the kill phase on, once a pass has recorded a slot of it as skipped (a victim that took it
      // for its pass keeps it under lease): slots up to the last tick were paused, those from the next on fire.
      if (resumedAt === undefined && Date.now() - began > KILL_PHASE_MS / 2 && (await pausedSkips()) > 0) {
        resumedAt = nowMs - STEP;
        resumedStep = step;
        await observer.resume("paused");
      }
      const live = slots.flatMap((slot, index) => (slot instanceof Promise ? [] : [{ ...slot, index }]));
      const victim = killing && slotStep && clean && live.length >= 2 ? live[Math.floor(random() * live.length)]! : undefined;
      // Every other kill is aimed: the victim ticks first, alone, and is killed as soon as the rows show its take
      // committed (a row's following slot unknown), before its release can. The others fall at a random instant of a
      // pass that ticks beside the rest: 0-100% of the slowest tick of a recent slot's step.
      const targeted = victim !== undefined && kills.length % 2 === 0;
      const typical = durations.length === 0 ? 50 : [...durations].sort((a, b) => a - b)[Math.floor(durations.length / 2)]!;
      const delayMs = victim === undefined || targeted ? 0 : Math.round(random() * typical);
      let answered = false;
      let slowest = 0;
      const tickOthers = () =>
        Promise.all(
          live.map(async ({ replica }) => {
            if (replica === victim?.replica) return;
            const sent = Date.now();
            await replica.send<Tick>(`tick ${nowMs}`);
            slowest = Math.max(slowest, Date.now() - sent);
          }),
        );
      const killVictim = async ({ replica, name, index }: Started & { index: number }) => {
        const exited = new Promise((resolve) => replica.child.once("exit", resolve));
        const sent = Date.now();
        const tick = replica.send<Tick>(`tick ${nowMs}`).then(
          () => (answered = true),
          () => {},
        );
        if (targeted) {
          while (!answered && Date.now() - sent < 10_000 && (await fired()) === 0);
          replica.child.kill("SIGKILL");
        } else {
          setTimeout(() => replica.child.kill("SIGKILL"), delayMs);
        }
        await Promise.all([tick, exited]);
        everyProcess.delete(replica);
        await backendsGone(name);
        const next = spares.shift()!;
        spares.push(start());
        slots[index] = next.then((started) => (slots[index] = started));
      };
      if (victim === undefined) await tickOthers();
      else if (targeted) await killVictim(victim).then(tickOthers);
      else await Promise.all([killVictim(victim), tickOthers()]);
      if (slotStep && victim === undefined) durations.push(slowest);
      if (durations.length > 20) durations.splice(0, durations.length - 20);
      const state = await rowStates(nowMs);
      if (victim !== undefined) kills.push({ step, targeted, delayMs, answered, unknown: state.unknown, leased: state.others_leased_now, rolledBack: state.overdue });
      clean = state.unknown === 0 && state.leased === 0 && state.overdue === 0;
    }
    const lastMs = T0 + step * STEP + 500;
    await Promise.all([...slots, ...spares].map(async (slot) => (await slot).replica.exit()));

    const inWindow = kills.filter((kill) => kill.unknown > 0 || kill.leased > 0);
    const aimed = kills.filter((kill) => kill.targeted);
    console.log(
      `seed ${seed}: ${step} steps (${Math.round((Date.now() - began) / 1000)} s), ${kills.length} kills: ${inWindow.length} between take and release ` +
        `(${inWindow.filter((kill) => kill.targeted).length} of ${aimed.length} aimed, ${inWindow.filter((kill) => !kill.targeted).length} of ${kills.length - aimed.length} at random; ` +
        `${inWindow.filter((kill) => kill.unknown > 0).length} with fired rows left unreleased), ${kills.filter((kill) => kill.rolledBack > 0).length} in a take rolled back, ` +
        `${kills.filter((kill) => kill.answered).length} after the pass answered; slot step's pass ${durations.sort((a, b) => a - b)[Math.floor(durations.length / 2)]} ms; ` +
        `kills ${JSON.stringify(kills)}`,
    );
    // Restarts bound the kills (a process's start is 1-8 s on 2 busy cores): 10-16 a run alone at load 6-9, 4-6 beside
    // two other replica test files at load 8-12. An aimed kill finds the take committed unless the whole pass beat the
    // test's poll (never seen: every aimed kill of every run landed there; the first kill is aimed).
    expect(kills.length).toBeGreaterThanOrEqual(3);
    expect(inWindow.length).toBeGreaterThan(0);

    const firstSlot = Math.ceil((upsertAt + 1) / PERIOD) * PERIOD;
    const allSlots: number[] = [];
    for (let slot = T0; slot <= lastMs; slot += PERIOD) allSlots.push(slot);
    const runs = await client<{ key: string; slot: number; idempotency_key: string | null; status: string }[]>`
      select substr(schedule_key, length(${`${LEDGER_NS}|`}) + 1) as key, extract(epoch from scheduled_for)::float8 * 1000 as slot, idempotency_key, status
      from cronledger.jobs where schedule_key like ${`${LEDGER_NS}|%`}`;
    // A slot skipped (paused, overlap) is a finished run without a key (src/db/sql/slot-policy.ts); the others are jobs.
    const jobs = runs.filter((run) => run.status !== "skipped");
    const skippedPaused = runs.filter((run) => run.status === "skipped" && run.key === "paused");
    const byKey = new Map<string, number[]>();
    for (const job of jobs) byKey.set(job.key, [...(byKey.get(job.key) ?? []), job.slot]);
    const duplicates: string[] = [];
    const missing: string[] = [];
    const oracle = [...Array.from({ length: OK_ENTRIES }, (_, index) => ({ key: `ok:${index}`, from: firstSlot })), { key: "ok:late", from: T0 }];
    for (const { key, from } of oracle) {
      const fired = byKey.get(key) ?? [];
      const expectedSlots = allSlots.filter((slot) => slot >= from);
      const counts = new Map<number, number>();
      for (const slot of fired) counts.set(slot, (counts.get(slot) ?? 0) + 1);
      for (const [slot, n] of counts) if (n > 1 || !expectedSlots.includes(slot)) duplicates.push(`${key}@${new Date(slot).toISOString()}x${n}`);
      for (const slot of expectedSlots) if (!counts.has(slot)) missing.push(`${key}@${new Date(slot).toISOString()}`);
    }
    expect({ duplicates: duplicates.slice(0, 20), missing: missing.slice(0, 20), counts: [duplicates.length, missing.length] }).toEqual({
      duplicates: [],
      missing: [],
      counts: [0, 0],
    });
    // Each job holds its slot's idempotency key, as the pass would write it, and no key twice (jobs and job_keys).
    for (const job of jobs) expect(job.idempotency_key).toBe(slotIdempotencyKey(LEDGER_NS, dynamicIdentity(job.key), job.slot));
    expect(new Set(jobs.map((job) => job.idempotency_key)).size).toBe(jobs.length);
    expect(await client`select idempotency_key from cronledger.job_keys group by job_name, idempotency_key having count(*) > 1`).toEqual([]);
    const fromFirst = allSlots.filter((slot) => slot >= firstSlot).length;
    expect(jobs.length).toBe(OK_ENTRIES * fromFirst + allSlots.length + (byKey.get("paused")?.length ?? 0) + (byKey.get("skip")?.length ?? 0) + (byKey.get("cancel")?.length ?? 0));
    // Paused: nothing up to the resume; fired again after it.
    expect(resumedAt).toBeDefined();
    expect((byKey.get("paused") ?? []).filter((slot) => slot <= resumedAt!)).toEqual([]);
    expect(skippedPaused.length).toBeGreaterThan(0);
    expect(skippedPaused.filter((run) => run.slot > resumedAt!)).toEqual([]);
    expect((byKey.get("paused") ?? []).length).toBeGreaterThan(0);
    // Overlap skip, with no worker: its first job stays queued, so every later slot is skipped.
    expect(byKey.get("skip")?.length).toBe(1);
    // Cancel_other, with no worker: each slot's job cancels the one before; no slot twice (a victim's lease may delay it past slots).
    const cancelled = byKey.get("cancel") ?? [];
    expect(new Set(cancelled).size).toBe(cancelled.length);
    expect(cancelled.length).toBeGreaterThan(0);
    // Every row as a completed pass leaves it.
    expect(await rowStates(lastMs)).toEqual({ unknown: 0, leased: 0, overdue: 0, others_leased_now: 0 });
  }, 120_000);
});

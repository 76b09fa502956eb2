import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Cronledger } from "../src/cronledger.js";
import { fireDue } from "../src/db/sql/dynamic-fire.js";
import { defineJob } from "../src/jobs/define-job.js";
import { dynamicIdentity, dynamicLedgerNamespace } from "../src/schedule/dynamic-entry.js";
import { slotIdempotencyKey } from "../src/schedule/identity.js";
import { DYNAMIC_LEASE_MS, FUTURE_LEDGER_TOLERANCE_MS } from "../src/schedule/tick.js";
import { BACKENDS, createTestStore, rows, type TestStore } from "./support/ledger.js";

// The statement that takes due dynamic entries fires most of them itself (src/db/sql/dynamic-fire.ts, fireDue): here it
// is held to what a static entry of the same cron does, to a replica dying between its take and its release, to rows
// stored before their slots were, and to the slot's idempotency key the pass would have written.
const sync = defineJob({ name: "tenant.sync", run: () => {} });
const T0 = Date.parse("2026-06-01T00:00:00.000Z");
const SECOND = 1_000;

interface JobRow {
  slot_ms: number;
  idempotency_key: string;
}

async function jobsOf(ledger: Cronledger, scheduleKey: string): Promise<JobRow[]> {
  return rows<JobRow>(
    ledger,
    sql`select (extract(epoch from scheduled_for) * 1000)::float8 as slot_ms, idempotency_key from cronledger.jobs
        where schedule_key = ${scheduleKey} order by scheduled_for, id`,
  );
}

const seconds = (found: readonly JobRow[]) => found.map((row) => (row.slot_ms - T0) / SECOND);

for (const backend of BACKENDS) {
  describe(`the take fires due dynamic entries (${backend})`, () => {
    let store: TestStore;
    let ledger: Cronledger;
    const twins = [
      { key: "every-2s", cron: "*/2 * * * * *", catchUpWindow: "5s" },
      { key: "every-10s", cron: "*/10 * * * * *", catchUpWindow: "3s" },
    ] as const;

    beforeAll(async () => {
      store = await createTestStore(backend, "dynamic_fire");
      ledger = await store.open({
        jobs: [sync],
        schedule: twins.map((twin) => ({ ...twin, key: `static-${twin.key}`, job: sync })),
        metrics: false,
        chores: false,
      });
    });
    afterAll(() => store.dispose());

    it("fires, catches up and passes over stale slots exactly as a static entry of the same cron and window", async () => {
      await ledger.schedules.upsertMany(
        twins.map((twin) => ({ ...twin, key: `dynamic-${twin.key}`, job: sync })),
        { now: new Date(T0) },
      );
      // The static twins' ledger rows start where the dynamic ones do: a first pass at T0 creates them.
      await ledger.tick({ now: new Date(T0) });
      const stale = { static: [] as number[], dynamic: [] as number[] };
      // Slots on time, a gap inside the catch-up window, one past it (at 44.5 the 10 s entry's slot 40 is past its 3 s window).
      for (const at of [1, 2, 3, 4, 9, 10, 16, 30, 44.5, 45]) {
        const report = await ledger.tick({ now: new Date(T0 + at * SECOND) });
        for (const slot of report.skippedStale) stale[slot.identity.startsWith("dynamic:") ? "dynamic" : "static"].push((slot.slot.getTime() - T0) / SECOND);
      }
      for (const twin of twins) {
        const fired = seconds(await jobsOf(ledger, ledger.schedules.ledgerKey(`dynamic-${twin.key}`)));
        const staticKey = (await rows<{ key: string }>(ledger, sql`select key from cronledger.schedule_state where key like ${`%static-${twin.key}%`}`))[0]!.key;
        expect(fired, twin.key).toEqual(seconds(await jobsOf(ledger, staticKey)));
        expect(fired.length, twin.key).toBeGreaterThan(1);
      }
      expect(stale.dynamic.sort()).toEqual(stale.static.sort());
    });

    it("loses and doubles nothing when a replica dies between its take and its release", async () => {
      await ledger.schedules.upsert({ key: "crash", job: sync, cron: "*/2 * * * * *" }, { now: new Date(T0 + 100 * SECOND) });
      const namespace = "default";
      // What a replica's pass does first, and then nothing: the process died before it released what it took.
      const taken = await fireDue(ledger.database.db, {
        namespace,
        ledgerNamespace: dynamicLedgerNamespace(namespace),
        limit: 100,
        leaseMs: DYNAMIC_LEASE_MS,
        exactNow: new Date(T0 + 102 * SECOND),
        traceContextJson: null,
        toleranceMs: FUTURE_LEDGER_TOLERANCE_MS,
      });
      expect(taken.rows.filter((row) => row.key === "crash").map((row) => row.fired_slot_ms)).toEqual([T0 + 102 * SECOND]);
      for (const at of [102, 103, 104, 105, 106, 108]) await ledger.tick({ now: new Date(T0 + at * SECOND) });
      expect(seconds(await jobsOf(ledger, ledger.schedules.ledgerKey("crash")))).toEqual([102, 104, 106, 108]);
      // The pass that found its following slot unknown stored it again: the take fires the entry once more.
      const [row] = await rows<{ known: boolean }>(ledger, sql`select following_fire_at is not null as known from cronledger.dynamic_schedules where key = 'crash'`);
      expect(row?.known).toBe(true);
    });

    it("fires a row stored without its slots (before migration 0011) by the pass, which stores them; the slot's key is the same either way", async () => {
      // A process without static entries, whose passes' statements are the dynamic entries' alone.
      const plain = await store.open({ jobs: [sync], metrics: false, chores: false });
      await plain.schedules.upsert({ key: "legacy", job: sync, cron: "*/2 * * * * *" }, { now: new Date(T0 + 200 * SECOND) });
      await rows(ledger, sql`update cronledger.dynamic_schedules set next_slot_at = null, following_slot_at = null, following_fire_at = null where key = 'legacy'`);
      const byPass = await plain.tick({ now: new Date(T0 + 202 * SECOND) });
      const byTake = await plain.tick({ now: new Date(T0 + 204 * SECOND) });
      // The probe, the take, the pass's own statement for what the take left, the release; then the probe, the take, the release.
      expect([byPass.statements, byTake.statements]).toEqual([4, 3]);
      const ledgerKey = ledger.schedules.ledgerKey("legacy");
      expect([...byPass.enqueued, ...byTake.enqueued].filter((slot) => slot.key === ledgerKey).map((slot) => (slot.slot.getTime() - T0) / SECOND)).toEqual([202, 204]);
      const identity = dynamicIdentity("legacy");
      expect(await jobsOf(ledger, ledgerKey)).toEqual(
        [202, 204].map((at) => ({ slot_ms: T0 + at * SECOND, idempotency_key: slotIdempotencyKey(dynamicLedgerNamespace("default"), identity, T0 + at * SECOND) })),
      );
    });
  });
}

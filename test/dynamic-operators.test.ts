import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdminHandler } from "../src/admin/handler.js";
import type { Cronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import type { StatusDocument } from "../src/wire/status.js";
import { createTestStore, rows, type TestStore } from "./support/ledger.js";

// The operators' view of schedules as data: counts by state kept by the writing statements, a page by key prefix in the
// status, its JSON and the Schedule page, and a metrics gauge by state (never a series per entry).
const sync = defineJob({ name: "tenant.sync", run: () => {} });
const digest = defineJob({ name: "tenant.digest", run: () => {} });
const T0 = Date.parse("2026-06-01T00:00:00.000Z");
const TOKEN = "dynamic-operators-token-0123456789";

async function stored(ledger: Cronledger): Promise<number> {
  const [row] = await rows<{ n: number }>(ledger, sql`select count(*)::int as n from cronledger.dynamic_schedules`);
  return row?.n ?? -1;
}

describe("dynamic entries for operators", () => {
  let store: TestStore;
  let ledger: Cronledger;
  let app: postgres.Sql;

  beforeAll(async () => {
    store = await createTestStore("postgres", "dynamic_operators");
    ledger = await store.open({ jobs: [sync, digest], chores: false });
    // The application's own connection to the same database, for its transactions.
    app = postgres(await urlOf(ledger), { max: 4, onnotice: () => {} });
  });
  afterAll(async () => {
    await app.end({ timeout: 1 });
    await store.dispose();
  });

  it("counts what is stored exactly through creates, changes, removals, rollbacks, racing creators and the fold", async () => {
    const entries = Array.from({ length: 30 }, (_, index) => ({ key: `tenant:${String(index).padStart(2, "0")}:sync`, job: sync, cron: "0 * * * *" }));
    await ledger.schedules.upsertMany(entries, { now: new Date(T0) });
    expect((await ledger.schedules.counts()).total).toBe(30);
    // Changed, unchanged and retimed entries are not new ones.
    await ledger.schedules.upsertMany(
      [
        { key: "tenant:00:sync", job: digest, cron: "0 * * * *" },
        { key: "tenant:01:sync", job: sync, cron: "0 * * * *" },
        { key: "tenant:02:sync", job: sync, cron: "*/5 * * * *" },
        { key: "tenant:99:sync", job: sync, cron: "0 * * * *" },
      ],
      { now: new Date(T0) },
    );
    expect((await ledger.schedules.counts()).total).toBe(31);
    expect(await ledger.schedules.removeMany(["tenant:03:sync", "tenant:04:sync", "no:such"])).toEqual(["tenant:03:sync", "tenant:04:sync"]);
    expect((await ledger.schedules.counts()).total).toBe(29);
    // Rolled back: neither the entry nor its count stays.
    const tx = drizzle(app);
    await tx
      .transaction(async (inner) => {
        await ledger.schedules.upsert({ key: "tenant:rolled:sync", job: sync, cron: "0 * * * *" }, { db: inner });
        await ledger.schedules.remove("tenant:05:sync", { db: inner });
        throw new Error("roll back");
      })
      .catch(() => undefined);
    expect((await ledger.schedules.counts()).total).toBe(29);
    // Two transactions create the same new key at once: the second waits for the first, then updates it. One entry, counted once.
    const racing = await Promise.all(
      [sync, digest].map((job) =>
        tx.transaction(async (inner) => {
          const result = await ledger.schedules.upsert({ key: "tenant:race:sync", job, cron: "0 * * * *" }, { db: inner });
          await inner.execute(sql`select pg_sleep(0.2)`);
          return result.outcome;
        }),
      ),
    );
    expect(racing).toContain("created");
    expect((await ledger.schedules.counts()).total).toBe(30);
    expect(await stored(ledger)).toBe(30);
    // Several backends wrote counter rows; the prune chore folds them into one per namespace, the total unchanged.
    expect((await rows<{ n: number }>(ledger, sql`select count(*)::int as n from cronledger.dynamic_schedule_counts`))[0]?.n).toBeGreaterThan(1);
    await ledger.prune();
    expect(await rows(ledger, sql`select shard, n::int as n from cronledger.dynamic_schedule_counts`)).toEqual([{ shard: 0, n: 30 }]);
    expect((await ledger.schedules.counts()).total).toBe(30);
  });

  it("the status counts them by state always, and lists one page by key prefix only when asked", async () => {
    await ledger.pause("tenant:06:sync", { note: "tenant suspended" });
    const plain = await ledger.status();
    expect(plain.dynamic).toMatchObject({ counts: { total: 30, paused: 1 }, prefix: "", page: null });
    const first = await ledger.status({ dynamic: { prefix: "tenant:0", limit: 4 } });
    expect(first.dynamic.page?.entries.map((entry) => entry.key)).toEqual(["tenant:00:sync", "tenant:01:sync", "tenant:02:sync", "tenant:05:sync"]);
    const second = await ledger.status({ dynamic: { prefix: "tenant:0", after: first.dynamic.page!.next!, limit: 4 } });
    expect(second.dynamic.page?.entries.map((entry) => entry.key)).toEqual(["tenant:06:sync", "tenant:07:sync", "tenant:08:sync", "tenant:09:sync"]);
    expect(second.dynamic.page?.entries[0]?.paused?.note).toBe("tenant suspended");
  });

  it("backfills a dynamic key's missed slots as a static entry's, once, and its last run shows with the entry", async () => {
    const key = "backfill:1";
    await ledger.schedules.upsert({ key, job: sync, cron: "0 * * * *" }, { now: new Date(T0) });
    const range = { from: new Date(T0 - 3 * 3_600_000), to: new Date(T0 - 1) };
    const dry = await ledger.backfill(key, { ...range, dryRun: true });
    expect([dry.key, dry.entryKey, dry.slots.map((slot) => slot.slot.toISOString())]).toEqual([
      ledger.schedules.ledgerKey(key),
      key,
      ["2026-05-31T21:00:00.000Z", "2026-05-31T22:00:00.000Z", "2026-05-31T23:00:00.000Z"],
    ]);
    expect((await ledger.backfill(key, range)).enqueued).toBe(3);
    const again = await ledger.backfill(key, range);
    expect([again.enqueued, again.existing]).toEqual([0, 3]);
    await ledger.work({ once: true });
    expect((await ledger.schedules.get(key))?.lastRun).toMatchObject({ status: "succeeded", slot: new Date("2026-05-31T23:00:00.000Z") });
    expect(await ledger.schedules.remove(key)).toBe(true);
  });

  it("serves them in the status JSON (paged by query), on the Schedule page with a prefix search, and as a bounded gauge", async () => {
    const handler = createAdminHandler(ledger, { token: TOKEN });
    const get = (path: string) => handler(new Request(`http://localhost${path}`, { headers: { authorization: `Bearer ${TOKEN}` } }));
    const json = (await (await get("/admin/scheduler/status?prefix=tenant:1&limit=3")).json()) as StatusDocument;
    expect(json.dynamic.counts).toMatchObject({ total: 30, paused: 1 });
    expect([json.dynamic.prefix, json.dynamic.entries?.map((entry) => entry.key), json.dynamic.next]).toEqual([
      "tenant:1",
      ["tenant:10:sync", "tenant:11:sync", "tenant:12:sync"],
      "tenant:12:sync",
    ]);
    const all = (await (await get("/admin/scheduler/status")).json()) as StatusDocument;
    expect([all.dynamic.entries?.length, all.dynamic.next]).toEqual([30, null]);
    const refused = await get("/admin/scheduler/status?limit=5000");
    expect(refused.status).toBe(400);

    const page = await (await get("/admin/scheduler?prefix=tenant:2")).text();
    expect(page).toContain(`<p id="dynamic-counts">30 stored · 29 due · 1 paused · 0 quarantined · 0 never firing again</p>`);
    expect(page).toMatch(/<form method="get" action="scheduler#dynamic" role="search"[^>]*><label>Key prefix <input name="prefix" value="tenant:2"/);
    const keys = [...page.matchAll(/<tr data-key="([^"]+)"/g)].map((match) => match[1]);
    expect(keys).toEqual(Array.from({ length: 10 }, (_, index) => `tenant:2${index}:sync`));
    // (Entries upserted at T0 are due by the database clock; the one the racing transactions created at the real clock is not.)
    // A page holds PAGE_DYNAMIC entries and links the next one; never all of them.
    const full = await (await get("/admin/scheduler")).text();
    expect([...full.matchAll(/<tr data-key=/g)]).toHaveLength(30);
    await ledger.schedules.upsertMany(
      Array.from({ length: 40 }, (_, index) => ({ key: `bulk:${String(index).padStart(2, "0")}`, job: sync, cron: "0 * * * *" })),
      { now: new Date(T0) },
    );
    const paged = await (await get("/admin/scheduler")).text();
    expect([...paged.matchAll(/<tr data-key=/g)]).toHaveLength(50);
    expect(paged).toContain(`<a href="scheduler?after=tenant%3A11%3Async#dynamic">next page</a>`);

    const metrics = await (await get("/metrics")).text();
    const series = metrics.split("\n").filter((line) => line.startsWith("cronledger_dynamic_schedule_entries{"));
    expect(series).toEqual([
      'cronledger_dynamic_schedule_entries{state="total"} 70',
      'cronledger_dynamic_schedule_entries{state="due"} 69',
      'cronledger_dynamic_schedule_entries{state="paused"} 1',
      'cronledger_dynamic_schedule_entries{state="quarantined"} 0',
      'cronledger_dynamic_schedule_entries{state="never"} 0',
    ]);
    expect(metrics).not.toContain("tenant:");
  });
});

/** The URL of the test database a ledger of createTestStore uses. */
async function urlOf(ledger: Cronledger): Promise<string> {
  const [row] = await rows<{ db: string }>(ledger, sql`select current_database() as db`);
  const server = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
  const url = new URL(server);
  url.pathname = `/${row!.db}`;
  return url.toString();
}

import { sql } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { JobNotRegisteredError, PayloadValidationError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import { BACKENDS, createTestStore, jobCount, rows, type TestStore } from "./support/ledger.js";

const sendDigest = defineJob({
  name: "email.send-digest",
  payload: z.object({ list: z.string() }),
  retry: "probe",
  queue: "mail",
  priority: 5,
  run: () => {},
});
const unknownJob = defineJob({ name: "not.registered", run: () => {} });
const strictDate = defineJob({ name: "report.strict-date", payload: z.object({ day: z.date() }), run: () => {} });
const bigCount = defineJob({ name: "report.big-count", payload: z.object({ n: z.bigint() }), run: () => {} });
const seenDays: Date[] = [];
const coercedDate = defineJob({
  name: "report.coerced-date",
  payload: z.object({ day: z.coerce.date() }),
  run: (payload) => {
    seenDays.push(payload.day);
  },
});

describe.each(BACKENDS)("enqueue on %s", (backend) => {
  let store: TestStore;
  afterEach(async () => {
    await store.dispose();
  });
  const open = async () => {
    store = await createTestStore(backend, `enqueue_${backend}`);
    return store.open({ jobs: [sendDigest, strictDate, bigCount, coercedDate] });
  };

  it("writes a queued job with the job's queue, priority and attempts", async () => {
    const ledger = await open();
    const job = await ledger.enqueue(sendDigest, { list: "x" });
    expect(job).toMatchObject({ jobName: "email.send-digest", created: true });
    const [row] = await rows<Record<string, unknown>>(
      ledger,
      sql`select status, queue, priority, max_attempts, payload, attempts from cronledger.jobs where id = ${job.id}`,
    );
    expect(row).toEqual({ status: "queued", queue: "mail", priority: 5, max_attempts: 3, payload: { list: "x" }, attempts: 0 });
  });

  it("returns the existing job for an existing idempotency key", async () => {
    const ledger = await open();
    const first = await ledger.enqueue(sendDigest, { list: "x" }, { idempotencyKey: "x-2026-12-02" });
    const second = await ledger.enqueue(sendDigest, { list: "y" }, { idempotencyKey: "x-2026-12-02" });
    expect(second).toEqual({ id: first.id, jobName: "email.send-digest", created: false });
    expect(await jobCount(ledger)).toBe(1);
  });

  it("refuses a payload that would not survive being stored as JSON, and keeps one that does", async () => {
    const ledger = await open();
    const day = new Date("2026-12-02T00:00:00.000Z");
    await expect(ledger.enqueue(strictDate, { day })).rejects.toThrow(/day: .*after the JSON round trip/);
    await expect(ledger.enqueue(bigCount, { n: 10n })).rejects.toThrow(/cannot be stored as JSON/);
    expect(await jobCount(ledger)).toBe(0);
    await ledger.enqueue(coercedDate, { day });
    expect(await ledger.work({ once: true })).toMatchObject({ succeeded: 1, failed: 0 });
    expect(seenDays.at(-1)).toEqual(day);
  });

  it("validates every payload before writing anything", async () => {
    const ledger = await open();
    await expect(ledger.enqueue(sendDigest, { list: 1 } as unknown as { list: string })).rejects.toBeInstanceOf(PayloadValidationError);
    await expect(
      ledger.enqueueMany([
        { job: sendDigest, payload: { list: "ok" } },
        { job: sendDigest, payload: { nope: true } as unknown as { list: string } },
      ]),
    ).rejects.toThrow(/enqueueMany item 1.*list/);
    expect(await jobCount(ledger)).toBe(0);
    await expect(ledger.enqueue("reports.unknown")).rejects.toBeInstanceOf(JobNotRegisteredError);
    await expect(ledger.enqueue(unknownJob)).resolves.toMatchObject({ created: true });
  });

  it("inserts many jobs in one statement, keeping order and resolving existing keys", async () => {
    const ledger = await open();
    const existing = await ledger.enqueue(sendDigest, { list: "k" }, { idempotencyKey: "k" });
    const before = ledger.database.statements.count;
    const results = await ledger.enqueueMany([
      { job: sendDigest, payload: { list: "a" } },
      { job: sendDigest, payload: { list: "k" }, options: { idempotencyKey: "k" } },
      { job: sendDigest, payload: { list: "b" }, options: { idempotencyKey: "b", delay: "1h" } },
      { job: sendDigest, payload: { list: "b2" }, options: { idempotencyKey: "b" } },
      ...Array.from({ length: 500 }, (_, index) => ({ job: sendDigest, payload: { list: `bulk-${index}` } })),
    ]);
    expect(ledger.database.statements.count - before).toBe(2);
    expect(results).toHaveLength(504);
    expect(results[1]).toEqual({ id: existing.id, jobName: "email.send-digest", created: false });
    expect(results[2]?.created).toBe(true);
    expect(results[3]).toEqual({ id: results[2]!.id, jobName: "email.send-digest", created: false });
    const payloads = await rows<{ id: number; list: string; delayed: boolean }>(
      ledger,
      sql`select id::float8 as id, payload->>'list' as list, run_at > now() + interval '50 minutes' as delayed from cronledger.jobs`,
    );
    const byId = new Map(payloads.map((row) => [row.id, row]));
    expect(byId.get(results[0]!.id)?.list).toBe("a");
    expect(byId.get(results[503]!.id)?.list).toBe("bulk-499");
    expect(byId.get(results[2]!.id)?.delayed).toBe(true);
    expect(payloads).toHaveLength(503);
  });
});

// PGlite runs inside this process, so its clock is this host's: the skew can only be shown on a server.
describe("enqueue on a PostgreSQL server", () => {
  let store: TestStore;
  afterEach(async () => {
    await store.dispose();
  });

  it("counts a delay from the database clock, not this host's", async () => {
    store = await createTestStore("postgres", "enqueue_clock");
    const ledger = await store.open({ jobs: [sendDigest] });
    // This host's clock runs two days fast; the database's does not.
    const skewed = Date.now() + 2 * 86_400_000;
    const realNow = Date.now;
    Date.now = () => skewed;
    let job: { id: number };
    try {
      job = await ledger.enqueue(sendDigest, { list: "later" }, { delay: "1h" });
    } finally {
      Date.now = realNow;
    }
    const [row] = await rows<{ minutes: number }>(
      ledger,
      sql`select extract(epoch from run_at - now()) / 60 as minutes from cronledger.jobs where id = ${job.id}`,
    );
    expect(Number(row?.minutes)).toBeGreaterThan(55);
    expect(Number(row?.minutes)).toBeLessThanOrEqual(60);
  });
});

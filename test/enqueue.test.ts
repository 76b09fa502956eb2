import { sql } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { ConfigError, JobNotRegisteredError, PayloadTooLargeError, PayloadValidationError } from "../src/errors.js";
import { createCronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { validateSchedule } from "../src/schedule/validate.js";
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

  it("names the registered job closest to a misspelt one", async () => {
    const ledger = await open();
    await expect(ledger.enqueue("email.sned-digest")).rejects.toThrow(/job "email\.sned-digest" is not registered .*\(did you mean "email\.send-digest"\?\)/);
    await expect(ledger.enqueue("zzz")).rejects.toThrow(/job "zzz" is not registered in this worker;/);
    expect(await jobCount(ledger)).toBe(0);
  });

  it("refuses a payload over maxPayloadBytes before writing anything, measured on its stored JSON", async () => {
    const ledger = await open();
    // 20 MB used to be stored as it came.
    const huge = { list: "x".repeat(20 * 1_048_576) };
    const refused = await ledger.enqueue(sendDigest, huge).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(PayloadTooLargeError);
    expect(refused).toMatchObject({ code: "payload_too_large", jobName: "email.send-digest", maxBytes: 1_048_576 });
    expect((refused as PayloadTooLargeError).bytes).toBe(JSON.stringify(huge).length);
    // Its length settles it: counting 20 MB of UTF-8 would cost more than the refusal, so the size is a lower bound.
    expect((refused as Error).message).toMatch(/is at least 20\.0 MiB as stored JSON, over the 1 MiB limit \(maxPayloadBytes\).*Nothing was written\./);
    // One item over the limit writes none of the batch.
    await expect(
      ledger.enqueueMany([
        { job: sendDigest, payload: { list: "ok" } },
        { job: sendDigest, payload: { list: "é".repeat(600_000) } },
      ]),
    ).rejects.toThrow(/enqueueMany item 1\) is 1\.1 MiB as stored JSON/);
    // Under a million characters, but over a million bytes: counted.
    await expect(ledger.enqueue(sendDigest, { list: "€".repeat(350_000) })).rejects.toThrow(/is 1\.0 MiB as stored JSON/);
    expect(await jobCount(ledger)).toBe(0);

    // The limit counts UTF-8 bytes of the JSON (quotes and escapes included), not characters.
    const small = await store.open({ jobs: [sendDigest], maxPayloadBytes: 20 });
    const fits = { list: "é".repeat(3) }; // {"list":"ééé"}: 14 characters, 17 bytes
    await expect(small.enqueue(sendDigest, fits)).resolves.toMatchObject({ created: true });
    await expect(small.enqueue(sendDigest, { list: "é".repeat(5) })).rejects.toThrow(/is 21 bytes as stored JSON, over the 20 bytes limit/);
    await expect(small.enqueue(sendDigest, { list: "\n".repeat(6) })).rejects.toThrow(/is at least 23 bytes/);
    expect(await jobCount(ledger)).toBe(1);
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

describe("maxPayloadBytes", () => {
  it("is checked when the ledger is created: a whole number of bytes up to jsonb's 255 MiB", () => {
    for (const bad of [0, -1, 1.5, "1MB", 268_435_456]) {
      expect(() => createCronledger({ database: "memory://", logger: silentLogger, maxPayloadBytes: bad as number }), String(bad)).toThrow(ConfigError);
    }
  });

  it("applies to schedule entries, reported as invalid_payload with the entry", () => {
    const entry = { job: sendDigest, cron: "0 * * * *", payload: { list: "x".repeat(100) } };
    expect(validateSchedule([entry], [sendDigest], { maxPayloadBytes: 64 })).toEqual([
      expect.objectContaining({ code: "invalid_payload", index: 0, message: expect.stringMatching(/^schedule\[0\] \(email\.send-digest\): payload is at least 111 bytes as stored JSON, over the 64 bytes limit/) }),
    ]);
    expect(validateSchedule([entry], [sendDigest])).toEqual([]);
  });

  it("names the registered job closest to a misspelt one in a schedule entry", () => {
    const [problem] = validateSchedule([{ job: "email.sned-digest", cron: "0 * * * *" }], [sendDigest]);
    expect(problem).toMatchObject({ code: "unregistered_job" });
    expect(problem?.message).toContain('job "email.sned-digest" is not registered (did you mean "email.send-digest"?)');
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

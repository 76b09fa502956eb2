import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdminHandler } from "../src/admin/handler.js";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { silentLogger } from "../src/log.js";
import config, { summer, yearly } from "./fixtures/cli/wire.config.js";
import { runCli } from "./support/child.js";
import { useTestDatabase } from "./support/database.js";
import { insertFinishedJobs } from "./support/history.js";

const CONFIG = fileURLToPath(new URL("./fixtures/cli/wire.config.ts", import.meta.url));
const TOKEN = "wire-format-token-0123456789";

const database = useTestDatabase(import.meta.url);
let ledger: Cronledger;
let get: (path: string, init?: RequestInit) => Promise<Response>;
/** `cronledger <args> --json` on the test's database, parsed; `tick` exits 1 while the schedule has an invalid entry. */
const cli = async (...args: string[]) => {
  const result = await runCli([...args, "--json"], { env: { ...process.env, DATABASE_URL: database.url } });
  expect(result.code, result.stderr).toBe(args[0] === "tick" ? 1 : 0);
  return JSON.parse(result.stdout) as Record<string, unknown>;
};

/**
 * One database in several states: entries that never fired, one whose latest
 * run failed for good, a failure ticket retried once (its retry is a ready
 * job no worker knows), and an invalid entry.
 */
beforeAll(async () => {
  ledger = createCronledger({ ...config, database: database.url, logger: silentLogger });
  await ledger.migrate();
  await ledger.tick();
  const summerKey = ledger.entries.find((entry) => entry.jobName === summer.name)?.ledgerKey;
  await insertFinishedJobs(ledger.database.db, [
    {
      jobName: summer.name,
      status: "failed",
      attempts: 3,
      maxAttempts: 3,
      scheduleKey: summerKey ?? null,
      scheduledFor: new Date("2025-06-30T22:00:00Z"),
      createdAt: new Date("2025-06-30T22:00:00Z"),
      startedAt: new Date("2025-06-30T22:00:01Z"),
      finishedAt: new Date("2025-06-30T22:00:02Z"),
      lastError: "Error: the summer sale API answered 500",
      idempotencyKey: "summer-2025",
    },
    {
      jobName: yearly.name,
      status: "failed",
      createdAt: new Date("2025-01-01T00:00:00Z"),
      startedAt: new Date("2025-01-01T00:00:01Z"),
      finishedAt: new Date("2025-01-01T00:00:02Z"),
    },
  ]);
  const [ticket] = (await ledger.failures({ jobType: yearly.name })).failures;
  await ledger.retryJob(ticket?.id ?? 0);
  const handler = createAdminHandler(ledger, { token: TOKEN });
  get = (path, init = {}) => handler(new Request(`http://127.0.0.1${path}`, { ...init, headers: { authorization: `Bearer ${TOKEN}`, ...init.headers } }));
});

afterAll(async () => {
  await ledger.close();
});

describe("one wire format for the CLI's --json and the HTTP API", () => {
  it("cronledger failures --json and GET /admin/scheduler/failures return the same document", async () => {
    const served = (await (await get("/admin/scheduler/failures")).json()) as Record<string, unknown>;
    expect(await cli("failures")).toEqual(served);
    expect(served).toMatchObject({
      version: 1,
      next_before: null,
      failures: [
        expect.objectContaining({ job_type: summer.name, max_attempts: 3, failed_at: "2025-06-30T22:00:02.000Z", idempotency: "summer-2025", retried_as: null }),
        expect.objectContaining({ job_type: yearly.name, last_error: null, scheduled_for: null, retried_as: { id: expect.any(Number), status: "queued" } }),
      ],
    });
    const filtered = (await (await get(`/admin/scheduler/failures?job_type=${summer.name}&limit=1`)).json()) as Record<string, unknown>;
    expect(await cli("failures", "--job-type", summer.name, "--limit", "1")).toEqual(filtered);
  });

  it("cronledger status --json and GET /admin/scheduler/status return the same document, but for the database clock they were read at", async () => {
    const served = (await (await get("/admin/scheduler/status")).json()) as Record<string, unknown>;
    const printed = await cli("status", "--config", CONFIG);
    expect(Date.parse(String(printed.database_now))).toBeGreaterThanOrEqual(Date.parse(String(served.database_now)));
    expect({ ...printed, database_now: null }).toEqual({ ...served, database_now: null });
    expect(served).toMatchObject({
      version: 1,
      entries: [
        expect.objectContaining({ job: yearly.name, state: "never_fired", last_enqueued_slot: null }),
        expect.objectContaining({ job: summer.name, state: "failing", latest_run: expect.objectContaining({ kind: "failed", max_attempts: 3 }) }),
        expect.objectContaining({ job: "cronledger.reap", chore: true }),
        expect.objectContaining({ job: "cronledger.prune", chore: true }),
      ],
      invalid: [expect.objectContaining({ job: "wire.unknown", invalid_index: 2 })],
      waiting_for_worker: [expect.objectContaining({ job: yearly.name, count: 1 })],
    });
  });

  it("cronledger cancel --json and POST .../cancel answer in the same shape", async () => {
    const job = await ledger.enqueue(yearly, {}, { runAt: new Date("2099-01-01T00:00:00Z") });
    const printed = await cli("cancel", String(job.id));
    const served = (await (await get(`/admin/scheduler/jobs/${job.id}/cancel`, { method: "POST" })).json()) as Record<string, unknown>;
    expect(printed).toEqual({ version: 1, id: job.id, job_type: yearly.name, was: "queued", attempts: 0, max_attempts: 5, cancelled: true, stop: null });
    expect(served).toEqual({ ...printed, was: "cancelled", cancelled: false });
  });

  it("versions every document, errors included, and names every field in snake_case", async () => {
    const documents = [
      await cli("status", "--config", CONFIG),
      await cli("failures"),
      await cli("tick", "--once", "--config", CONFIG),
      (await (await get("/admin/scheduler/jobs/987654321/retry", { method: "POST" })).json()) as Record<string, unknown>,
      await cli("backfill", yearly.name, "--from", "2020-01-01T00:00:00Z", "--to", "2022-01-01T00:00:00Z", "--dry-run", "--config", CONFIG),
    ];
    const keys = (value: unknown): string[] =>
      Array.isArray(value) ? value.flatMap(keys) : typeof value === "object" && value !== null ? Object.entries(value).flatMap(([key, inner]) => [key, ...keys(inner)]) : [];
    for (const document of documents) {
      expect(document.version).toBe(1);
      // Job counts are keyed by queue and status names, which are data; every other key is a field name.
      const { queues: _queues, totals: _totals, ...fields } = document;
      for (const key of keys(fields)) expect(key).toMatch(/^[a-z][a-z0-9]*(_[a-z0-9]+)*$/);
    }
    expect(documents[3]).toEqual({ version: 1, error: "job_not_found", message: expect.stringContaining("987654321") });
    expect(documents[4]).toMatchObject({ job: yearly.name, dry_run: true, enqueued: 3, slots: [expect.objectContaining({ slot: "2020-01-01T00:00:00.000Z", outcome: "would_enqueue" }), {}, {}] });
  });
});

import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { createAdminHandler } from "../src/admin/handler.js";
import { toNodeListener } from "../src/admin/node-listener.js";
import { OTHER_JOB_TYPE } from "../src/admin/metrics.js";
import { startAdminServer } from "../src/admin/server.js";
import type { EntryDocument, StatusDocument } from "../src/wire/status.js";
import { createCronledger } from "../src/cronledger.js";
import { ConfigError } from "../src/errors.js";
import type { WorkSummary } from "../src/jobs/worker.js";
import { silentLogger } from "../src/log.js";
import { DEFAULT_PRUNE_CRON, DEFAULT_REAP_CRON, PRUNE_JOB, REAP_JOB } from "../src/runtime/chores.js";
import {
  chargeJob,
  createAdminFixture,
  flakyJob,
  LEAKED_PASSWORD,
  LEAKED_SECRETS,
  noopJob,
  okJob,
  SCHEDULE,
  skipJob,
  syncJob,
  type AdminFixture,
} from "./support/admin-fixture.js";
import { deleteFinishedJobs, insertFinishedJobs } from "./support/history.js";
import { parseExposition } from "./support/prometheus.js";

interface FailuresBody {
  failures: { id: number; job_type: string; attempts: number; max_attempts: number; last_error: string | null; failed_at: string; idempotency: string | null }[];
  next_before: string | null;
}

let fixture: AdminFixture;
let summary: WorkSummary;
const T0 = new Date("2026-03-02T10:07:00Z");

beforeAll(async () => {
  fixture = await createAdminFixture(import.meta.url);
  const { ledger } = fixture;
  await ledger.tick({ now: T0 });
  // Two hours on: every hourly-or-faster entry is due; inventory.sync's insert is rejected and quarantined.
  await ledger.tick({ now: new Date(T0.getTime() + 2 * 3_600_000) });
  await ledger.enqueue(okJob, {});
  await ledger.enqueue(skipJob, {});
  await ledger.enqueue(noopJob, {});
  await ledger.enqueue(flakyJob, {});
  await ledger.enqueue(chargeJob, { user: "ann", password: LEAKED_PASSWORD }, { idempotencyKey: "charge-ann-1" });
  await ledger.enqueue(chargeJob, { user: "bob", password: LEAKED_PASSWORD }, { idempotencyKey: "charge-bob-1" });
  // Jobs no worker knows wait for one; the prune chore fails the one that has waited past chores.failUnregisteredAfter (7 days).
  await fixture.rows(sql`insert into cronledger.job_queue (job_name, payload, run_at) values ('ghost.job', '{}'::jsonb, now() - interval '8 days')`);
  await fixture.rows(sql`insert into cronledger.job_queue (job_name, payload) values ('ghost.waiting', '{}'::jsonb)`);
  summary = await ledger.work({ once: true, concurrency: 4 });
  await ledger.prune();
});

afterAll(async () => {
  await fixture?.dispose();
});

describe("authentication", () => {
  const paths = ["/admin/scheduler/status", "/admin/scheduler/failures", "/admin/scheduler", "/metrics"];

  it("answers 401 and no data without the token or with a wrong one", async () => {
    for (const path of paths) {
      const attempts: Record<string, string>[] = [
        {},
        { authorization: "Bearer wrong-token-of-some-length" },
        { authorization: `Bearer ${fixture.token}x` },
        { authorization: `Basic ${Buffer.from("admin:nope").toString("base64")}` },
        { authorization: fixture.token },
      ];
      for (const headers of attempts) {
        const response = await fetch(`${fixture.server.url}${path}`, { headers });
        const body = await response.text();
        expect(response.status, `${path} ${JSON.stringify(headers)}`).toBe(401);
        expect(JSON.parse(body)).toEqual({ version: 1, error: "unauthorized", message: expect.any(String) });
        expect(body).not.toContain("report.ok");
      }
    }
    const retry = await fetch(`${fixture.server.url}/admin/scheduler/jobs/1/retry`, { method: "POST" });
    expect(retry.status).toBe(401);
  });

  it("challenges browsers with Basic on the page and accepts the token as its password", async () => {
    const challenge = await fetch(`${fixture.server.url}/admin/scheduler`);
    expect(challenge.headers.get("www-authenticate")).toMatch(/^Basic /);
    const page = await fetch(`${fixture.server.url}/admin/scheduler`, {
      headers: { authorization: `Basic ${Buffer.from(`ops:${fixture.token}`).toString("base64")}` },
    });
    expect(page.status).toBe(200);
  });

  it("refuses to exist without a token unless told it serves localhost only", async () => {
    expect(() => createAdminHandler(fixture.ledger, {})).toThrow(ConfigError);
    expect(() => createAdminHandler(fixture.ledger, { token: "short" })).toThrow(/at least 16/);
    const local = createAdminHandler(fixture.ledger, { allowUnauthenticatedLocalhost: true });
    expect((await local(new Request("http://127.0.0.1:9/admin/scheduler/status"))).status).toBe(200);
    // A DNS-rebound name pointing at 127.0.0.1 still carries its own Host.
    const rebound = await local(new Request("http://127.0.0.1:9/admin/scheduler/status", { headers: { host: "evil.example:9" } }));
    expect(rebound.status).toBe(401);
  });
});

describe("a body the app's framework already read", () => {
  const pause = (body: string) =>
    new Request("http://127.0.0.1:9/admin/scheduler/entries/pause", { method: "POST", headers: { authorization: `Bearer ${fixture.token}`, "content-type": "application/json" }, body });

  it("the web handler takes it as { body } (object or string), and says what to do when it is missing", async () => {
    const handler = createAdminHandler(fixture.ledger, { token: fixture.token });
    const spent = async () => {
      const request = pause(JSON.stringify({ entry: "no.such.entry" }));
      await request.text();
      return request;
    };
    const missing = await handler(await spent());
    expect(missing.status).toBe(400);
    expect(await missing.json()).toMatchObject({ error: "body_already_read", message: expect.stringContaining("{ body }") });
    // The parsed body is read: the entry it names is looked up (and is not there).
    for (const body of [{ entry: "no.such.entry" }, JSON.stringify({ entry: "no.such.entry" })]) {
      const answered = await handler(await spent(), { body });
      expect(answered.status, JSON.stringify(body)).toBe(404);
      expect(await answered.json()).toMatchObject({ error: "entry_not_found" });
    }
  });

  it("the Node listener takes req.body when a parser read the stream, and answers 400 when it left nothing there", async () => {
    const listener = toNodeListener(createAdminHandler(fixture.ledger, { token: fixture.token }));
    const parsed = new Map<string, unknown>([["/object", { entry: "no.such.entry" }], ["/string", '{"entry":"no.such.entry"}'], ["/nothing", undefined]]);
    const server = createServer((request: IncomingMessage & { body?: unknown }, response) => {
      const which = (request.url ?? "").split("?")[1] ?? "";
      request.url = (request.url ?? "").split("?")[0];
      request.resume();
      request.on("end", () => {
        const body = parsed.get(`/${which}`);
        if (body !== undefined) request.body = body;
        listener(request, response);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const post = (which: string) =>
        fetch(`http://127.0.0.1:${port}/admin/scheduler/entries/pause?${which}`, {
          method: "POST",
          headers: { authorization: `Bearer ${fixture.token}`, "content-type": "application/json" },
          body: JSON.stringify({ entry: "no.such.entry" }),
        });
      for (const which of ["object", "string"]) {
        const answered = await post(which);
        expect(answered.status, which).toBe(404);
        expect(await answered.json()).toMatchObject({ error: "entry_not_found" });
      }
      const nothing = await post("nothing");
      expect(nothing.status).toBe(400);
      expect(await nothing.text()).toContain("req.body");
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe("GET /admin/scheduler/status", () => {
  it("agrees with the ledger table and ledger.status()", async () => {
    const response = await fixture.get("/admin/scheduler/status");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    const body = (await response.json()) as StatusDocument;
    const expected = await fixture.ledger.status();
    // A row still holding the value it was created with has handled no slot: the entry never fired, and shows no last slot.
    const stored = await fixture.rows<{ key: string; slot: string; handled: boolean }>(
      sql`select key, to_char(last_enqueued_slot at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as slot, updated_at <> created_at as handled
          from cronledger.schedule_state`,
    );
    const slots = new Map(stored.filter((row) => row.handled).map((row) => [row.key, row.slot]));

    // The schedule's entries, then the two chores: this ledger leaves `chores` at its default.
    expect(body.entries).toHaveLength(fixture.ledger.entries.length + 2);
    expect(body.entries.map((entry) => entry.chore)).toEqual([...fixture.ledger.entries.map(() => false), true, true]);
    expect(expected.entries).toHaveLength(body.entries.length);
    for (const entry of expected.entries) {
      const shown = body.entries.find((candidate) => candidate.identity === entry.identity);
      expect(shown, entry.identity).toMatchObject({
        key: entry.key,
        job: entry.jobName,
        cron: entry.cron,
        timezone: entry.timezone,
        last_enqueued_slot: slots.get(entry.key) ?? null,
        next_run_at: entry.nextRunAt?.toISOString() ?? null,
        chore: entry.chore,
      });
    }
    const ok = body.entries.find((entry) => entry.cron === "*/15 * * * *");
    expect(ok?.last_enqueued_slot).toBe("2026-03-02T12:00:00.000Z");

    const [clock] = await fixture.rows<{ ms: number }>(sql`select (extract(epoch from now()) * 1000)::float8 as ms`);
    expect(Math.abs(Date.parse(body.database_now) - (clock?.ms ?? 0))).toBeLessThan(5_000);

    const counts = await fixture.rows<{ queue: string; status: string; n: number }>(
      sql`select queue, status, count(*)::int as n from cronledger.jobs group by queue, status`,
    );
    for (const row of counts) expect(body.queues[row.queue]?.[row.status]).toBe(row.n);
    expect(body.totals.failed).toBe(counts.filter((row) => row.status === "failed").reduce((sum, row) => sum + row.n, 0));
    expect(body.totals.cancelled).toBe(0);
    expect(JSON.stringify(body)).not.toContain(LEAKED_PASSWORD);
    // No worker runs now (so every ready job waits for one; the flaky job's retry may have come due), and none
    // ever knew ghost.waiting: it is listed with the instant it became ready.
    const [ghost] = await fixture.rows<{ run_at: string }>(
      sql`select to_char(run_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as run_at from cronledger.jobs where job_name = 'ghost.waiting'`,
    );
    expect(body.waiting_for_worker.find((row) => row.job === "ghost.waiting")).toEqual({ job: "ghost.waiting", count: 1, oldest_since: ghost?.run_at });
    expect(body.waiting_for_worker.every((row) => row.job === "ghost.waiting" || row.job === flakyJob.name)).toBe(true);
  });

  it("lists broken entries with their problems: quarantined by a tick, and never firing", async () => {
    const body = (await (await fixture.get("/admin/scheduler/status")).json()) as StatusDocument;
    const codes = Object.fromEntries(body.broken.map((broken) => [broken.job === "report.ok" ? "feb30" : broken.job, broken.problems.map((problem) => problem.code)]));
    expect(codes).toEqual({ "inventory.sync": ["quarantined"], feb30: ["never_matches"] });
    const sync = body.broken.find((broken) => broken.job === "inventory.sync");
    expect(sync?.problems[0]?.message).toContain("inventory backend is read-only");
    expect(body.entries.find((entry) => entry.job === "inventory.sync")?.problems).toHaveLength(1);
    expect(body.entries.find((entry) => entry.job === "inventory.sync")?.quarantine).toMatchObject({ count: 1 });

    // The quarantine lives in the ledger row: a process that never ticked shows it the same way.
    const other = createCronledger({
      database: fixture.ledger.database,
      jobs: [okJob, skipJob, noopJob, flakyJob, chargeJob, syncJob],
      schedule: SCHEDULE,
      logger: silentLogger,
      metrics: false,
    });
    const seen = (await other.status()).entries.find((entry) => entry.jobName === "inventory.sync");
    expect(seen?.quarantine).toMatchObject({ count: 1 });
    expect(seen?.quarantine?.reason).toContain("inventory backend is read-only");
    expect(seen?.quarantine?.until.getTime()).toBe(Date.parse(body.entries.find((entry) => entry.job === "inventory.sync")?.quarantine?.until ?? ""));
    expect(seen?.problems.map((problem) => problem.code)).toEqual(["quarantined"]);
    await other.close();
  });
});

describe("GET /admin/scheduler/failures", () => {
  it("lists terminal failures newest first, filtered by job_type, without payloads", async () => {
    const all = (await (await fixture.get("/admin/scheduler/failures")).json()) as FailuresBody;
    expect(all.failures.map((failure) => failure.job_type).sort()).toEqual(["billing.charge", "billing.charge", "ghost.job"]);
    const times = all.failures.map((failure) => Date.parse(failure.failed_at));
    expect([...times].sort((a, b) => b - a)).toEqual(times);

    const charges = (await (await fixture.get("/admin/scheduler/failures?job_type=billing.charge")).json()) as FailuresBody;
    expect(charges.failures).toHaveLength(2);
    for (const failure of charges.failures) {
      expect(failure).toMatchObject({ job_type: "billing.charge", attempts: 1, max_attempts: 1 });
      expect(failure.idempotency).toMatch(/^charge-(ann|bob)-1$/);
      expect(failure.last_error).toMatch(/^Error: charge failed: upstream said 401/);
    }
    const ghosts = (await (await fixture.get("/admin/scheduler/failures?job_type=ghost.job")).json()) as FailuresBody;
    expect(ghosts.failures).toHaveLength(1);
    expect(ghosts.failures[0]?.last_error).toContain("job_not_registered");
    const none = (await (await fixture.get("/admin/scheduler/failures?job_type=report.ok")).json()) as FailuresBody;
    expect(none.failures).toEqual([]);
  });

  it("pages with limit and the before cursor", async () => {
    const first = (await (await fixture.get("/admin/scheduler/failures?limit=2")).json()) as FailuresBody;
    expect(first.failures).toHaveLength(2);
    expect(first.next_before).not.toBeNull();
    const second = (await (await fixture.get(`/admin/scheduler/failures?limit=2&before=${first.next_before}`)).json()) as FailuresBody;
    expect(second.failures).toHaveLength(1);
    expect(second.next_before).toBeNull();
    const ids = [...first.failures, ...second.failures].map((failure) => failure.id);
    expect(new Set(ids).size).toBe(3);
    expect((await fixture.get("/admin/scheduler/failures?limit=0")).status).toBe(400);
    expect((await fixture.get("/admin/scheduler/failures?limit=many")).status).toBe(400);
    expect((await fixture.get("/admin/scheduler/failures?before=yesterday")).status).toBe(400);
  });
});

describe("redaction", () => {
  it("keeps the bearer token and the payload password out of the stored row, the endpoint, the page and the logs", async () => {
    const stored = await fixture.rows<{ last_error: string }>(sql`select last_error from cronledger.jobs where job_name = 'billing.charge' and status = 'failed'`);
    expect(stored).toHaveLength(2);
    const surfaces = {
      stored: stored.map((row) => row.last_error).join("\n"),
      failures: await (await fixture.get("/admin/scheduler/failures")).text(),
      status: await (await fixture.get("/admin/scheduler/status")).text(),
      page: await (await fixture.get("/admin/scheduler")).text(),
      logs: fixture.logs.join("\n"),
    };
    expect(surfaces.stored).toContain("Authorization: [redacted]");
    expect(surfaces.logs).toContain("charge failed");
    // What the handler logged through ctx.log arrives, without its secrets.
    expect(surfaces.logs).toContain("posting with Authorization: [redacted]");
    expect(surfaces.logs).toContain('"payload":"[redacted]"');
    expect(surfaces.stored).toContain("redis://[redacted]@cache.internal:6379/0");
    expect(surfaces.stored).toContain("sealed box [redacted] dropped");
    for (const [surface, text] of Object.entries(surfaces)) {
      for (const secret of LEAKED_SECRETS) expect(text, surface).not.toContain(secret);
    }
  });

  it("redacts rows that were stored without redaction", async () => {
    const [id] = await insertFinishedJobs(fixture.ledger.database.db, [
      { jobName: "legacy.job", status: "failed", lastError: "x-api-key: raw-legacy-key", finishedAt: new Date(Date.now() - 86_400_000) },
    ]);
    const body = (await (await fixture.get("/admin/scheduler/failures?job_type=legacy.job")).json()) as FailuresBody;
    expect(body.failures[0]).toMatchObject({ id, last_error: "x-api-key: [redacted]" });
    await deleteFinishedJobs(fixture.ledger.database.db, [id!]);
  });
});

describe("POST /admin/scheduler/jobs/:id/retry", () => {
  it("re-enqueues a failed job as a new queued job with a derived idempotency key, once", async () => {
    const [failed] = await fixture.rows<{ id: number; payload: unknown }>(
      sql`select id::float8 as id, payload from cronledger.jobs where idempotency_key = 'charge-ann-1'`,
    );
    const response = await fixture.get(`/admin/scheduler/jobs/${failed?.id}/retry`, { method: "POST" });
    expect(response.status).toBe(201);
    const body = (await response.json()) as { id: number; retry_of: number; created: boolean; job_type: string };
    expect(body).toMatchObject({ retry_of: failed?.id, created: true, job_type: "billing.charge" });
    const [retried] = await fixture.rows<{ status: string; idempotency_key: string; payload: unknown; attempts: number; max_attempts: number }>(
      sql`select status, idempotency_key, payload, attempts, max_attempts from cronledger.jobs where id = ${body.id}`,
    );
    expect(retried).toEqual({ status: "queued", idempotency_key: "charge-ann-1#retry-1", payload: failed?.payload, attempts: 0, max_attempts: 1 });

    const again = await fixture.get(`/admin/scheduler/jobs/${failed?.id}/retry`, { method: "POST" });
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ id: body.id, created: false });
    const [original] = await fixture.rows<{ status: string }>(sql`select status from cronledger.jobs where id = ${failed?.id}`);
    expect(original?.status).toBe("failed");
  });

  it("refuses jobs that are not failed, unknown ids, wrong methods and cross-site posts", async () => {
    const [succeeded] = await fixture.rows<{ id: number }>(sql`select id::float8 as id from cronledger.jobs where status = 'succeeded' limit 1`);
    const notFailed = await fixture.get(`/admin/scheduler/jobs/${succeeded?.id}/retry`, { method: "POST" });
    expect(notFailed.status).toBe(409);
    expect(await notFailed.json()).toMatchObject({ error: "job_not_failed" });
    expect((await fixture.get("/admin/scheduler/jobs/999999/retry", { method: "POST" })).status).toBe(404);
    expect((await fixture.get("/admin/scheduler/jobs/abc/retry", { method: "POST" })).status).toBe(400);
    expect((await fixture.get("/admin/scheduler/jobs/1/retry")).status).toBe(405);
    const crossSite = await fixture.get("/admin/scheduler/jobs/1/retry", { method: "POST", headers: { origin: "https://evil.example" } });
    expect(crossSite.status).toBe(403);
  });
});

describe("GET /metrics", () => {
  it("serves parseable Prometheus text whose counts match the jobs run", async () => {
    const response = await fixture.get("/metrics");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const metrics = parseExposition(await response.text());
    const jobs = (status: string, jobType?: string) => metrics.value("cronledger_jobs_total", { status, ...(jobType ? { job_type: jobType } : {}) });

    const attempts = await fixture.rows<{ job_name: string; status: string; outcome: string | null; attempts: number }>(
      sql`select job_name, status, outcome, attempts from cronledger.jobs where attempts > 0`,
    );
    expect(jobs("started")).toBe(summary.claimed);
    expect(jobs("started")).toBe(attempts.reduce((sum, row) => sum + row.attempts, 0));
    expect(jobs("done")).toBe(summary.succeeded);
    expect(jobs("done")).toBe(attempts.filter((row) => row.status === "succeeded" && row.outcome !== "skip" && row.outcome !== "noop").length);
    expect(jobs("skip", skipJob.name)).toBe(1);
    expect(jobs("noop", noopJob.name)).toBe(1);
    expect(jobs("retry", flakyJob.name)).toBe(1);
    expect(jobs("panicked", chargeJob.name)).toBe(2);
    // ghost.job was failed by the prune chore without an attempt, not by a worker.
    expect(jobs("panicked", OTHER_JOB_TYPE)).toBe(0);
    // ghost.waiting: no worker knows it, so it waits for one (a job_type this process does not know, so _other).
    expect(metrics.value("cronledger_jobs_waiting_for_worker", { job_type: OTHER_JOB_TYPE })).toBe(1);
    expect(metrics.value("cronledger_jobs_waiting_for_worker_oldest_seconds", { job_type: OTHER_JOB_TYPE })).toBeGreaterThan(0);
    expect(jobs("panicked")).toBe(attempts.filter((row) => row.status === "failed").length);
    // Terminal failures only (a failed attempt that will be retried is not one), every failure ticket: the worker's and
    // ghost.job, which the prune chore failed as unregistered (counted as _other).
    expect(metrics.value("cronledger_failures_total", { job_type: chargeJob.name })).toBe(summary.failed);
    expect(metrics.value("cronledger_failures_total", { job_type: OTHER_JOB_TYPE })).toBe(1);
    const tickets = await fixture.rows<{ n: number }>(sql`select count(*)::int as n from cronledger.jobs where status = 'failed'`);
    expect(metrics.samples.filter((sample) => sample.name === "cronledger_failures_total").reduce((sum, sample) => sum + sample.value, 0)).toBe(tickets[0]?.n);
    expect(metrics.samples.some((sample) => sample.labels.job_type === "ghost.job")).toBe(false);
    expect(metrics.value("cronledger_job_duration_seconds_count")).toBe(summary.claimed);

    const scheduled = await fixture.rows<{ n: number }>(sql`select count(*)::int as n from cronledger.jobs where schedule_key is not null`);
    expect(metrics.value("cronledger_schedule_slots_total", { outcome: "enqueued" })).toBe(scheduled[0]?.n);
    expect(metrics.value("cronledger_schedule_slots_total", { outcome: "quarantined" })).toBe(1);
    expect(metrics.value("cronledger_tick_duration_seconds_count")).toBe(2);
    expect(metrics.value("cronledger_init_failure")).toBe(0);
  });
});

const bearer = () => ({ authorization: `Bearer ${fixture.token}` });

describe("basePath", () => {
  it("serves every route under the base over a real socket, and 404s outside it, token or not", async () => {
    const server = await startAdminServer(fixture.ledger, { port: 0, token: fixture.token, basePath: "ops/" });
    try {
      expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/ops$/);
      const origin = new URL(server.url).origin;
      const root = (await (await fixture.get("/admin/scheduler/status")).json()) as StatusDocument;
      const status = await fetch(`${origin}/ops/admin/scheduler/status`, { headers: bearer() });
      expect(status.status).toBe(200);
      const body = (await status.json()) as StatusDocument;
      expect(body.entries.map((entry) => entry.identity)).toEqual(root.entries.map((entry) => entry.identity));
      expect((await fetch(`${origin}/ops/admin/scheduler/failures?job_type=billing.charge`, { headers: bearer() })).status).toBe(200);
      const page = await fetch(`${origin}/ops/admin/scheduler`, { headers: bearer() });
      expect(page.status).toBe(200);
      expect(await page.text()).toContain("<h1>Schedule</h1>");
      const metrics = await fetch(`${origin}/ops/metrics`, { headers: bearer() });
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toContain("cronledger_jobs_total");

      const outside = ["/admin/scheduler/status", "/admin/scheduler", "/metrics", "/ops", "/opsx/admin/scheduler/status", "/OPS/metrics", "/ops/../admin/scheduler/status"];
      for (const path of outside) {
        for (const headers of [bearer(), {}] as Record<string, string>[]) {
          const response = await fetch(`${origin}${path}`, { headers });
          const text = await response.text();
          expect(response.status, `${path} ${JSON.stringify(headers)}`).toBe(404);
          expect(response.headers.get("www-authenticate")).toBeNull();
          expect(text).not.toContain("report.ok");
        }
      }
    } finally {
      await server.close();
    }
  });

  it("still requires the token under the base, and challenges browsers on the page", async () => {
    const server = await startAdminServer(fixture.ledger, { port: 0, token: fixture.token, basePath: "/ops" });
    try {
      for (const path of ["/admin/scheduler/status", "/admin/scheduler/failures", "/admin/scheduler", "/metrics", "/admin/nothing"]) {
        for (const headers of [{}, { authorization: "Bearer wrong-token-of-some-length" }] as Record<string, string>[]) {
          const response = await fetch(`${server.url}${path}`, { headers });
          const text = await response.text();
          expect(response.status, `${path} ${JSON.stringify(headers)}`).toBe(401);
          expect(text).not.toContain("report.ok");
        }
      }
      expect((await fetch(`${server.url}/admin/scheduler/jobs/1/retry`, { method: "POST" })).status).toBe(401);
      const challenge = await fetch(`${server.url}/admin/scheduler`);
      expect(challenge.headers.get("www-authenticate")).toMatch(/^Basic /);
      const basic = await fetch(`${server.url}/admin/scheduler`, { headers: { authorization: `Basic ${Buffer.from(`ops:${fixture.token}`).toString("base64")}` } });
      expect(basic.status).toBe(200);
    } finally {
      await server.close();
    }
  });

  it("sends redirects back under the base", async () => {
    const server = await startAdminServer(fixture.ledger, { port: 0, token: fixture.token, basePath: "/internal/cron" });
    try {
      const slash = await fetch(`${server.url}/admin/scheduler/`, { headers: bearer(), redirect: "manual" });
      expect(slash.status).toBe(308);
      expect(new URL(slash.headers.get("location") ?? "", slash.url).pathname).toBe("/internal/cron/admin/scheduler");

      const [failed] = await fixture.rows<{ id: number }>(sql`select id::float8 as id from cronledger.jobs where idempotency_key = 'charge-bob-1'`);
      const retry = await fetch(`${server.url}/admin/scheduler/jobs/${failed?.id}/retry`, {
        method: "POST",
        headers: { ...bearer(), accept: "text/html" },
        redirect: "manual",
      });
      expect(retry.status).toBe(303);
      const back = new URL(retry.headers.get("location") ?? "", retry.url);
      expect(`${back.pathname}${back.hash}`).toBe(`/internal/cron/admin/scheduler#failure-${failed?.id}`);
      expect(back.searchParams.get("retried")).toBe(String(failed?.id));
    } finally {
      await server.close();
    }
  });

  it("normalises the base, and refuses one that is not a plain path with a ConfigError", async () => {
    const request = (path: string) => new Request(`http://127.0.0.1:9${path}`, { headers: bearer() });
    for (const basePath of ["ops", "/ops", "/ops/"]) {
      const handler = createAdminHandler(fixture.ledger, { token: fixture.token, basePath });
      expect((await handler(request("/ops/admin/scheduler/status"))).status, basePath).toBe(200);
      expect((await handler(request("/admin/scheduler/status"))).status, basePath).toBe(404);
    }
    for (const basePath of ["", "/"]) {
      const handler = createAdminHandler(fixture.ledger, { token: fixture.token, basePath });
      expect((await handler(request("/admin/scheduler/status"))).status, JSON.stringify(basePath)).toBe(200);
    }
    for (const basePath of ["https://example.com/ops", "/ops?x=1", "/ops#top", "//ops", "/a//b", "/ops/../admin", "/./ops", "/my ops", "/ops//"]) {
      expect(() => createAdminHandler(fixture.ledger, { token: fixture.token, basePath }), basePath).toThrow(ConfigError);
      expect(() => createAdminHandler(fixture.ledger, { token: fixture.token, basePath }), basePath).toThrow(/Invalid admin basePath .*"\/ops"/);
    }
  });
});

describe("chore entries in the status", () => {
  const T1 = new Date(T0.getTime() + 3 * 3_600_000);
  const chore = (body: StatusDocument, job: string): EntryDocument | undefined => body.entries.find((entry) => entry.job === job);

  beforeAll(async () => {
    // Another replica running the chores: its ticks fire them in the shared ledger.
    const replica = createCronledger({ database: fixture.ledger.database, chores: true, logger: silentLogger, metrics: false });
    await replica.tick({ now: T1 });
    await replica.tick({ now: new Date(T1.getTime() + 20_000) });
    await replica.close();
  });

  it("lists reap and prune, marked as chores, with the slots the replica that runs them fired", async () => {
    const body = (await (await fixture.get("/admin/scheduler/status")).json()) as StatusDocument;
    expect(body.entries.filter((entry) => entry.chore).map((entry) => entry.job)).toEqual([REAP_JOB, PRUNE_JOB]);
    expect(body.entries.filter((entry) => !entry.chore).map((entry) => entry.identity)).toEqual(fixture.ledger.entries.map((entry) => entry.identity));
    expect(chore(body, REAP_JOB)).toMatchObject({ cron: DEFAULT_REAP_CRON, last_enqueued_slot: "2026-03-02T13:07:15.000Z", problems: [] });
    // Its row was created at 13:07, exactly a prune slot, and no later tick handled a slot: it never fired, so it shows
    // when it was created instead (and, by the real database clock months later, it is late).
    expect(chore(body, PRUNE_JOB)).toMatchObject({ cron: DEFAULT_PRUNE_CRON, last_enqueued_slot: null, state: "late", problems: [] });
    expect(chore(body, PRUNE_JOB)?.created_at).not.toBeNull();
    expect(Date.parse(chore(body, REAP_JOB)?.next_run_at ?? "")).toBeGreaterThan(Date.parse(body.database_now));
    expect(body.broken.map((broken) => broken.job)).not.toContain(REAP_JOB);
  });

  it("leaves the chores out of a ledger created with chores: false, though their ledger rows exist", async () => {
    const rows = await fixture.rows<{ n: number }>(sql`select count(*)::int as n from cronledger.schedule_state where job_name in (${REAP_JOB}, ${PRUNE_JOB})`);
    expect(rows[0]?.n).toBe(2);
    const off = createCronledger({
      database: fixture.ledger.database,
      jobs: [okJob, chargeJob, syncJob],
      schedule: SCHEDULE,
      chores: false,
      logger: silentLogger,
      metrics: false,
    });
    try {
      const status = await off.status();
      expect(status.entries.map((entry) => entry.chore)).toEqual(SCHEDULE.map(() => false));
      const handler = createAdminHandler(off, { token: fixture.token });
      const body = (await (await handler(new Request("http://127.0.0.1:9/admin/scheduler/status", { headers: bearer() }))).json()) as StatusDocument;
      expect(body.entries).toHaveLength(SCHEDULE.length);
      expect(body.entries.some((entry) => entry.chore || entry.job.startsWith("cronledger."))).toBe(false);
    } finally {
      await off.close();
    }
  });

  it("shows the chores with the crons this ledger gives them", async () => {
    const custom = createCronledger({ database: fixture.ledger.database, chores: { reapCron: "*/5 * * * * *", pruneCron: "17 3 * * *" }, logger: silentLogger, metrics: false });
    try {
      const status = await custom.status();
      expect(status.entries.map(({ jobName, cron, chore, lastEnqueuedSlot }) => ({ jobName, cron, chore, lastEnqueuedSlot }))).toEqual([
        { jobName: REAP_JOB, cron: "*/5 * * * * *", chore: true, lastEnqueuedSlot: null },
        { jobName: PRUNE_JOB, cron: "17 3 * * *", chore: true, lastEnqueuedSlot: null },
      ]);
    } finally {
      await custom.close();
    }
  });
});

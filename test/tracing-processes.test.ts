import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { silentLogger } from "../src/log.js";
import { watch } from "./support/child.js";
import { createTestDatabase } from "./support/database.js";

/**
 * The acceptance of traces: a trace started by an HTTP client continues in
 * a web process whose request handler enqueues in its transaction, and the
 * job's attempts, run by a worker in another OS process, are linked to that
 * enqueue, retries as spans of their own with the exception recorded. Each
 * process exports to memory and writes its finished spans to a file read
 * here. Then, an application where `@opentelemetry/api` cannot be resolved:
 * cronledger never asks for it unless `tracing` is on, and says what to
 * install when it is.
 */

const TRACED_APP = fileURLToPath(new URL("./fixtures/traced-app.ts", import.meta.url));
const UNTRACED_APP = fileURLToPath(new URL("./fixtures/untraced-app.ts", import.meta.url));
const WITHOUT_OPENTELEMETRY = fileURLToPath(new URL("./fixtures/without-opentelemetry.mjs", import.meta.url));
const TIMEOUT_MS = 60_000;

interface ExportedSpan {
  readonly name: string;
  readonly scope: string;
  readonly kind: SpanKind;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | null;
  readonly links: readonly { readonly traceId: string; readonly spanId: string }[];
  readonly attributes: Record<string, unknown>;
  readonly status: { readonly code: SpanStatusCode; readonly message?: string };
  readonly events: readonly { readonly name: string; readonly attributes: Record<string, unknown> }[];
}

const only = <T>(items: readonly T[]): T => {
  expect(items).toHaveLength(1);
  return items[0] as T;
};

describe("a trace from an HTTP request to the job's attempts, across two processes", () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let ledger: Cronledger;
  let dir: string;

  beforeAll(async () => {
    database = await createTestDatabase("tracing-processes");
    ledger = createCronledger({ database: { url: database.url, poolSize: 2 }, logger: silentLogger, metrics: false });
    await ledger.migrate();
    await query(ledger.database.db, sql`create table orders (id int primary key)`);
    dir = mkdtempSync(join(tmpdir(), "cronledger-traces-"));
  });

  afterAll(async () => {
    await ledger?.close();
    await database?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const spawnApp = (role: "web" | "worker", spansFile: string) =>
    watch(process.execPath, ["--import", "tsx", TRACED_APP, role], { env: { ...process.env, DATABASE_URL: database.url, SPANS_FILE: spansFile } });
  const readSpans = (file: string) => JSON.parse(readFileSync(file, "utf8")) as ExportedSpan[];

  it("links every attempt to the enqueue of the request's transaction; the handler's spans are the attempt's children", async () => {
    const webSpans = join(dir, "web.json");
    const workerSpans = join(dir, "worker.json");
    const web = spawnApp("web", webSpans);
    const port = Number(/listening (\d+)/.exec(await web.waitFor(/listening \d+/, TIMEOUT_MS))?.[1]);

    // The caller's trace: what an instrumented HTTP client sends.
    const traceId = randomBytes(16).toString("hex");
    const clientSpanId = randomBytes(8).toString("hex");
    const post = async (order: Record<string, unknown>) => {
      const response = await fetch(`http://127.0.0.1:${port}/orders`, {
        method: "POST",
        headers: { "content-type": "application/json", traceparent: `00-${traceId}-${clientSpanId}-01` },
        body: JSON.stringify(order),
      });
      return { status: response.status, body: (await response.json()) as { jobId?: number } };
    };
    const shipped = await post({ orderId: 1, job: "ship" });
    const notified = await post({ orderId: 2, job: "notify" });
    const rolledBack = await post({ orderId: 3, job: "ship", rollback: true });
    expect([shipped.status, notified.status, rolledBack.status]).toEqual([201, 201, 409]);
    web.child.kill("SIGTERM");
    expect((await web.exited).code).toBe(0);

    const fromWeb = readSpans(webSpans);
    const servers = fromWeb.filter((span) => span.kind === SpanKind.SERVER);
    expect(servers).toHaveLength(3);
    for (const server of servers) expect({ traceId: server.traceId, parent: server.parentSpanId }).toEqual({ traceId, parent: clientSpanId });
    const enqueues = fromWeb.filter((span) => span.scope === "cronledger" && span.name === "enqueue default");
    expect(enqueues).toHaveLength(3);
    for (const enqueue of enqueues) {
      expect(enqueue.kind).toBe(SpanKind.PRODUCER);
      expect(enqueue.traceId).toBe(traceId);
      expect(servers.map((server) => server.spanId)).toContain(enqueue.parentSpanId);
    }
    const producerOf = (jobId: number | undefined) => only(enqueues.filter((span) => span.attributes["messaging.message.id"] === String(jobId)));
    const shipProducer = producerOf(shipped.body.jobId);
    const notifyProducer = producerOf(notified.body.jobId);
    // Each job row carries its enqueue's context; the rolled-back request's job is not there.
    const stored = await query<{ id: number; traceparent: string }>(
      ledger.database.db,
      sql`select id::float8 as id, trace_context->>'traceparent' as traceparent from cronledger.job_queue order by id`,
    );
    expect(stored).toEqual([
      { id: shipped.body.jobId, traceparent: `00-${traceId}-${shipProducer.spanId}-01` },
      { id: notified.body.jobId, traceparent: `00-${traceId}-${notifyProducer.spanId}-01` },
    ]);

    const worker = spawnApp("worker", workerSpans);
    await worker.waitFor(/drained/, TIMEOUT_MS);
    expect((await worker.exited).code).toBe(0);
    const fromWorker = readSpans(workerSpans);
    const attempts = fromWorker.filter((span) => span.scope === "cronledger" && span.name === "process default");
    expect(attempts).toHaveLength(4);
    for (const attempt of attempts) {
      expect(attempt.kind).toBe(SpanKind.CONSUMER);
      // A trace of its own, linked to the enqueue in the request's trace.
      expect(attempt.parentSpanId).toBeNull();
      expect(attempt.traceId).not.toBe(traceId);
    }

    const shipAttempt = only(attempts.filter((span) => span.attributes["messaging.message.id"] === String(shipped.body.jobId)));
    expect(shipAttempt.links).toEqual([{ traceId, spanId: shipProducer.spanId }]);
    expect(shipAttempt.attributes).toMatchObject({ "cronledger.job.name": "orders.ship", "cronledger.job.attempt": 1, "cronledger.job.outcome": "done" });
    const label = only(fromWorker.filter((span) => span.name === "print label"));
    expect({ traceId: label.traceId, parent: label.parentSpanId }).toEqual({ traceId: shipAttempt.traceId, parent: shipAttempt.spanId });

    const notifyAttempts = attempts
      .filter((span) => span.attributes["messaging.message.id"] === String(notified.body.jobId))
      .sort((a, b) => Number(a.attributes["cronledger.job.attempt"]) - Number(b.attributes["cronledger.job.attempt"]));
    expect(notifyAttempts.map((span) => [span.attributes["cronledger.job.attempt"], span.attributes["cronledger.job.outcome"], span.status.code])).toEqual([
      [1, "retry", SpanStatusCode.ERROR],
      [2, "retry", SpanStatusCode.ERROR],
      [3, "done", SpanStatusCode.UNSET],
    ]);
    for (const [index, span] of notifyAttempts.entries()) {
      expect(span.links).toEqual([{ traceId, spanId: notifyProducer.spanId }]);
      const exceptions = span.events.filter((event) => event.name === "exception");
      if (index === 2) {
        expect(exceptions).toEqual([]);
        continue;
      }
      expect(span.attributes["error.type"]).toBe("TypeError");
      expect(only(exceptions).attributes).toMatchObject({
        "exception.type": "TypeError",
        "exception.message": `mail relay refused the message (attempt ${index + 1})`,
        "exception.stacktrace": expect.stringContaining("traced-app.ts"),
      });
    }

    const claims = fromWorker.filter((span) => span.scope === "cronledger" && span.name === "claim default");
    expect(claims.length).toBeGreaterThan(0);
    for (const claim of claims) expect(claim.kind).toBe(SpanKind.CLIENT);
    expect(claims.reduce((sum, claim) => sum + Number(claim.attributes["messaging.batch.message_count"]), 0)).toBe(4);
  }, 2 * TIMEOUT_MS);
});

describe("an application where @opentelemetry/api cannot be resolved", () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;

  beforeAll(async () => {
    database = await createTestDatabase("tracing-absent");
  });

  afterAll(async () => {
    await database?.drop();
  });

  it("enqueues, ticks and works without asking for it, and names the package to install when tracing is asked for", async () => {
    const app = watch(process.execPath, ["--import", WITHOUT_OPENTELEMETRY, "--import", "tsx", UNTRACED_APP], {
      env: { ...process.env, DATABASE_URL: database.url },
    });
    const finished = await app.exited;
    expect(finished.code, finished.stderr).toBe(0);
    const [before, after] = finished.stderr.split("-- asking for tracing --\n");
    // Not one attempt to resolve it until the option asks, then the one that fails.
    expect(before?.match(/^blocked .*$/gm) ?? []).toEqual([]);
    // (Through tsx, the failed require() is tried again with each extension: "@opentelemetry/api.js"...)
    expect(after).toMatch(/^blocked @opentelemetry\/api$/m);
    expect(after?.match(/^blocked .*$/gm)?.every((line) => line.startsWith("blocked @opentelemetry/api"))).toBe(true);
    expect(JSON.parse(finished.stdout)).toEqual({
      ran: 1,
      created: 1,
      missing: {
        code: "dependency_missing",
        packageName: "@opentelemetry/api",
        message: expect.stringContaining("run `npm install @opentelemetry/api`"),
      },
    });
  }, TIMEOUT_MS);
});

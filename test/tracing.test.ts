import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { ConfigError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { createTestDatabase } from "./support/database.js";

/**
 * Traces in one process, with the SDK's in-memory exporter: what each span
 * is, what the job row stores, how an attempt relates to its enqueue, the
 * pass, the claim, run-now and backfill, and that nothing is traced without
 * the option. The same trace across two OS processes, from an HTTP request
 * to a worker, is test/tracing-processes.test.ts.
 */

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
// The SDK's defaults: the AsyncLocalStorage context manager and the W3C trace context and baggage propagators.
provider.register();
const appTracer = trace.getTracer("the-app");

/** Finished spans of cronledger's tracer, in the order they ended. */
const ours = () => exporter.getFinishedSpans().filter((span) => span.instrumentationScope.name === "cronledger");
const named = (name: string) => ours().filter((span) => span.name === name);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;
const only = <T>(items: readonly T[]): T => {
  expect(items).toHaveLength(1);
  return items[0] as T;
};

let flakyCalls = 0;
const ship = defineJob({
  name: "orders.ship",
  payload: z.object({ orderId: z.number() }),
  async run({ orderId }) {
    // A span the handler makes is a child of its attempt's span.
    await appTracer.startActiveSpan("ship.label", async (span) => {
      span.setAttribute("order", orderId);
      span.end();
    });
  },
});
const flaky = defineJob({
  name: "orders.flaky",
  retry: { maxAttempts: 3, delayMs: () => 0 },
  run() {
    flakyCalls += 1;
    if (flakyCalls < 3) throw new Error(`carrier unavailable (call ${flakyCalls}) token=sk_live_abcdefghijklmnopqrstuvwx`);
  },
});
const nightly = defineJob({ name: "reports.nightly", run() {} });

describe("tracing with the in-memory exporter", () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let ledger: Cronledger;

  beforeAll(async () => {
    database = await createTestDatabase("tracing");
    ledger = createCronledger({
      database: { url: database.url, poolSize: 4 },
      jobs: [ship, flaky, nightly],
      schedule: [{ job: nightly, cron: "0 3 * * *", key: "nightly" }],
      logger: silentLogger,
      metrics: false,
      tracing: true,
    });
    await ledger.migrate();
  });

  afterAll(async () => {
    await ledger?.close();
    await database?.drop();
  });

  beforeEach(() => exporter.reset());

  const storedContext = async (jobId: number) =>
    (await query<{ trace_context: Record<string, string> | null }>(ledger.database.db, sql`select trace_context from cronledger.jobs_trace where id = ${jobId}`))[0]
      ?.trace_context;

  beforeAll(async () => {
    // Queue and history together, for reading a job's stored context wherever it is.
    await query(
      ledger.database.db,
      sql.raw(`create view cronledger.jobs_trace as select id, trace_context from cronledger.job_queue union all select id, trace_context from cronledger.job_history`),
    );
  });

  it("stores the enqueue's producer span with the job; the attempt links to it and its handler's spans are children", async () => {
    const request = appTracer.startSpan("POST /orders", { kind: SpanKind.SERVER });
    const job = await context.with(trace.setSpan(context.active(), request), () => ledger.enqueue(ship, { orderId: 7 }));
    request.end();

    const send = only(named("enqueue default"));
    expect(send.kind).toBe(SpanKind.PRODUCER);
    expect(parentOf(send)).toBe(request.spanContext().spanId);
    expect(send.spanContext().traceId).toBe(request.spanContext().traceId);
    expect(send.attributes).toMatchObject({
      "messaging.system": "cronledger",
      "messaging.operation.name": "enqueue",
      "messaging.operation.type": "send",
      "messaging.destination.name": "default",
      "messaging.message.id": String(job.id),
      "cronledger.job.name": "orders.ship",
      "cronledger.job.created": true,
    });
    const stored = await storedContext(job.id);
    expect(stored?.traceparent).toBe(`00-${send.spanContext().traceId}-${send.spanContext().spanId}-01`);

    await ledger.work({ once: true });
    const process = only(named("process default"));
    expect(process.kind).toBe(SpanKind.CONSUMER);
    // A link, not a parent: the attempt is the root of its own trace.
    expect(parentOf(process)).toBeUndefined();
    expect(process.links.map((link) => link.context.spanId)).toEqual([send.spanContext().spanId]);
    expect(process.links[0]?.context.traceId).toBe(request.spanContext().traceId);
    expect(process.attributes).toMatchObject({
      "messaging.system": "cronledger",
      "messaging.operation.name": "process",
      "messaging.operation.type": "process",
      "messaging.destination.name": "default",
      "messaging.message.id": String(job.id),
      "cronledger.job.name": "orders.ship",
      "cronledger.job.attempt": 1,
      "cronledger.job.max_attempts": 5,
      "cronledger.job.outcome": "done",
    });
    expect(process.status.code).toBe(SpanStatusCode.UNSET);
    const label = only(exporter.getFinishedSpans().filter((span) => span.name === "ship.label"));
    expect(parentOf(label)).toBe(process.spanContext().spanId);
    expect(label.spanContext().traceId).toBe(process.spanContext().traceId);

    const claim = only(named("claim").concat(named("claim default")));
    expect(claim.kind).toBe(SpanKind.CLIENT);
    expect(parentOf(claim)).toBeUndefined();
    expect(claim.attributes).toMatchObject({ "messaging.operation.type": "receive", "messaging.batch.message_count": 1 });
  });

  it("records each failed attempt as its own span, with the exception (redacted) and an error status", async () => {
    flakyCalls = 0;
    const job = await ledger.enqueue(flaky);
    const send = only(named("enqueue default"));
    expect(parentOf(send)).toBeUndefined();
    // A drain stops at what is ready when it looks: each retry is the next drain's.
    for (let drain = 0; drain < 3; drain += 1) await ledger.work({ once: true });
    expect(flakyCalls).toBe(3);

    const attempts = named("process default").sort((a, b) => Number(a.attributes["cronledger.job.attempt"]) - Number(b.attributes["cronledger.job.attempt"]));
    expect(attempts.map((span) => span.attributes["cronledger.job.attempt"])).toEqual([1, 2, 3]);
    expect(attempts.map((span) => span.attributes["cronledger.job.outcome"])).toEqual(["retry", "retry", "done"]);
    // Three traces, each linked to the one enqueue.
    expect(new Set(attempts.map((span) => span.spanContext().traceId)).size).toBe(3);
    for (const span of attempts) {
      expect(span.links.map((link) => link.context.spanId)).toEqual([send.spanContext().spanId]);
      expect(span.attributes["messaging.message.id"]).toBe(String(job.id));
    }
    for (const [index, span] of attempts.slice(0, 2).entries()) {
      expect(span.status).toMatchObject({ code: SpanStatusCode.ERROR });
      expect(span.attributes["error.type"]).toBe("Error");
      expect(span.attributes["cronledger.job.next_run_at"]).toEqual(expect.any(String));
      const exception = only(span.events.filter((event) => event.name === "exception"));
      expect(exception.attributes?.["exception.type"]).toBe("Error");
      expect(exception.attributes?.["exception.message"]).toContain(`carrier unavailable (call ${index + 1})`);
      expect(String(exception.attributes?.["exception.message"])).not.toContain("sk_live_abcdefghijklmnopqrstuvwx");
      expect(String(exception.attributes?.["exception.stacktrace"])).toContain("tracing.test.ts");
    }
    expect(attempts[2]?.status.code).toBe(SpanStatusCode.UNSET);
    expect(attempts[2]?.events).toEqual([]);
  });

  it("a batch enqueue is one producer span; a job enqueued in a handler is part of that handler's trace", async () => {
    const jobs = await ledger.enqueueMany([
      { job: ship, payload: { orderId: 1 } },
      { job: ship, payload: { orderId: 2 }, options: { queue: "bulk" } },
    ]);
    const send = only(named("enqueue"));
    expect(send.attributes["messaging.batch.message_count"]).toBe(2);
    expect(send.attributes["messaging.destination.name"]).toBeUndefined();
    expect(send.attributes["cronledger.jobs.created"]).toBe(2);
    for (const job of jobs) expect((await storedContext(job.id))?.traceparent).toContain(send.spanContext().spanId);

    const forwarder = defineJob({ name: "orders.forward", run: (_payload, ctx) => ctx.enqueue(ship, { orderId: 3 }).then(() => undefined) });
    const local = createCronledger({ database: ledger.database, jobs: [forwarder, ship], logger: silentLogger, metrics: false, tracing: true });
    try {
      await local.enqueue(forwarder);
      exporter.reset();
      await local.work({ once: true, queues: ["default"] });
      const forwarded = named("process default").find((span) => span.attributes["cronledger.job.name"] === "orders.forward");
      const inner = only(named("enqueue default"));
      expect(parentOf(inner)).toBe(forwarded?.spanContext().spanId);
    } finally {
      await local.close();
    }
    await ledger.work({ once: true, queues: ["bulk", "default"] });
  });

  it("with spanRelationship child, an attempt is a child of its enqueue, in the enqueuing trace", async () => {
    const local = createCronledger({ database: ledger.database, jobs: [ship], logger: silentLogger, metrics: false, tracing: { spanRelationship: "child" } });
    try {
      const request = appTracer.startSpan("POST /orders");
      await context.with(trace.setSpan(ROOT_CONTEXT, request), () => local.enqueue(ship, { orderId: 9 }));
      request.end();
      const send = only(named("enqueue default"));
      await local.work({ once: true });
      const process = only(named("process default"));
      expect(parentOf(process)).toBe(send.spanContext().spanId);
      expect(process.spanContext().traceId).toBe(request.spanContext().traceId);
      expect(process.links.map((link) => link.context.spanId)).toEqual([send.spanContext().spanId]);
    } finally {
      await local.close();
    }
  });

  it("a pass that fires slots is a pass span with a producer child, stored with its jobs; an idle pass makes no span", async () => {
    await ledger.tick({ now: new Date("2030-01-01T02:00:00Z") });
    exporter.reset();
    const report = await ledger.tick({ now: new Date("2030-01-01T03:00:00.500Z") });
    expect(report.enqueued).toHaveLength(1);
    const pass = only(named("cronledger pass"));
    const schedule = only(named("schedule"));
    expect(pass.kind).toBe(SpanKind.INTERNAL);
    expect(parentOf(pass)).toBeUndefined();
    expect(schedule.kind).toBe(SpanKind.PRODUCER);
    expect(parentOf(schedule)).toBe(pass.spanContext().spanId);
    expect(pass.attributes).toMatchObject({ "cronledger.pass.enqueued": 1, "cronledger.pass.lost_race": 0 });
    const jobId = report.enqueued[0]?.jobId as number;
    expect(schedule.attributes).toMatchObject({ "messaging.batch.message_count": 1, "messaging.message.id": String(jobId) });
    expect((await storedContext(jobId))?.traceparent).toContain(schedule.spanContext().spanId);

    exporter.reset();
    // The pass's job runs at the pass's instant: a worker on the same clock.
    await ledger.work({ once: true, clock: () => new Date("2030-01-01T03:00:01Z") });
    const process = only(named("process default"));
    expect(process.links.map((link) => link.context.spanId)).toEqual([schedule.spanContext().spanId]);
    expect(process.attributes).toMatchObject({ "cronledger.schedule.slot": "2030-01-01T03:00:00.000Z", "cronledger.schedule.key": report.enqueued[0]?.key });

    exporter.reset();
    const idle = await ledger.tick({ now: new Date("2030-01-01T03:30:00Z") });
    expect(idle.enqueued).toEqual([]);
    expect(named("cronledger pass")).toEqual([]);
  });

  it("a run-now and a backfill are producer spans of the caller's trace, stored with their jobs", async () => {
    const request = appTracer.startSpan("POST /admin/trigger");
    const run = await context.with(trace.setSpan(ROOT_CONTEXT, request), () => ledger.trigger("nightly", { by: "ops" }));
    request.end();
    const trigger = only(named("trigger default"));
    expect(parentOf(trigger)).toBe(request.spanContext().spanId);
    expect(trigger.attributes).toMatchObject({ "messaging.operation.name": "trigger", "messaging.message.id": String(run.jobId), "cronledger.schedule.key": run.key });
    expect((await storedContext(run.jobId as number))?.traceparent).toContain(trigger.spanContext().spanId);

    // Slots before the database clock (the ledger, at the 2030 slot the pass claimed, is after them).
    const backfill = await ledger.backfill("nightly", { from: new Date("2020-01-01T00:00:00Z"), to: new Date("2020-01-03T23:00:00Z") });
    expect(backfill.enqueued).toBe(3);
    const span = only(named("backfill default"));
    expect(span.attributes).toMatchObject({ "messaging.batch.message_count": 3, "cronledger.jobs.created": 3 });
    for (const slot of backfill.slots) expect((await storedContext(slot.jobId as number))?.traceparent).toContain(span.spanContext().spanId);
    await ledger.work({ once: true });
  });

  it("a failed write is an error span; the retry of a failure keeps the failed job's trace context", async () => {
    // A transaction an earlier statement broke refuses the insert.
    await expect(
      ledger.database.db.transaction(async (tx) => {
        await tx.execute(sql`select 1 / 0`).catch(() => undefined);
        await ledger.enqueue(ship, { orderId: 1 }, { db: tx });
      }),
    ).rejects.toThrow(/Failed query/);
    const failed = only(named("enqueue default"));
    expect(failed.status).toEqual({ code: SpanStatusCode.ERROR, message: expect.stringMatching(/^current transaction is aborted/) });
    expect(only(failed.events).attributes?.["exception.message"]).toMatch(/^Failed query/);

    flakyCalls = -10;
    const job = await ledger.enqueue(flaky);
    const stored = await storedContext(job.id);
    for (let drain = 0; drain < 3; drain += 1) await ledger.work({ once: true });
    expect((await ledger.failures()).failures.map((ticket) => ticket.id)).toContain(job.id);
    const retried = await ledger.retryJob(job.id);
    expect(stored).not.toBeNull();
    expect(await storedContext(retried.id)).toEqual(stored);
    flakyCalls = 2;
    await ledger.work({ once: true });
  });

  it("baggage the enqueuing context carries reaches the handler", async () => {
    let seen: string | undefined;
    const reader = defineJob({ name: "orders.baggage", run: () => void (seen = propagation.getActiveBaggage()?.getEntry("tenant")?.value) });
    const local = createCronledger({ database: ledger.database, jobs: [reader], logger: silentLogger, metrics: false, tracing: true });
    try {
      const withBaggage = propagation.setBaggage(ROOT_CONTEXT, propagation.createBaggage({ tenant: { value: "acme" } }));
      await context.with(withBaggage, () => local.enqueue(reader));
      await local.work({ once: true });
      expect(seen).toBe("acme");
    } finally {
      await local.close();
    }
  });

  it("without the option, cronledger makes no span and stores no context, though a provider is registered", async () => {
    const plain = createCronledger({ database: ledger.database, jobs: [ship], logger: silentLogger, metrics: false });
    try {
      const request = appTracer.startSpan("POST /orders");
      const job = await context.with(trace.setSpan(ROOT_CONTEXT, request), () => plain.enqueue(ship, { orderId: 5 }));
      request.end();
      expect(await storedContext(job.id)).toBeNull();
      await plain.work({ once: true });
      await plain.tick({ now: new Date("2030-01-02T03:00:00.500Z") });
      expect(ours()).toEqual([]);
    } finally {
      await plain.close();
    }
  });

  it("validates the option like every other", () => {
    const make = (tracing: unknown) => () => createCronledger({ database: ledger.database, logger: silentLogger, metrics: false, tracing: tracing as never });
    expect(make({ spanRelation: "child" })).toThrow(/unknown option "tracing.spanRelation" \(did you mean "spanRelationship"\?\)/);
    expect(make({ spanRelationship: "parent" })).toThrow(/tracing\.spanRelationship: must be "link" .* or "child"/);
    expect(make({ tracerProvider: {} })).toThrow(/tracing\.tracerProvider: must be an OpenTelemetry TracerProvider/);
    expect(make("yes")).toThrow(ConfigError);
    expect(make("yes")).toThrow(/tracing: must be true, false or \{ tracerProvider\?, spanRelationship\? \}/);
  });

  it("traces through a provider given as an option, not the global one", async () => {
    const own = new InMemorySpanExporter();
    const tracerProvider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(own)] });
    const local = createCronledger({ database: ledger.database, jobs: [ship], logger: silentLogger, metrics: false, tracing: { tracerProvider } });
    try {
      await local.enqueue(ship, { orderId: 11 });
      await local.work({ once: true });
      expect(own.getFinishedSpans().map((span) => span.name).sort()).toEqual(["claim", "enqueue default", "process default"]);
      expect(ours()).toEqual([]);
    } finally {
      await local.close();
      await tracerProvider.shutdown();
    }
  });

  // Last: it replaces the global propagator for good.
  it("a propagator that throws neither fails an enqueue nor loses the link: the W3C traceparent is stored and read", async () => {
    propagation.disable();
    const broken = {
      inject: () => {
        throw new Error("broken propagator");
      },
      extract: () => {
        throw new Error("broken propagator");
      },
      fields: () => [],
    };
    propagation.setGlobalPropagator(broken);
    const job = await ledger.enqueue(ship, { orderId: 12 });
    const send = only(named("enqueue default"));
    expect(await storedContext(job.id)).toEqual({ traceparent: `00-${send.spanContext().traceId}-${send.spanContext().spanId}-01` });
    await ledger.work({ once: true });
    expect(only(named("process default")).links.map((link) => link.context.spanId)).toEqual([send.spanContext().spanId]);
  });
});

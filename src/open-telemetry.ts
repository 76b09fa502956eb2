// OpenTelemetry's side of tracing, whole: loading the API, every span's name, kind and attributes, and the trace context
// in and out of a job row. About 380 lines, read together: how the spans relate (link or child, a root or the caller's) is one design.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import type * as OpenTelemetryApi from "@opentelemetry/api";
import type { Attributes, Context, Link, Span, SpanContext, Tracer } from "@opentelemetry/api";
import { DependencyMissingError } from "./errors.js";
import type { CronledgerEvents, CronledgerHooks, TickReport } from "./events.js";
import { packagePath } from "./package-root.js";
import { innermostMessage } from "./error-chain.js";
import { redact } from "./redact.js";
import type { JobsSent, MadeJob, ResolvedTracing, Tracing } from "./tracing.js";

/**
 * OpenTelemetry traces, when the `tracing` option asks for them
 * (docs/decisions.md, "Traces"). `@opentelemetry/api` is an optional peer
 * dependency, required here, on that ask, and nowhere else; its types are
 * imported for this file alone and never reach cronledger's declarations.
 *
 * The spans, with the messaging semantic conventions (system `cronledger`):
 * - a write of jobs is a producer span (`enqueue <queue>`, `trigger <queue>`,
 *   `backfill <queue>`) in the caller's trace; its context, as the API's
 *   propagator writes it plus W3C `traceparent`/`tracestate`, is stored with
 *   every job of the write (`trace_context`);
 * - a scheduler pass that looks at entries is an internal `cronledger pass`
 *   span, the root of a trace, whose producer child `schedule` is the stored
 *   context of every job the pass inserts;
 * - a claim that got jobs is a client span `claim [<queue>]`, made afterwards
 *   from the `jobsClaimed` event;
 * - each attempt of a job is a consumer span `process <queue>`, started by
 *   `jobStarted` and ended by `jobFinished` (or by the hand-back or lost lease
 *   that ends an attempt without one), linked to the stored context (or its
 *   child); the handler runs in its context.
 */

export const OPENTELEMETRY_API = "@opentelemetry/api";
const TRACER_NAME = "cronledger";
const SYSTEM = "cronledger";

type Api = typeof OpenTelemetryApi;

// Resolved from where cronledger is installed, so the application's own copy is found (a peer dependency).
const requireHere = createRequire(import.meta.url);

function isNotFound(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "MODULE_NOT_FOUND" || code === "ERR_MODULE_NOT_FOUND";
}

/** `@opentelemetry/api`, or a DependencyMissingError that says what to install. */
function loadApi(): Api {
  try {
    return requireHere(OPENTELEMETRY_API) as Api;
  } catch (error) {
    if (!isNotFound(error)) throw error;
    throw new DependencyMissingError(
      OPENTELEMETRY_API,
      `The \`tracing\` option needs the optional peer dependency ${OPENTELEMETRY_API}, which is not installed: run \`npm install ${OPENTELEMETRY_API}\` ` +
        "(with an SDK that exports the spans, such as @opentelemetry/sdk-node), or remove `tracing`.",
      { cause: error },
    );
  }
}

function packageVersion(): string | undefined {
  try {
    return (JSON.parse(readFileSync(packagePath("package.json"), "utf8")) as { version?: string }).version;
  } catch {
    return undefined;
  }
}

/** The tracing of this process: the data path's three calls, and the listeners that make the claim and attempt spans. */
export function openTelemetryTracing(settings: ResolvedTracing): { readonly tracing: Tracing; readonly hooks: CronledgerHooks } {
  const traces = new OpenTelemetryTracing(loadApi(), settings);
  return { tracing: traces, hooks: traces.hooks() };
}

/** An attempt's span while it runs, under `${jobId}:${attempt}`. */
interface OpenAttempt {
  readonly span: Span;
  /** The context the handler runs in: the span's, with the stored context's baggage. */
  readonly context: Context;
  /** The class of the exception recorded from the handler, for `error.type`. */
  errorType: string | undefined;
}

type Started = Parameters<CronledgerEvents["jobStarted"]>[0];
type Finished = Parameters<CronledgerEvents["jobFinished"]>[0];
type Claimed = Parameters<CronledgerEvents["jobsClaimed"]>[0];

/** The one queue of `jobs`, or undefined when they go to several (the span then names no destination). */
function onlyValue(values: readonly string[]): string | undefined {
  const [first] = values;
  return first !== undefined && values.every((value) => value === first) ? first : undefined;
}

/**
 * An error as a span records it: its class, its own message and its stack, redacted like every error cronledger
 * stores (src/redact.ts); and, for the span's status, its innermost cause's message (a query error's is the server's).
 */
function exceptionOf(error: unknown): { name: string; message: string; stack?: string; status: string } {
  const status = redact(innermostMessage(error));
  if (error instanceof Error) {
    return { name: error.name, message: redact(error.message), ...(error.stack === undefined ? {} : { stack: redact(error.stack) }), status };
  }
  return { name: typeof error, message: redact(String(error)), status };
}

/** The class an error string of `jobFinished` starts with ("JobTimeoutError [job_timeout]: ..."), for `error.type`. */
function errorTypeOf(error: string | undefined): string {
  return /^([A-Za-z_$][\w$]*)(?: \[[\w-]+\])?:/.exec(error ?? "")?.[1] ?? "_OTHER";
}

const W3C_TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

class OpenTelemetryTracing implements Tracing {
  private readonly tracer: Tracer;
  private readonly child: boolean;
  private readonly attempts = new Map<string, OpenAttempt>();

  constructor(
    private readonly api: Api,
    settings: ResolvedTracing,
  ) {
    const version = packageVersion();
    // The global provider through the API's proxy tracer: spans go to whatever provider is registered when they start.
    this.tracer = (settings.tracerProvider?.getTracer(TRACER_NAME, version) as Tracer | undefined) ?? api.trace.getTracer(TRACER_NAME, version);
    this.child = settings.spanRelationship === "child";
  }

  // ---------------------------------------------------------------- the data path's calls

  send<T>(sent: JobsSent, write: (traceContextJson: string | null) => Promise<T>, made: (result: T) => readonly MadeJob[]): Promise<T> {
    const { api } = this;
    const queue = onlyValue(sent.jobs.map((job) => job.queue));
    const jobName = onlyValue(sent.jobs.map((job) => job.jobName));
    const attributes: Attributes = {
      "messaging.system": SYSTEM,
      "messaging.operation.name": sent.operation,
      "messaging.operation.type": "send",
      ...(queue === undefined ? {} : { "messaging.destination.name": queue }),
      ...(sent.jobs.length === 1 ? {} : { "messaging.batch.message_count": sent.jobs.length }),
      ...(jobName === undefined ? {} : { "cronledger.job.name": jobName }),
      ...(sent.scheduleKey === undefined ? {} : { "cronledger.schedule.key": sent.scheduleKey }),
    };
    // The caller's context: an enqueue from a request handler (or from a job's handler) is part of its trace.
    const parent = api.context.active();
    const span = this.safely("starting a producer span", () =>
      this.tracer.startSpan(queue === undefined ? sent.operation : `${sent.operation} ${queue}`, { kind: api.SpanKind.PRODUCER, attributes }, parent),
    );
    if (span === undefined) return write(null);
    const context = api.trace.setSpan(parent, span);
    const traceContextJson = this.safely("writing the trace context", () => this.inject(context)) ?? null;
    let written: Promise<T>;
    try {
      written = api.context.with(context, () => write(traceContextJson));
    } catch (error) {
      written = Promise.reject(error);
    }
    return written.then(
      (result) => {
        this.safely("ending a producer span", () => {
          const jobs = made(result);
          const [only] = jobs;
          if (jobs.length === 1 && only !== undefined) {
            span.setAttribute("messaging.message.id", String(only.id));
            // False: the idempotency key was taken; that job keeps the trace context of the write that made it.
            span.setAttribute("cronledger.job.created", only.created);
          } else {
            span.setAttribute("cronledger.jobs.created", jobs.filter((job) => job.created).length);
          }
          span.end();
        });
        return result;
      },
      (error: unknown) => {
        this.safely("ending a producer span", () => {
          this.fail(span, error);
          span.end();
        });
        throw error;
      },
    );
  }

  async pass(pass: (traceContextJson: () => string | null) => Promise<TickReport>): Promise<TickReport> {
    let started: { readonly pass: Span; readonly schedule: Span; readonly json: string | null } | undefined;
    let asked = false;
    const traceContext = () => {
      if (!asked) started = this.safely("starting a pass's spans", () => this.startPass());
      asked = true;
      return started?.json ?? null;
    };
    try {
      const report = await pass(traceContext);
      if (started !== undefined) {
        const spans = started;
        this.safely("ending a pass's spans", () => this.endPass(spans.pass, spans.schedule, report));
      }
      return report;
    } catch (error) {
      if (started !== undefined) {
        for (const span of [started.schedule, started.pass]) {
          this.safely("ending a pass's spans", () => {
            this.fail(span, error);
            span.end();
          });
        }
      }
      throw error;
    }
  }

  attempt<T>(jobId: number, attempt: number, run: () => Promise<T>): Promise<T> {
    const key = `${jobId}:${attempt}`;
    const open = this.attempts.get(key);
    if (open === undefined) return run();
    return this.api.context.with(open.context, run).catch((error: unknown) => {
      this.safely("recording an attempt's exception", () => {
        const { status, ...exception } = exceptionOf(error);
        open.span.recordException(exception);
        open.errorType = exception.name;
        // Ended without a jobFinished: handed back by a stopping worker (the attempt does not count), or taken back by the reaper.
        const code = (error as { code?: unknown } | null)?.code;
        if (code === "worker_shutdown" || code === "lease_lost") {
          this.attempts.delete(key);
          open.span.setAttribute("cronledger.job.outcome", code === "worker_shutdown" ? "returned" : "lease_lost");
          if (code === "lease_lost") this.setError(open.span, exception.name, status);
          open.span.end();
        }
      });
      throw error;
    });
  }

  // ---------------------------------------------------------------- the listeners

  hooks(): CronledgerHooks {
    return {
      jobsClaimed: (event) => this.claimed(event),
      jobStarted: (event) => this.started(event),
      jobFinished: (event) => this.finished(event),
    };
  }

  /** A claim that got jobs, as a span of its own (after the fact, with its duration): an empty claim (the poll of an idle queue) makes none. */
  private claimed(event: Claimed): void {
    if (event.count === 0) return;
    const { api } = this;
    const endMs = Date.now();
    const queue = onlyValue(event.queues);
    const span = this.tracer.startSpan(
      queue === undefined ? "claim" : `claim ${queue}`,
      {
        kind: api.SpanKind.CLIENT,
        startTime: endMs - event.durationSeconds * 1000,
        attributes: {
          "messaging.system": SYSTEM,
          "messaging.operation.name": "claim",
          "messaging.operation.type": "receive",
          "messaging.batch.message_count": event.count,
          "messaging.client.id": event.workerId,
          ...(queue === undefined ? {} : { "messaging.destination.name": queue }),
        },
      },
      api.ROOT_CONTEXT,
    );
    span.end(endMs);
  }

  private started(event: Started): void {
    const { api } = this;
    const stored = event.traceContext === undefined || event.traceContext === null ? undefined : this.extract(event.traceContext);
    const queue = event.queue ?? "default";
    const producer = stored === undefined ? undefined : api.trace.getSpanContext(stored);
    const valid = producer !== undefined && api.trace.isSpanContextValid(producer);
    // Never the worker's own context: a worker started inside a span would otherwise gather every job into one trace.
    // Link: a root span, with the stored context's baggage; child: the stored context itself.
    const parent = stored === undefined ? api.ROOT_CONTEXT : this.child && valid ? stored : api.trace.deleteSpan(stored);
    const links: Link[] = valid ? [{ context: producer }] : [];
    const attributes: Attributes = {
      "messaging.system": SYSTEM,
      "messaging.operation.name": "process",
      "messaging.operation.type": "process",
      "messaging.destination.name": queue,
      "messaging.message.id": String(event.jobId),
      "cronledger.job.name": event.jobName,
      "cronledger.job.attempt": event.attempt,
      ...(event.maxAttempts === undefined ? {} : { "cronledger.job.max_attempts": event.maxAttempts }),
      ...(event.scheduleKey === undefined || event.scheduleKey === null ? {} : { "cronledger.schedule.key": event.scheduleKey }),
      ...(event.scheduledFor === undefined || event.scheduledFor === null ? {} : { "cronledger.schedule.slot": event.scheduledFor.toISOString() }),
    };
    const span = this.tracer.startSpan(`process ${queue}`, { kind: api.SpanKind.CONSUMER, attributes, links }, parent);
    this.attempts.set(`${event.jobId}:${event.attempt}`, { span, context: api.trace.setSpan(parent, span), errorType: undefined });
  }

  private finished(event: Finished): void {
    const key = `${event.jobId}:${event.attempt}`;
    const open = this.attempts.get(key);
    if (open === undefined) return;
    this.attempts.delete(key);
    const { span } = open;
    span.setAttribute("cronledger.job.outcome", event.status);
    if (event.status === "retry" || event.status === "panicked") {
      // A failure the handler did not throw (its timeout, a stored payload its schema refuses) has only its message.
      if (open.errorType === undefined && event.error !== undefined) span.recordException({ name: errorTypeOf(event.error), message: event.error });
      this.setError(span, open.errorType ?? errorTypeOf(event.error), event.error);
      if (event.nextRunAt !== undefined) span.setAttribute("cronledger.job.next_run_at", event.nextRunAt.toISOString());
    }
    span.end();
  }

  // ---------------------------------------------------------------- the pass

  private startPass(): { pass: Span; schedule: Span; json: string | null } {
    const { api } = this;
    // The root of its own trace, whatever context the ticker's timers carry.
    const pass = this.tracer.startSpan("cronledger pass", { kind: api.SpanKind.INTERNAL, attributes: { "messaging.system": SYSTEM } }, api.ROOT_CONTEXT);
    const passContext = api.trace.setSpan(api.ROOT_CONTEXT, pass);
    const schedule = this.tracer.startSpan(
      "schedule",
      { kind: api.SpanKind.PRODUCER, attributes: { "messaging.system": SYSTEM, "messaging.operation.name": "schedule", "messaging.operation.type": "send" } },
      passContext,
    );
    return { pass, schedule, json: this.inject(api.trace.setSpan(passContext, schedule)) };
  }

  private endPass(pass: Span, schedule: Span, report: TickReport): void {
    const [only] = report.enqueued;
    schedule.setAttribute("messaging.batch.message_count", report.enqueued.length);
    if (report.enqueued.length === 1 && only?.jobId !== null && only?.jobId !== undefined) schedule.setAttribute("messaging.message.id", String(only.jobId));
    schedule.end();
    pass.setAttributes({
      "cronledger.pass.enqueued": report.enqueued.length,
      "cronledger.pass.lost_race": report.lostRace.length,
      "cronledger.pass.skipped": report.skipped.length,
      "cronledger.pass.skipped_stale": report.skippedStale.length,
      "cronledger.pass.quarantined": report.quarantined.length,
      "cronledger.pass.set_aside": report.setAside.length,
      "cronledger.pass.locked": report.locked.length,
      "cronledger.pass.repaired": report.repaired.length,
      "cronledger.pass.created": report.created,
      "cronledger.pass.statements": report.statements,
      "cronledger.pass.attempts": report.attempts,
    });
    pass.end();
  }

  // ---------------------------------------------------------------- trace context in and out of a job row

  /**
   * The trace context to store with a job: what the API's propagator writes
   * (W3C trace context and baggage with the SDK's defaults, B3 or a vendor's
   * with others), over a W3C `traceparent`/`tracestate` of the span written
   * here, so the link holds even when no propagator is registered. Null when
   * the span has no valid context (no tracer provider registered).
   */
  private inject(context: Context): string | null {
    const { api } = this;
    const spanContext = api.trace.getSpanContext(context);
    if (spanContext === undefined || !api.trace.isSpanContextValid(spanContext)) return null;
    const carrier: Record<string, string> = { traceparent: `00-${spanContext.traceId}-${spanContext.spanId}-${spanContext.traceFlags.toString(16).padStart(2, "0")}` };
    const traceState = spanContext.traceState?.serialize();
    if (traceState) carrier.tracestate = traceState;
    try {
      api.propagation.inject(context, carrier);
    } catch (error) {
      api.diag.error("cronledger: the propagator failed to write a job's trace context; storing its W3C traceparent alone", error);
    }
    return JSON.stringify(carrier);
  }

  /** The stored context as a Context: through the API's propagator, else from the W3C `traceparent` written beside it. */
  private extract(json: string): Context | undefined {
    const { api } = this;
    let carrier: Record<string, unknown>;
    try {
      carrier = JSON.parse(json) as Record<string, unknown>;
    } catch {
      return undefined;
    }
    if (typeof carrier !== "object" || carrier === null) return undefined;
    let extracted = api.ROOT_CONTEXT;
    try {
      extracted = api.propagation.extract(api.ROOT_CONTEXT, carrier);
    } catch (error) {
      api.diag.error("cronledger: the propagator failed to read a job's trace context; reading its W3C traceparent", error);
    }
    const found = api.trace.getSpanContext(extracted);
    if (found !== undefined && api.trace.isSpanContextValid(found)) return extracted;
    const parsed = typeof carrier.traceparent === "string" ? W3C_TRACEPARENT.exec(carrier.traceparent) : null;
    if (parsed === null) return extracted;
    const spanContext: SpanContext = {
      traceId: parsed[1] as string,
      spanId: parsed[2] as string,
      traceFlags: Number.parseInt(parsed[3] as string, 16),
      isRemote: true,
      ...(typeof carrier.tracestate === "string" && carrier.tracestate !== "" ? { traceState: api.createTraceState(carrier.tracestate) } : {}),
    };
    return api.trace.isSpanContextValid(spanContext) ? api.trace.setSpanContext(extracted, spanContext) : extracted;
  }

  // ---------------------------------------------------------------- status

  /**
   * Runs a piece of instrumentation on the data path without ever failing the
   * work it observes (a propagator or span processor that throws): the error
   * goes to OpenTelemetry's diagnostic logger, and the work goes on untraced.
   * The listeners need no such guard: a throwing listener is logged by
   * combineHooks (src/events.ts).
   */
  private safely<R>(what: string, instrument: () => R): R | undefined {
    try {
      return instrument();
    } catch (error) {
      this.api.diag.error(`cronledger: ${what} failed; the work goes on untraced`, error);
      return undefined;
    }
  }

  private fail(span: Span, error: unknown): void {
    const { status, ...exception } = exceptionOf(error);
    span.recordException(exception);
    this.setError(span, exception.name, status);
  }

  private setError(span: Span, type: string, message: string | undefined): void {
    span.setAttribute("error.type", type);
    span.setStatus({ code: this.api.SpanStatusCode.ERROR, ...(message === undefined ? {} : { message }) });
  }
}

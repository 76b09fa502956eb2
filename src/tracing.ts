import { z } from "zod";
import type { TickReport } from "./events.js";
import { object, type Check, type OptionShape, type Takes } from "./option-schema.js";

/**
 * Tracing as the rest of cronledger sees it: the `tracing` option, and the
 * three calls the data path makes when it is on (src/open-telemetry.ts
 * implements them). Everything else a trace shows (the claim, an attempt's
 * start and end) is made from events (src/events.ts) by listeners, as the
 * metrics are. These three exist because the data path must carry something
 * there: the trace context stored with the jobs a write inserts, and the
 * context a handler runs in. Each caller holds a `Tracing` as an optional
 * dependency and, without one, does exactly what it did before: no module
 * loaded, no span, no closure.
 */
export interface Tracing {
  /**
   * Runs `write` (one statement inserting jobs: an enqueue, a run-now, a
   * backfill) inside a producer span of the caller's trace. `write` is
   * given the trace context to store with every job it inserts (JSON; null
   * when there is none to pass on, e.g. no tracer provider is registered);
   * `made` names the jobs it made, for the span.
   */
  send<T>(sent: JobsSent, write: (traceContextJson: string | null) => Promise<T>, made: (result: T) => readonly MadeJob[]): Promise<T>;
  /**
   * Runs one scheduler pass. `pass` asks for the trace context of the pass's
   * jobs when a statement is about to insert some (the first ask starts the
   * pass's spans); a pass that never asks (an idle pass reads the clock and
   * nothing else) makes no span.
   */
  pass(pass: (traceContextJson: () => string | null) => Promise<TickReport>): Promise<TickReport>;
  /** Runs an attempt's handler inside the context of the attempt's span (which the `jobStarted` listener started), so the handler's own spans are its children. */
  attempt<T>(jobId: number, attempt: number, run: () => Promise<T>): Promise<T>;
}

/** What a write of jobs sends: the kind of write, and each job's name and queue. */
export interface JobsSent {
  /** `enqueue` (enqueue, enqueueMany, ctx.enqueue), `trigger` (an entry's run-now), `backfill` (an entry's missed slots). */
  readonly operation: "enqueue" | "trigger" | "backfill";
  readonly jobs: readonly { readonly jobName: string; readonly queue: string }[];
  /** The schedule entry's ledger key, for a run-now or a backfill. */
  readonly scheduleKey?: string;
}

/** A job a write made (`created`), or found already there under its idempotency key. */
export interface MadeJob {
  readonly id: number;
  readonly created: boolean;
}

// ---------------------------------------------------------------- the option

/**
 * An OpenTelemetry TracerProvider (the SDK's `NodeTracerProvider`, or
 * `trace.getTracerProvider()`): anything with getTracer. Declared here so
 * that cronledger's types never need `@opentelemetry/api` installed.
 */
export interface TracerProviderLike {
  getTracer(name: string, version?: string): unknown;
}

/** What `tracing: { ... }` may say; `tracing: true` is `{}`. */
export interface TracingOptions {
  /**
   * The tracer provider to trace with; default: the one registered with
   * `@opentelemetry/api` (the SDK's `register()` or NodeSDK's `start()`),
   * looked up through the API's proxy, so it may be registered after
   * createCronledger.
   */
  readonly tracerProvider?: TracerProviderLike;
  /**
   * How a job's attempt span relates to the span that enqueued the job:
   * `"link"` (default): each attempt is the root of a trace of its own, with
   * a link to the enqueue, as OpenTelemetry's messaging conventions, River,
   * Oban and Sidekiq do; `"child"`: each attempt is a child of the enqueue,
   * inside the enqueuing request's trace (and its sampling decision).
   */
  readonly spanRelationship?: "link" | "child";
}

/** `tracing` as a program or a config file writes it: off by default. */
export type TracingSetting = boolean | TracingOptions;

const tracingShape = {
  tracerProvider: object<TracerProviderLike>(
    "must be an OpenTelemetry TracerProvider (an object with a getTracer method)",
    (value) => typeof (value as { getTracer?: unknown }).getTracer === "function",
  ).optional(),
  spanRelationship: z.enum(["link", "child"], { error: 'must be "link" (each attempt a trace of its own, linked to its enqueue) or "child"' }).optional(),
} satisfies OptionShape<TracingOptions>;
type _TracingShapeTakesTracingOptions = Check<Takes<TracingOptions, typeof tracingShape>>;

/**
 * `tracing` resolved: undefined when off, else the provider (undefined: the global one) and the span
 * relationship. `true` is read as `{}`, so a bad key or value inside the object is reported as itself.
 */
export const tracingSchema = z
  .preprocess(
    (value) => (value === true ? {} : value === false ? undefined : value),
    z.strictObject(tracingShape, { error: "must be true, false or { tracerProvider?, spanRelationship? }" }).optional(),
  )
  .transform((value) => (value === undefined ? undefined : { tracerProvider: value.tracerProvider, spanRelationship: value.spanRelationship ?? "link" }));

export type ResolvedTracing = NonNullable<z.output<typeof tracingSchema>>;

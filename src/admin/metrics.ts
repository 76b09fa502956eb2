// Prometheus metrics as event listeners. Over 350 lines because each metric family is declared with its help text
// and labels beside the listener or the scrape-time read that feeds it, one function per family, createMetrics
// composing them (the families read better together than split across files).
import { Counter, Gauge, Histogram, Registry, type CounterConfiguration, type GaugeConfiguration, type HistogramConfiguration } from "prom-client";
import { ConfigError } from "../errors.js";
import { AttemptCounts, attemptCountsOf, JOB_STATUS_LABELS, STARTED, STATUS_INDEX, type JobStatusLabel } from "./attempt-counts.js";
import { SLOT_OUTCOME_LABELS, type AttemptStatus, type CronledgerHooks, type SlotOutcomeLabel } from "../events.js";
import { ENTRY_STATES } from "../status/health.js";
import type { SchedulerStatus } from "../status/model.js";

/** The `job_type` of jobs this process has no definition for: one value, so label cardinality stays bounded. */
export const OTHER_JOB_TYPE = "_other";

export { JOB_STATUS_LABELS, type JobStatusLabel } from "./attempt-counts.js";
export { SLOT_OUTCOME_LABELS } from "../events.js";
export const PRUNED_TABLES = ["schedule_state", "jobs"] as const;
export const REAP_OUTCOMES = ["requeued", "failed"] as const;
/** What became of a result that reached the database after its lease had lapsed (the lateCompletion event). */
export const LATE_COMPLETION_FATES = ["amended", "superseded"] as const;
/** The `state` label of cronledger_schedule_entries: every entry state, and `invalid` for entries left out of the schedule. */
export const ENTRY_STATE_LABELS = [...ENTRY_STATES, "invalid"] as const;
/** The `state` label of cronledger_dynamic_schedule_entries: the dynamic entries' counts (src/db/sql/dynamic.ts). */
export const DYNAMIC_STATE_LABELS = ["total", "due", "paused", "quarantined", "never"] as const satisfies readonly (keyof SchedulerStatus["dynamic"]["counts"])[];
/** Ready jobs counted per queue and scrape at most: a backlog larger than this reads as this, and its scan stays bounded. */
export const READY_COUNT_CAP = 100_000;

const JOB_DURATION_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60, 300, 900, 3600];
const TICK_DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Ready jobs of one name that no live worker can run, as the database counts them at scrape time. */
export interface WaitingJobsSample {
  readonly jobName: string;
  readonly count: number;
  /** How long the oldest of them has been ready. */
  readonly waitedSeconds: number;
}

export interface MetricsOptions {
  /** Where the metrics are registered; default a fresh Registry of their own. Pass prom-client's `register` to serve them with your app's metrics. */
  readonly registry?: Registry;
  /** The registered job names: the only values `job_type` takes besides OTHER_JOB_TYPE. */
  readonly jobNames: Iterable<string>;
  /**
   * Reads the jobs waiting for a worker that knows them, on each scrape:
   * a fact of the shared database rather than an event of this process, so
   * every replica reports the same value. Without it those gauges stay empty.
   */
  readonly waitingForWorker?: () => Promise<readonly WaitingJobsSample[]>;
}

/** What the gauges that read the database at scrape time read: a ledger's status and its queues. */
export interface MetricsSource {
  status(): Promise<SchedulerStatus>;
  readyJobs(queues: readonly string[], cap: number): Promise<readonly { queue: string; ready: number; oldest_ms: number | null; now_ms: number }[]>;
  /** The queues this ledger knows: the only values the `queue` label takes. */
  readonly queues: readonly string[];
  /** Sources on one database (the same label) are read once for the queue gauges. */
  readonly database: string;
}

export interface CronledgerMetrics {
  readonly registry: Registry;
  /** Listeners to pass in `createCronledger({ hooks })`; Cronledger installs them itself unless `metrics: false`. */
  readonly hooks: CronledgerHooks;
  /** The `job_type` label value for a job name. */
  jobType(jobName: string): string;
  /** Feeds the gauges read at scrape time (entry states, ready jobs per queue) from a ledger; Cronledger calls it itself. Returns the way to stop. */
  observe(source: MetricsSource): () => void;
}

/** The sources of each registry: two ledgers sharing a registry add up, their gauges included. */
const SOURCES = new WeakMap<Registry, Set<MetricsSource>>();

/** One job type's attempt counts since the last scrape and its label set, made once: a label object per observation was garbage. */
interface JobSeries {
  readonly counts: number[];
  readonly labels: { readonly job_type: string };
}

type MetricClass<M> = new (...args: never[]) => M;

/** Returns the metric already in the registry (a second ledger in the same process), else registers a new one. */
function shared<M>(registry: Registry, name: string, kind: MetricClass<M>, create: () => M): M {
  const existing: unknown = registry.getSingleMetric(name);
  if (existing === undefined) return create();
  if (existing instanceof kind) return existing;
  throw new ConfigError(`The metrics registry already holds a metric named ${name} of another type; pass cronledger a registry without it.`);
}

/** Where a family's metrics go: the registry, and the `registers` a new metric is created with. */
interface Family {
  readonly registry: Registry;
  readonly registers: Registry[];
}

function counter<L extends string>(family: Family, configuration: CounterConfiguration<L>): Counter<L> {
  return shared(family.registry, configuration.name, Counter, () => new Counter({ ...configuration, registers: family.registers }));
}

function histogram<L extends string>(family: Family, configuration: HistogramConfiguration<L>): Histogram<L> {
  return shared(family.registry, configuration.name, Histogram, () => new Histogram({ ...configuration, registers: family.registers }));
}

function gauge<L extends string>(family: Family, configuration: GaugeConfiguration<L>): Gauge<L> {
  return shared(family.registry, configuration.name, Gauge, () => new Gauge({ ...configuration, registers: family.registers }));
}

/**
 * A gauge read at scrape time: `read` answers, then `fill` sets the samples
 * anew. An answer of undefined leaves the last samples; a read that fails
 * leaves none, rather than a failed scrape (cronledger_init_failure and
 * absent() tell that the database is unreachable).
 */
function scrapedGauge<L extends string, T>(
  family: Family,
  configuration: { readonly name: string; readonly help: string; readonly labelNames: readonly L[] },
  read: () => Promise<T | undefined>,
  fill: (gauge: Gauge<L>, value: T) => void,
): Gauge<L> {
  return gauge(family, {
    ...configuration,
    async collect() {
      try {
        const value = await read();
        if (value === undefined) return;
        this.reset();
        fill(this, value);
      } catch {
        this.reset();
      }
    },
  });
}

/** One read at a time: prom-client collects the metrics of a scrape concurrently, so a second gauge to ask joins the read in flight. */
function joinedRead<T>(read: () => Promise<T>): () => Promise<T> {
  let inFlight: Promise<T> | undefined;
  return () => {
    if (inFlight) return inFlight;
    const reading = read();
    inFlight = reading;
    const done = () => (inFlight = undefined);
    void reading.then(done, done);
    return reading;
  };
}

/** The attempts' metrics, fed by the job events: attempts by status, durations, failures, reaped jobs, late results. */
function jobMetrics(family: Family, jobNames: Iterable<string>) {
  const pendingAttempts = attemptCountsOf(family.registry);
  const attempts = new AttemptCounts();
  pendingAttempts.add(attempts);
  // Every registered name has its own series; any other name shares OTHER_JOB_TYPE's.
  const series = new Map<string, JobSeries>();
  for (const type of [...jobNames, OTHER_JOB_TYPE]) series.set(type, { counts: attempts.of(type), labels: { job_type: type } });
  const other = series.get(OTHER_JOB_TYPE) as JobSeries;
  const seriesOf = (jobName: string): JobSeries => series.get(jobName) ?? other;
  const jobType = (jobName: string) => seriesOf(jobName).labels.job_type;
  const jobsTotal = counter(family, {
    name: "cronledger_jobs_total",
    help: "Job attempts by job type and status: started, then one of done, retry, skip, noop, panicked (terminal failure) or cancelled (stopped as an operator asked).",
    labelNames: ["job_type", "status"] as const,
    collect() {
      for (const counts of pendingAttempts) counts.flushInto(this);
    },
  });
  const jobDuration = histogram(family, { name: "cronledger_job_duration_seconds", help: "Duration of job attempts in seconds, whatever their outcome.", labelNames: ["job_type"] as const, buckets: JOB_DURATION_BUCKETS });
  const failuresTotal = counter(family, { name: "cronledger_failures_total", help: "Jobs that failed for good (failure tickets): attempts that panicked, jobs the reaper failed because their last attempt's worker died, and queued jobs the prune chore failed as unregistered.", labelNames: ["job_type"] as const });
  const reapedTotal = counter(family, { name: "cronledger_jobs_reaped_total", help: "Running jobs the reaper took back because their worker stopped heartbeating: requeued for another attempt, or failed for good.", labelNames: ["outcome"] as const });
  const lateTotal = counter(family, { name: "cronledger_late_completions_total", help: "Attempt results that reached the database after their lease had lapsed: amended (the reaper had ended the job; the result replaced its verdict) or superseded (another attempt had claimed the job: it ran twice; kept in cronledger.superseded_attempts).", labelNames: ["fate"] as const });
  for (const { labels } of series.values()) {
    for (const status of JOB_STATUS_LABELS) jobsTotal.inc({ ...labels, status }, 0);
    failuresTotal.inc(labels, 0);
    jobDuration.zero(labels);
  }
  for (const outcome of REAP_OUTCOMES) reapedTotal.inc({ outcome }, 0);
  for (const fate of LATE_COMPLETION_FATES) lateTotal.inc({ fate }, 0);
  const failedForGood = (failedByJob: Readonly<Record<string, number>>) => {
    for (const [jobName, count] of Object.entries(failedByJob)) failuresTotal.inc(seriesOf(jobName).labels, count);
  };
  const hooks = {
    jobStarted({ jobName }) {
      (seriesOf(jobName).counts[STARTED] as number) += 1;
    },
    jobFinished({ jobName, status, durationSeconds }) {
      const { counts, labels } = seriesOf(jobName);
      (counts[STATUS_INDEX.get(status satisfies AttemptStatus satisfies JobStatusLabel) as number] as number) += 1;
      jobDuration.observe(labels, durationSeconds);
      if (status === "panicked") failuresTotal.inc(labels);
    },
    jobsReaped({ requeued, failed, failedByJob }) {
      if (requeued > 0) reapedTotal.inc({ outcome: "requeued" }, requeued);
      if (failed > 0) reapedTotal.inc({ outcome: "failed" }, failed);
      failedForGood(failedByJob);
    },
    lateCompletion({ fate }) {
      lateTotal.inc({ fate });
    },
    jobsFailedUnregistered({ failedByJob }) {
      failedForGood(failedByJob);
    },
  } satisfies CronledgerHooks;
  return { hooks, jobType };
}

/** The gauges of schedule entries, static and dynamic, by state: read from the ledgers' status at scrape time, once for both. */
function entryGauges(family: Family, sources: ReadonlySet<MetricsSource>): void {
  const readStatuses = joinedRead(() => Promise.all([...sources].map(async (source) => ({ database: source.database, status: await source.status() }))));
  scrapedGauge(family, { name: "cronledger_schedule_entries", help: "Schedule entries by state (ok, late, locked, never_fired, failing, retrying, running, quarantined, waiting_for_worker, invalid), read at scrape time.", labelNames: ["state"] as const }, readStatuses, (entries, statuses) => {
    for (const state of ENTRY_STATE_LABELS) entries.set({ state }, 0);
    for (const { status } of statuses) {
      for (const entry of status.entries) entries.inc({ state: entry.state });
      if (status.invalid.length > 0) entries.inc({ state: "invalid" }, status.invalid.length);
    }
  });
  scrapedGauge(family, { name: "cronledger_dynamic_schedule_entries", help: "Dynamic schedule entries (ledger.schedules) by state, read at scrape time: total stored, and of them due, paused, quarantined and never (no slot ahead). One series per state, never one per entry.", labelNames: ["state"] as const }, readStatuses, (entries, statuses) => {
    for (const state of DYNAMIC_STATE_LABELS) entries.set({ state }, 0);
    // Ledgers of one namespace on one database count the same entries: each is counted once.
    const seen = new Set<string>();
    for (const { database, status } of statuses) {
      const at = `${database}|${status.namespace}`;
      if (seen.has(at)) continue;
      seen.add(at);
      for (const state of DYNAMIC_STATE_LABELS) entries.inc({ state }, status.dynamic.counts[state]);
    }
  });
}

/** The gauges of each queue's ready jobs, their count and the oldest one's age: read at scrape time, once per database for both. */
function queueGauges(family: Family, sources: ReadonlySet<MetricsSource>): void {
  const readQueues = joinedRead(async () => {
    const byDatabase = new Map<string, MetricsSource>();
    for (const source of sources) byDatabase.set(source.database, source);
    const totals = new Map<string, { ready: number; ageSeconds: number }>();
    for (const source of byDatabase.values()) {
      const queues = [...new Set([...sources].filter((other) => other.database === source.database).flatMap((other) => other.queues))];
      for (const row of await source.readyJobs(queues, READY_COUNT_CAP)) {
        const seen = totals.get(row.queue) ?? { ready: 0, ageSeconds: 0 };
        const ageSeconds = row.oldest_ms === null ? 0 : Math.max(0, (row.now_ms - row.oldest_ms) / 1000);
        totals.set(row.queue, { ready: seen.ready + row.ready, ageSeconds: Math.max(seen.ageSeconds, ageSeconds) });
      }
    }
    return totals;
  });
  const queueGauge = (name: string, help: string, pick: (value: { ready: number; ageSeconds: number }) => number) =>
    scrapedGauge(family, { name, help, labelNames: ["queue"] as const }, readQueues, (gauge, values) => {
      for (const [queue, value] of values) gauge.set({ queue }, pick(value));
    });
  queueGauge("cronledger_queue_ready_jobs", `Jobs ready to run (queued and due) per queue, read at scrape time; counted up to ${READY_COUNT_CAP} per queue.`, (value) => value.ready);
  queueGauge("cronledger_queue_oldest_ready_age_seconds", "How long the oldest ready job of each queue has been due, in seconds (0 when none is); read at scrape time.", (value) => value.ageSeconds);
}

/** The scheduler's and the chores' metrics, fed by their events: initialisation, pruned rows, slots by outcome, pass durations. */
function schedulerMetrics(family: Family) {
  const initFailure = gauge(family, { name: "cronledger_init_failure", help: "1 while cronledger failed to initialise (database unreachable, migration failed), else 0." });
  const pruneRows = counter(family, { name: "cronledger_prune_rows_removed_total", help: "Rows deleted by the prune and retention chores, by table.", labelNames: ["table"] as const });
  const slotsTotal = counter(family, { name: "cronledger_schedule_slots_total", help: "Schedule slots handled by this process's ticks, by outcome: enqueued, lost_race, skipped_stale, skipped_paused (entry paused), skipped_overlap (its overlap policy), quarantined, set_aside (its own statement failed with a retryable error; retried alone), locked (row held by another session, skipped), repaired.", labelNames: ["outcome"] as const });
  const tickDuration = histogram(family, { name: "cronledger_tick_duration_seconds", help: "Duration of scheduler passes in seconds.", buckets: TICK_DURATION_BUCKETS });
  for (const outcome of SLOT_OUTCOME_LABELS) slotsTotal.inc({ outcome }, 0);
  for (const table of PRUNED_TABLES) pruneRows.inc({ table }, 0);
  initFailure.set(0);
  const countSlots = (outcome: SlotOutcomeLabel, count: number) => {
    if (count > 0) slotsTotal.inc({ outcome }, count);
  };
  return {
    tickCompleted(report, durationSeconds) {
      tickDuration.observe(durationSeconds);
      countSlots("enqueued", report.enqueued.length);
      countSlots("lost_race", report.lostRace.length);
      countSlots("skipped_stale", report.skippedStale.length);
      countSlots("skipped_paused", report.skipped.filter((slot) => slot.reason === "paused").length);
      countSlots("skipped_overlap", report.skipped.filter((slot) => slot.reason === "overlap").length);
      countSlots("quarantined", report.quarantined.length);
      countSlots("set_aside", report.setAside.length);
      countSlots("locked", report.locked.length);
      countSlots("repaired", report.repaired.length);
    },
    pruned({ table, rows }) {
      if (rows > 0) pruneRows.inc({ table }, rows);
    },
    initFailure(failed) {
      initFailure.set(failed ? 1 : 0);
    },
  } satisfies CronledgerHooks;
}

/** The gauges of ready jobs no live worker can run, by job type: their count and the oldest one's wait, read from the database at scrape time. */
function waitingGauges(family: Family, waiting: MetricsOptions["waitingForWorker"], jobType: (jobName: string) => string): void {
  let lastRead: { readonly at: number; readonly samples: Promise<readonly WaitingJobsSample[] | undefined> } | undefined;
  /** One database read serves both gauges of a scrape (reads within a second are shared); a failed read leaves their last values. */
  const readWaiting = (): Promise<readonly WaitingJobsSample[] | undefined> => {
    const now = performance.now();
    if (lastRead === undefined || now - lastRead.at > 1_000) {
      lastRead = { at: now, samples: waiting === undefined ? Promise.resolve(undefined) : waiting().catch(() => undefined) };
    }
    return lastRead.samples;
  };
  const gaugeOfWaiting = (name: string, help: string, value: (sample: WaitingJobsSample) => number, combine: (a: number, b: number) => number) =>
    scrapedGauge(family, { name, help, labelNames: ["job_type"] as const }, readWaiting, (gauge, samples) => {
      const values = new Map<string, number>();
      for (const sample of samples) {
        const type = jobType(sample.jobName);
        const seen = values.get(type);
        values.set(type, seen === undefined ? value(sample) : combine(seen, value(sample)));
      }
      for (const [type, amount] of values) gauge.set({ job_type: type }, amount);
    });
  gaugeOfWaiting(
    "cronledger_jobs_waiting_for_worker",
    "Ready jobs that no live worker can run (none serving their queue has registered their name), by job type; read from the database at scrape time.",
    (sample) => sample.count,
    (a, b) => a + b,
  );
  gaugeOfWaiting(
    "cronledger_jobs_waiting_for_worker_oldest_seconds",
    "How long the oldest ready job that no live worker can run has waited, by job type; read from the database at scrape time.",
    (sample) => sample.waitedSeconds,
    Math.max,
  );
}

/**
 * cronledger's Prometheus metrics (README, "Operating it"), fed by its events. Every
 * label value is known up front and pre-initialised to 0, so `rate()` and
 * `increase()` see a series from the first scrape and alerts can fire on
 * the first increment. One function per family; the order they are called
 * in is the order of the exposition.
 */
export function createMetrics(options: MetricsOptions): CronledgerMetrics {
  const registry = options.registry ?? new Registry();
  const family: Family = { registry, registers: [registry] };
  const sources = SOURCES.get(registry) ?? new Set<MetricsSource>();
  SOURCES.set(registry, sources);
  const jobs = jobMetrics(family, options.jobNames);
  entryGauges(family, sources);
  queueGauges(family, sources);
  const scheduler = schedulerMetrics(family);
  waitingGauges(family, options.waitingForWorker, jobs.jobType);
  const { tickCompleted, pruned, initFailure } = scheduler;
  const hooks: CronledgerHooks = { tickCompleted, ...jobs.hooks, pruned, initFailure };
  const observe = (source: MetricsSource) => {
    sources.add(source);
    return () => void sources.delete(source);
  };
  return { registry, hooks, jobType: jobs.jobType, observe };
}

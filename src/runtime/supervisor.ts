import { Backoff } from "../backoff.js";
import type { DatabaseHealth } from "../db/health.js";
import { emptySummary } from "../jobs/completion.js";
import type { Worker, WorkSummary } from "../jobs/worker.js";
import { retryCapMs } from "../db/diagnose.js";
import { logFailure } from "../db/log-failure.js";
import type { Logger } from "../log.js";
import type { TickReport } from "../events.js";

import type { ResolvedStartOptions } from "./start-options.js";

export type { StartOptions } from "./start-options.js";

/** What the supervisor drives: the ticker, a worker factory, and the way out. */
export interface SupervisorHost {
  readonly logger: Logger;
  /** Where a lost database is logged once, instead of on every failed pass. */
  readonly health: DatabaseHealth;
  tick(): Promise<TickReport>;
  createWorker(options: ResolvedStartOptions): Worker;
  /** Called after a signal-initiated graceful stop: closes connections. */
  close(): Promise<void>;
}

/** Ticks wake this long after the fire time so the database clock has certainly reached it. */
const TICK_MARGIN_MS = 2;
const MIN_TICK_SLEEP_MS = 5;
/**
 * Waits before restarting a part that failed: 250 ms doubling to 2 s, so a replica is back within seconds of its
 * database; to a minute for a persistent cause such as a wrong password (retryCapMs).
 */
const MAX_RESTART_BACKOFF_MS = 2_000;
const restartBackoff = () => new Backoff({ initialMs: 250, factor: 2, maxMs: MAX_RESTART_BACKOFF_MS });
/**
 * Before a pass, the results this process's worker could not write (the database was out of reach) are
 * written first, waiting at most this long: the pass decides overlap policies on the jobs it sees live.
 */
const RESULTS_BEFORE_PASS_MS = 2_000;

/** setTimeout that ends early when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * The runtime behind `start()`: a ticker that sleeps until the next fire time
 * (bounded), and a worker (which heartbeats and runs chore jobs like any
 * other). A part that fails is logged and restarted with backoff; nothing
 * short of stop() or a signal ends the runtime, so a PostgreSQL restart is
 * ridden out by retrying until the pool reconnects.
 */
export class Supervisor {
  private readonly host: SupervisorHost;
  private readonly options: ResolvedStartOptions;
  private readonly stopping = new AbortController();
  private worker: Worker | undefined;
  private prepared = false;
  private first: Worker | undefined;
  private loops: Promise<void>[] = [];
  private stopPromise: Promise<WorkSummary> | undefined;
  private readonly totals: WorkSummary = emptySummary();
  private signalsSeen = 0;
  private readonly onSignal = (signal: NodeJS.Signals) => this.handleSignal(signal);

  constructor(host: SupervisorHost, options: ResolvedStartOptions) {
    this.host = host;
    this.options = options;
  }

  /**
   * Makes the first worker and begins opening its LISTEN connection, so
   * that it opens while start() checks the schema. Made before the ticker
   * starts: a worker that cannot be made throws here, before anything is written.
   */
  prepare(): void {
    if (this.prepared) return;
    this.prepared = true;
    this.first = this.options.workers ? this.host.createWorker(this.options) : undefined;
    void this.first?.listen();
  }

  /** A prepared supervisor that will not start (the schema check failed): closes the first worker's LISTEN. */
  async abandon(): Promise<void> {
    await this.first?.release();
    this.first = undefined;
  }

  start(): void {
    this.prepare();
    const first = this.first;
    this.first = undefined;
    if (this.options.ticker) this.loops.push(this.runTicker());
    if (first) this.loops.push(this.runWorkers(first));
    if (this.options.handleSignals) {
      process.on("SIGTERM", this.onSignal);
      process.on("SIGINT", this.onSignal);
    }
  }

  /** Stops ticking and claiming, lets running jobs finish within the grace period, hands back the rest. */
  stop(): Promise<WorkSummary> {
    this.stopPromise ??= (async () => {
      this.stopping.abort();
      await this.worker?.stop();
      await Promise.all(this.loops);
      this.removeSignalHandlers();
      return { ...this.totals };
    })();
    return this.stopPromise;
  }

  private removeSignalHandlers(): void {
    process.off("SIGTERM", this.onSignal);
    process.off("SIGINT", this.onSignal);
  }

  private handleSignal(signal: NodeJS.Signals): void {
    this.signalsSeen += 1;
    if (this.signalsSeen > 1) {
      this.host.logger.warn(`${signal} again: aborting running jobs now`);
      this.worker?.hurry();
      return;
    }
    this.host.logger.info(`${signal} received: stopping gracefully (send it again to abort running jobs now)`);
    void this.stop()
      .then(() => this.host.close())
      .catch((error: unknown) => logFailure(this.host.logger, "error", "graceful stop failed", {}, error))
      .finally(() => {
        // Nobody else listens: let the signal do what it would have done without us (end the process).
        if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
      });
  }

  private async runTicker(): Promise<void> {
    const signal = this.stopping.signal;
    const { maxTickMs } = this.options;
    const backoff = restartBackoff();
    // When the database comes back (any part of this process sees it), a pass waiting out a long backoff goes at once.
    let wake = new AbortController();
    const stopWaking = this.host.health.whenBack(() => wake.abort());
    while (!signal.aborted) {
      let delay: number;
      // A job that ended while the database was out of reach must not hold back its entry's next slot (overlap: skip).
      await this.worker?.writeWaitingResults(RESULTS_BEFORE_PASS_MS);
      const sent = this.host.health.sent();
      try {
        const report = await this.host.tick();
        // A pass with nothing due is a clock read: it says the server answers, not that cronledger's tables are there.
        sent.succeeded({ readsTables: false });
        backoff.reset();
        const untilNext = report.nextFireAt === null ? maxTickMs : report.nextFireAt.getTime() - report.now.getTime() + TICK_MARGIN_MS;
        delay = Math.min(maxTickMs, Math.max(MIN_TICK_SLEEP_MS, untilNext));
      } catch (error) {
        delay = backoff.next(retryCapMs(error, MAX_RESTART_BACKOFF_MS));
        logFailure(this.host.logger, "error", "scheduler tick failed; retrying", { attempt: backoff.attempts, retryInMs: delay }, error, sent);
      }
      if (!wake.signal.aborted) await sleep(delay, AbortSignal.any([signal, wake.signal]));
      wake = new AbortController();
    }
    stopWaking();
  }

  private async runWorkers(first: Worker): Promise<void> {
    const signal = this.stopping.signal;
    const backoff = restartBackoff();
    let next: Worker | undefined = first;
    while (!signal.aborted) {
      const worker = next ?? this.host.createWorker(this.options);
      next = undefined;
      this.worker = worker;
      try {
        const summary = await worker.run();
        for (const key of Object.keys(this.totals) as (keyof WorkSummary)[]) this.totals[key] += summary[key];
        backoff.reset();
      } catch (error) {
        const delay = backoff.next(retryCapMs(error, MAX_RESTART_BACKOFF_MS));
        logFailure(this.host.logger, "error", "worker crashed; restarting it", { attempt: backoff.attempts, retryInMs: delay }, error);
        await worker.stop(0).catch(() => undefined);
        await sleep(delay, signal);
      }
    }
  }
}

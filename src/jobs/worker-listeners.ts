import { logFailure } from "../db/log-failure.js";
import type { Logger } from "../log.js";
import type { WorkerStore } from "./worker-deps.js";

/** What a worker does when a LISTEN brings news: a queue gained ready jobs, a job was asked to stop. */
export interface ListenerHandlers {
  ready(queue: string): void;
  stop(jobId: number): void;
}

/**
 * A worker's two LISTENs (new jobs, stop requests), opened once and closed
 * once. Never fails the worker: a LISTEN that fails is logged, and the worker
 * relies on polling (new jobs) or on its heartbeats (stop requests).
 */
export class WorkerListeners {
  private listening: Promise<void> | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private unlistenStops: (() => Promise<void>) | undefined;

  constructor(
    private readonly store: Pick<WorkerStore, "listen" | "listenForStops">,
    private readonly log: Logger,
    private readonly handlers: ListenerHandlers,
  ) {}

  /** Opens both LISTENs the first time it is called (none when `once`: a drain polls); later calls wait for the same. */
  open(once: boolean): Promise<void> {
    this.listening ??= once ? Promise.resolve() : this.openListeners();
    return this.listening;
  }

  private async openListeners(): Promise<void> {
    const [jobs, stops] = await Promise.allSettled([this.store.listen((queue) => this.handlers.ready(queue)), this.store.listenForStops((jobId) => this.handlers.stop(jobId))]);
    if (jobs.status === "fulfilled") this.unlisten = jobs.value;
    else logFailure(this.log, "warn", "LISTEN failed; relying on polling until the next start", {}, jobs.reason);
    if (stops.status === "fulfilled") this.unlistenStops = stops.value;
    else logFailure(this.log, "warn", "LISTEN for stop requests failed; running jobs asked to stop learn it at their heartbeat (lease/3)", {}, stops.reason);
  }

  /** Closes what open() opened, once it has opened. */
  async close(): Promise<void> {
    await this.listening;
    const unlisten = [this.unlisten, this.unlistenStops];
    this.unlisten = this.unlistenStops = undefined;
    for (const close of unlisten) await close?.().catch(() => {});
  }
}

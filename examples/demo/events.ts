import { consoleLogger, type CronledgerHooks, type Logger } from "../../src/index.js";

const time = (date: Date) => date.toISOString().slice(11, 23);
// The reaper and prune chores are jobs too; the demo keeps its output to its own jobs.
const isChore = (jobName: string) => jobName.startsWith("cronledger.");

/** One line per event: slot fired, job done, retry scheduled, job failed for good. */
export function printEvents(write: (line: string) => void = console.log): CronledgerHooks {
  const line = (what: string, detail: string) => write(`${time(new Date())}  ${what.padEnd(10)} ${detail}`);
  return {
    tickCompleted(report) {
      for (const fired of report.enqueued) {
        if (!isChore(fired.jobName)) line("slot fired", `${fired.jobName} for slot ${time(fired.slot)} -> job ${fired.jobId ?? "(already queued)"}`);
      }
      for (const stale of report.skippedStale) line("skipped", `${stale.jobName} slot ${stale.slot.toISOString()} is older than its catch-up window`);
    },
    jobFinished(event) {
      if (isChore(event.jobName)) return;
      const job = `${event.jobName} job ${event.jobId} attempt ${event.attempt}`;
      const took = `${Math.round(event.durationSeconds * 1000)} ms`;
      if (event.status === "done") line("done", `${job} (${took})`);
      else if (event.status === "retry") line("retry", `${job} failed: ${event.error ?? "?"}; next try at ${event.nextRunAt ? time(event.nextRunAt) : "?"}`);
      else if (event.status === "panicked") line("failed", `${job} failed for good: ${event.error ?? "?"}`);
      else line(event.status, `${job} (${took})`);
    },
  };
}

/**
 * The runtime also logs every failed attempt; the event lines above already
 * show those, so the demo leaves them out and keeps every other log line.
 */
export function demoLogger(base: Logger = consoleLogger): Logger {
  const shownAsEvent = (fields?: Record<string, unknown>) => fields !== undefined && "jobId" in fields && "maxAttempts" in fields;
  return {
    ...base,
    warn: (message, fields) => (shownAsEvent(fields) ? undefined : base.warn(message, fields)),
    error: (message, fields) => (shownAsEvent(fields) ? undefined : base.error(message, fields)),
  };
}

import { Backoff } from "../backoff.js";
import { rootMessage } from "../db/transient.js";
import type { Logger } from "../log.js";
import { redact } from "../redact.js";

export interface ReadinessHost {
  /** Resolves when the process can work: the database answers and holds cronledger's tables; rejects with why not. */
  check(): Promise<void>;
  /** cronledger_init_failure: true while the check fails, false once it passes. */
  report(failed: boolean): void;
  readonly logger: Logger;
}

/** Between checks: 1 s doubling to 30 s, like a replica waiting for its database at boot. */
const readinessBackoff = () => new Backoff({ initialMs: 1_000, factor: 2, maxMs: 30_000 });

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });

/**
 * Checks, beside the running ticker and workers, that a started process can
 * reach its database and finds cronledger's tables, until it can: each
 * failed check reports an init failure (an alert fires before any job is
 * late), the first one is logged in one line, and the first success clears
 * it. The ticker and workers retry on their own meanwhile; this only says
 * whether the process has ever started.
 */
export async function watchReadiness(host: ReadinessHost, signal: AbortSignal): Promise<void> {
  const backoff = readinessBackoff();
  while (!signal.aborted) {
    try {
      await host.check();
      host.report(false);
      if (backoff.attempts > 0) host.logger.info("cronledger reached its database and tables; it is running", { failedChecks: backoff.attempts });
      return;
    } catch (error) {
      host.report(true);
      const retryInMs = backoff.next();
      if (backoff.attempts === 1) host.logger.error("cronledger cannot start yet; retrying until it can", { error: redact(rootMessage(error)), retryInMs });
      await sleep(retryInMs, signal);
    }
  }
}

/**
 * A worker's life as explicit modes, each change asserted against the table
 * below (as graphile-worker's local queue does with its modes), instead of a
 * handful of booleans whose combinations nobody wrote down:
 *
 * - `idle`: made, not run. `listen()` may already be opening its LISTENs.
 * - `starting`: run() was called: LISTEN and the registration are on their way; nothing is claimed.
 * - `running`: claims go out; handlers run.
 * - `stopping`: stop() was called (or the drain of `once` ended): no claims; running jobs get their grace.
 * - `stopped`: done: left the registry, timers off. Final.
 * - `released`: never ran (its schema check failed): its LISTENs closed. Final.
 */
export type WorkerMode = "idle" | "starting" | "running" | "stopping" | "stopped" | "released";

const NEXT: Readonly<Record<WorkerMode, readonly WorkerMode[]>> = {
  idle: ["starting", "stopping", "released"],
  // A stop() during the LISTENs and the registration.
  starting: ["running", "stopping"],
  running: ["stopping"],
  stopping: ["stopped"],
  stopped: [],
  released: [],
};

/** The mode after `from` → `to`, or an error naming the illegal change (a bug in the worker, never a user's doing). */
export function nextMode(from: WorkerMode, to: WorkerMode): WorkerMode {
  if (!NEXT[from].includes(to)) throw new Error(`cronledger: a worker cannot go from ${from} to ${to} (a bug: please report it)`);
  return to;
}

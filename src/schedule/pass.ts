import type { Executor } from "../db/executor.js";
import type { SlotOutcome, TickReport } from "../events.js";
import type { Logger } from "../log.js";
import type { FireMemo } from "./plan.js";
import type { ResolvedEntry } from "./validate.js";

/**
 * The words of one scheduler pass that its parts share: what the pass is
 * given (TickContext), what it remembers between passes (TickMemory) and
 * what it gathers while it runs (PassResult). src/schedule/tick.ts runs the
 * pass; src/schedule/deferrals.ts records the entries it leaves for later.
 */

export interface TickOptions {
  /** Evaluate schedules at this instant instead of the database clock (tests, replays). */
  readonly now?: Date;
}

/** What a pass remembers between passes; owned by the Scheduler (src/schedule/scheduler.ts). */
export interface TickMemory {
  readonly memo: FireMemo;
  /**
   * Entries left out of passes until an instant: a cache of the quarantines
   * the ledger holds (as the passes read them), and locked rows' short wait.
   */
  readonly deferred: Map<string, number>;
  /**
   * The entries of `deferred` whose deferral is their ledger row's quarantine.
   * Every pass that runs a statement includes them (the statement never claims
   * a quarantined row), so a quarantine cleared by an operator, or by another
   * replica's claim, is seen, and the slot fired, at the next pass of every replica.
   */
  readonly quarantined: Set<string>;
  /**
   * Entries whose own statement failed (src/schedule/deferrals.ts, setAside):
   * how many times in a row. They run alone, after the pass's statement, until
   * one of their slots is claimed, so they never hold up the other entries.
   */
  readonly suspects: Map<string, { readonly failures: number }>;
  /**
   * Entries whose ledger row a pass found paused and no later pass found
   * resumed. While a statement holds none of them (and no overlap policy but
   * allow_all), it is the light one (src/schedule/tick.ts, lightEnough).
   */
  readonly paused: Set<string>;
  /** Entries found locked, since when, and when that was last logged as a warning. */
  readonly locked: Map<string, { readonly sinceMs: number; warnedAtMs: number | undefined }>;
  /** Database clock minus local clock, as last observed; lets a pass pick its candidates before it reads `now()`. */
  clockOffsetMs: number | undefined;
  /** The earliest fire over every entry of `entries` as the last pass left it (see planPass); cleared by any pass that changes something. */
  horizon?: { readonly entries: readonly ResolvedEntry[]; readonly earliestMs: number } | undefined;
}

export interface TickContext {
  readonly executor: Executor;
  /** Counts the statements sent (cronledger's own connection counts every one). */
  readonly statements: { readonly count: number };
  readonly entries: readonly ResolvedEntry[];
  readonly namespace: string;
  readonly logger: Logger;
  readonly memory: TickMemory;
  /** The pass statement's timeout (the executor cancels it), for the error that names it. */
  readonly passTimeoutMs?: number;
}

export type PassResult = { -readonly [K in keyof Omit<TickReport, "now" | "nextFireAt" | "statements" | "attempts">]: TickReport[K] };

export function emptyResult(): PassResult {
  return { enqueued: [], lostRace: [], skippedStale: [], skipped: [], quarantined: [], setAside: [], locked: [], repaired: [], created: 0 };
}

export function outcome(entry: ResolvedEntry, slotMs: number): SlotOutcome {
  return { identity: entry.identity, key: entry.ledgerKey, jobName: entry.jobName, slot: new Date(slotMs) };
}

import type { Executor } from "../db/executor.js";
import type { DueProbe, DueTake, Taken } from "../db/sql/dynamic-fire.js";
import type { EntryJob, PassEntry } from "../db/sql/ledger.js";
import type { SlotOutcome, TickReport } from "../events.js";
import type { Logger } from "../log.js";
import type { FireMemo, Plan } from "./plan.js";
import type { ResolvedEntry } from "./validate.js";

/**
 * One scheduler pass as one object (Pass): what it is given (PassContext),
 * what it remembers between passes (TickMemory, the Scheduler's), the plan
 * of the statement it is running, and what it found (its results and the
 * earliest instant a later pass is asked for). The Scheduler
 * (src/schedule/scheduler.ts) makes one per tick; src/schedule/tick.ts runs
 * it; its helpers (src/schedule/deferrals.ts, tick.ts's statement parts)
 * take it and return what they found (Findings), which only the pass adds
 * to its results.
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

export interface PassContext {
  readonly executor: Executor;
  /** Counts the statements sent (cronledger's own connection counts every one). */
  readonly statements: { readonly count: number };
  readonly entries: readonly ResolvedEntry[];
  readonly namespace: string;
  readonly logger: Logger;
  readonly memory: TickMemory;
  /** The pass statement's timeout (the executor cancels it), for the error that names it. */
  readonly passTimeoutMs?: number;
  /** What the pass takes of the dynamic entries (src/db/sql/dynamic.ts, fireDue); undefined: none (a pass over taken entries). */
  readonly dynamic?: DueTake | undefined;
  /** With the `tracing` option: the trace context to store with the jobs a statement inserts (src/tracing.ts, `pass`). */
  readonly traceContext?: (() => string | null) | undefined;
}

export type PassResult = { -readonly [K in keyof Omit<TickReport, "now" | "nextFireAt" | "statements" | "attempts">]: TickReport[K] };

/** What one part of a pass found: outcomes to add to its report, and the earliest instant it asks a later pass for. */
export type Findings = { readonly [K in keyof PassResult]?: PassResult[K] } & { readonly upcomingMs?: number };

const NOTHING: Findings = {};

export class Pass {
  /** The fixed instant of `tick({ now })`; null for the database clock. */
  readonly exactMs: number | null;
  /** The plan of the statements running now (src/schedule/plan.ts); a pass plans again when the clock it reads is off. */
  plan: Plan;
  private result: PassResult = emptyResult();
  private upcomingMs = Number.POSITIVE_INFINITY;
  /**
   * The dynamic entries this pass took (src/db/sql/dynamic.ts, fireDue),
   * until they are fired and released. Kept across a retried attempt: the
   * rows it took are this pass's (fired, or leased), no statement takes
   * them again.
   */
  taken: Taken | undefined;
  /** Whether dynamic entries are due, as the pass's first statement found (src/db/sql/dynamic-fire.ts, dueProbeColumns); undefined until it ran. */
  probed: DueProbe | undefined;

  constructor(
    readonly context: PassContext,
    options: TickOptions,
  ) {
    this.exactMs = options.now?.getTime() ?? null;
    this.plan = { lowMs: 0, highMs: 0, exactMs: this.exactMs, entries: [] };
  }

  get memory(): TickMemory {
    return this.context.memory;
  }

  /** Starts an attempt afresh: a retried pass reports only what its last attempt found, and asks again what is due. */
  begin(): void {
    this.result = emptyResult();
    this.upcomingMs = Number.POSITIVE_INFINITY;
    this.probed = undefined;
  }

  /** What the next statement asks of the dynamic entries (PassInput.probe): whether any is due, until a statement of this pass has. */
  probeInput(): { namespace: string; limit: number } | null {
    const dynamic = this.context.dynamic;
    return dynamic === undefined || this.probed !== undefined || this.taken !== undefined ? null : { namespace: dynamic.namespace, limit: dynamic.limit };
  }

  /** What this pass found so far, as findings another pass can record (a pass over the dynamic entries, recorded by the tick's). */
  findings(): Findings {
    return { ...this.result, upcomingMs: this.upcomingMs };
  }

  /** Adds what a part of the pass found to its results. */
  record(found: Findings = NOTHING): void {
    const result = this.result;
    if (found.created !== undefined) result.created += found.created;
    if (found.upcomingMs !== undefined) this.upcomingMs = Math.min(this.upcomingMs, found.upcomingMs);
    for (const key of OUTCOME_LISTS) {
      const items = found[key];
      if (items !== undefined && items.length > 0) (result[key] as unknown[]).push(...items);
    }
  }

  /** The pass's report: its clock, what it found, and its next fire (the earliest of `earliestMs` and what its parts asked for). */
  report(nowMs: number, earliestMs: number): Omit<TickReport, "statements" | "attempts"> {
    const next = Math.min(earliestMs, this.upcomingMs);
    return { now: new Date(nowMs), ...this.result, nextFireAt: Number.isFinite(next) ? new Date(next) : null };
  }
}

const OUTCOME_LISTS = ["enqueued", "lostRace", "skippedStale", "skipped", "quarantined", "setAside", "locked", "repaired"] as const satisfies readonly Exclude<
  keyof PassResult,
  "created"
>[];

export function emptyResult(): PassResult {
  return { enqueued: [], lostRace: [], skippedStale: [], skipped: [], quarantined: [], setAside: [], locked: [], repaired: [], created: 0 };
}

export function outcome(entry: ResolvedEntry, slotMs: number): SlotOutcome {
  return { identity: entry.identity, key: entry.ledgerKey, jobName: entry.jobName, slot: new Date(slotMs) };
}

/**
 * An entry as the statements that fire it take it: its ledger key, its
 * job's name, queue, payload, priority and attempts, its overlap policy.
 * The one mapping, used by the pass (passEntry) and by a run-now
 * (src/cronledger.ts, trigger).
 */
export function entryJob(entry: ResolvedEntry): EntryJob {
  return {
    key: entry.ledgerKey,
    jobName: entry.jobName,
    queue: entry.queue,
    payloadJson: entry.payloadJson,
    priority: entry.priority,
    maxAttempts: entry.maxAttempts ?? entry.job.retry.maxAttempts,
    overlap: entry.overlap,
  };
}

/** An entry as the pass's statement takes it: entryJob with its catch-up window and the ledger value this process last saw of it. */
export function passEntry(entry: ResolvedEntry, knownLedgerMs: number | null): PassEntry {
  // Spread from entryJob, the one mapping, though writing the fields out measured ~13 ms less CPU per 5,000 due
  // dynamic entries (of ~400 ms): one home for the mapping is worth more than 3 %.
  return { ...entryJob(entry), catchUpWindowMs: entry.catchUpWindowMs, knownLedgerMs };
}

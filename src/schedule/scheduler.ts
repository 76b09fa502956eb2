import type { Database } from "../db/connection.js";
import { databaseNowMs, deleteLedgerRowsExcept, ledgerRows, type LedgerRow } from "../db/sql/ledger.js";
import type { ScheduleProblem } from "../errors.js";
import type { CronledgerEvents } from "../events.js";
import type { JobDefinition } from "../jobs/define-job.js";
import type { Logger } from "../log.js";
import { runTick, type TickMemory, type TickOptions, type TickReport } from "./tick.js";
import { loadSchedule, type ResolvedEntry } from "./validate.js";

/** A validated schedule: the application's entries, the chores' and the warnings. */
export interface LoadedSchedule {
  readonly entries: readonly ResolvedEntry[];
  readonly choreEntries: readonly ResolvedEntry[];
  readonly warnings: readonly ScheduleProblem[];
}

/**
 * Validates the application's schedule and the chores' entries in one pass
 * (duplicates are found across both; the chores come last), or throws one
 * ScheduleValidationError listing every problem: a process refuses to start
 * on a broken schedule. `jobs`: every job the entries may name.
 */
export function loadEntries(
  schedule: readonly unknown[],
  chores: readonly unknown[],
  jobs: readonly JobDefinition[],
  options: { readonly namespace: string; readonly maxPayloadBytes: number },
): LoadedSchedule {
  const loaded = loadSchedule([...schedule, ...chores], jobs, options);
  return {
    entries: loaded.entries.filter((entry) => entry.index < schedule.length),
    choreEntries: loaded.entries.filter((entry) => entry.index >= schedule.length),
    warnings: loaded.warnings,
  };
}

export interface SchedulerOptions {
  readonly database: Database;
  readonly namespace: string;
  readonly schedule: LoadedSchedule;
  readonly logger: Logger;
  readonly events: CronledgerEvents;
}

/**
 * The scheduler side of cronledger: the loaded entries, what the passes
 * remember between them (src/schedule/tick.ts's TickMemory), and the ledger
 * reads and deletes around them. One pass is `tick()`; planning is pure
 * (src/schedule/plan.ts) and the statement is src/db/sql/ledger.ts.
 */
export class Scheduler {
  readonly namespace: string;
  /** The application's entries. */
  readonly entries: readonly ResolvedEntry[];
  /** cronledger's reap and prune chores, as entries. */
  readonly choreEntries: readonly ResolvedEntry[];
  /** Load-time problems that do not stop an entry (never_matches). */
  readonly warnings: readonly ScheduleProblem[];
  private readonly database: Database;
  private readonly logger: Logger;
  private readonly events: CronledgerEvents;
  private readonly memory: TickMemory = { memo: new Map(), deferred: new Map(), clockOffsetMs: undefined };

  constructor(options: SchedulerOptions) {
    this.database = options.database;
    this.namespace = options.namespace;
    this.logger = options.logger;
    this.events = options.events;
    this.entries = options.schedule.entries;
    this.choreEntries = options.schedule.choreEntries;
    this.warnings = options.schedule.warnings;
    for (const warning of this.warnings) this.logger.warn(warning.message, { code: warning.code });
  }

  /** One pass at `now` (default: the database clock), over the app's entries and, with `chores`, the chores. */
  async tick(options: TickOptions, chores: boolean): Promise<TickReport> {
    const started = performance.now();
    const report = await runTick(
      {
        executor: this.database.db,
        statements: this.database.statements,
        entries: chores ? [...this.entries, ...this.choreEntries] : this.entries,
        namespace: this.namespace,
        logger: this.logger,
        memory: this.memory,
      },
      options,
    );
    this.events.tickCompleted(report, (performance.now() - started) / 1000);
    return report;
  }

  /** Deletes ledger rows of this namespace that no current entry (chores included) owns. */
  async pruneLedger(): Promise<number> {
    const keep = [...this.entries, ...this.choreEntries].map((entry) => entry.ledgerKey);
    const rows = await deleteLedgerRowsExcept(this.database.db, this.namespace, keep);
    this.events.pruned({ table: "schedule_state", rows });
    return rows;
  }

  /** The database clock and this namespace's ledger rows, by key. */
  async ledger(): Promise<{ nowMs: number; rows: ReadonlyMap<string, LedgerRow> }> {
    const [nowMs, rows] = await Promise.all([databaseNowMs(this.database.db), ledgerRows(this.database.db, this.namespace)]);
    return { nowMs, rows: new Map(rows.map((row) => [row.key, row])) };
  }
}

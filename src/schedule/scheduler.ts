import { createHash } from "node:crypto";
import type { Database } from "../db/connection.js";
import type { Executor } from "../db/executor.js";
import type { OverlapPolicy } from "../schema.js";
import { ledgerSnapshot, type LedgerRow } from "../db/sql/ledger.js";
import { clearQuarantine, heldLedgerKeys, pruneLedgerRows } from "../db/sql/ledger-rows.js";
import { reportSchedule, type ScheduleReport } from "../db/sql/workers.js";
import type { ScheduleProblem } from "../errors.js";
import type { CronledgerEvents, TickReport } from "../events.js";
import type { JobDefinition } from "../jobs/define-job.js";
import type { Logger } from "../log.js";
import type { Tracing } from "../tracing.js";
import { Pass, type TickMemory, type TickOptions } from "./pass.js";
import { runBackfill, type BackfillOptions, type BackfillResult } from "./backfill.js";
import { findEntry } from "./find-entry.js";
import { dynamicLedgerNamespace } from "./dynamic-entry.js";
import { DYNAMIC_LEASE_MS, DYNAMIC_TAKE_LIMIT, runTick } from "./tick.js";
import { loadSchedule, resolveSchedule, type ResolvedEntry } from "./validate.js";

/** A schedule entry that failed validation and does not run (`invalidEntries: "quarantine"`), with every problem found in it. */
export interface InvalidScheduleEntry {
  /** Its position in the schedule array. */
  readonly index: number;
  readonly jobName: string | null;
  /** Known once its cron and timezone are valid. */
  readonly identity: string | null;
  readonly problems: readonly ScheduleProblem[];
}

/** A validated schedule: the application's entries, the chores', the warnings and the invalid entries left out. */
export interface LoadedSchedule {
  readonly entries: readonly ResolvedEntry[];
  readonly choreEntries: readonly ResolvedEntry[];
  readonly warnings: readonly ScheduleProblem[];
  /** Empty unless `mode` was "quarantine" and some entries are invalid. */
  readonly invalid: readonly InvalidScheduleEntry[];
}

/**
 * Validates the application's schedule and the chores' entries in one pass
 * (duplicates are found across both; the chores come last). `mode` "fail":
 * any error throws one ScheduleValidationError listing every problem, and the
 * process refuses to start. "quarantine": the valid entries load and each
 * invalid one is returned with its problems, to be shown as broken; a broken
 * chore (a bad reapCron) still throws, since it is configuration.
 * `jobs`: every job the entries may name.
 */
export function loadEntries(
  schedule: readonly unknown[],
  chores: readonly unknown[],
  jobs: readonly JobDefinition[],
  options: {
    readonly namespace: string;
    readonly maxPayloadBytes: number;
    readonly mode: "quarantine" | "fail";
    /** The catch-up window of entries that set none; undefined: the default (src/schedule/validate.ts). */
    readonly catchUpWindowMs?: number | undefined;
    /** The overlap policy of entries that set none; undefined: "allow_all". */
    readonly overlap?: OverlapPolicy | undefined;
  },
): LoadedSchedule {
  const all = [...schedule, ...chores];
  const resolve = {
    namespace: options.namespace,
    maxPayloadBytes: options.maxPayloadBytes,
    ...(options.catchUpWindowMs === undefined ? {} : { catchUpWindowMs: options.catchUpWindowMs }),
    ...(options.overlap === undefined ? {} : { overlap: options.overlap }),
  };
  const split = (entries: readonly ResolvedEntry[]) => ({
    entries: entries.filter((entry) => entry.index < schedule.length),
    choreEntries: entries.filter((entry) => entry.index >= schedule.length),
  });
  if (options.mode === "fail") {
    const loaded = loadSchedule(all, jobs, resolve);
    return { ...split(loaded.entries), warnings: loaded.warnings, invalid: [] };
  }
  const { entries, problems } = resolveSchedule(all, jobs, resolve);
  const errors = problems.filter((problem) => problem.severity === "error");
  if (errors.some((problem) => problem.index >= schedule.length)) loadSchedule(all, jobs, resolve);
  const invalid = new Map<number, InvalidScheduleEntry>();
  for (const problem of errors) {
    const seen = invalid.get(problem.index);
    invalid.set(problem.index, {
      index: problem.index,
      jobName: seen?.jobName ?? problem.jobName ?? null,
      identity: seen?.identity ?? problem.identity ?? null,
      problems: [...(seen?.problems ?? []), problem],
    });
  }
  return {
    ...split(entries),
    warnings: problems.filter((problem) => problem.severity === "warning" && !invalid.has(problem.index)),
    invalid: [...invalid.values()],
  };
}

export interface SchedulerOptions {
  readonly database: Database;
  readonly namespace: string;
  readonly schedule: LoadedSchedule;
  readonly logger: Logger;
  readonly events: CronledgerEvents;
  /** The pass statement is cancelled after this long (src/db/statement-timeout.ts). */
  readonly passTimeoutMs: number;
  /** With the `tracing` option: passes and backfills as spans, their trace context stored with their jobs (src/tracing.ts). */
  readonly tracing?: Tracing | undefined;
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
  /** Entries left out because they are invalid (`invalidEntries: "quarantine"`). */
  readonly invalid: readonly InvalidScheduleEntry[];
  private readonly database: Database;
  private readonly logger: Logger;
  private readonly events: CronledgerEvents;
  private readonly memory: TickMemory = { memo: new Map(), deferred: new Map(), quarantined: new Set(), suspects: new Map(), paused: new Set(), locked: new Map(), clockOffsetMs: undefined };
  /** The passes' executor: cronledger's database, with the pass timeout. */
  private readonly passExecutor: Executor;
  private readonly passTimeoutMs: number;
  private readonly tracing: Tracing | undefined;

  constructor(options: SchedulerOptions) {
    this.tracing = options.tracing;
    this.database = options.database;
    this.namespace = options.namespace;
    this.logger = options.logger;
    this.events = options.events;
    this.entries = options.schedule.entries;
    this.choreEntries = options.schedule.choreEntries;
    this.warnings = options.schedule.warnings;
    this.invalid = options.schedule.invalid;
    this.passTimeoutMs = options.passTimeoutMs;
    this.passExecutor = this.database.withStatementTimeout(options.passTimeoutMs);
    for (const warning of this.warnings) this.logger.warn(warning.message, { code: warning.code });
    for (const entry of this.invalid) {
      this.logger.error("schedule entry is invalid and will not run; the other entries do (run `cronledger preflight` to check a schedule before deploying)", {
        index: entry.index,
        ...(entry.jobName === null ? {} : { job: entry.jobName }),
        problems: entry.problems.map((problem) => `[${problem.code}] ${problem.message}`),
      });
    }
  }

  /** One pass at `now` (default: the database clock), over the app's entries and, with `chores`, the chores. */
  async tick(options: TickOptions, chores: boolean): Promise<TickReport> {
    const started = performance.now();
    const pass = (traceContext?: () => string | null) =>
      runTick(
        new Pass(
          {
            executor: this.passExecutor,
            passTimeoutMs: this.passTimeoutMs,
            statements: this.database.statements,
            entries: chores ? [...this.entries, ...this.choreEntries] : this.entries,
            namespace: this.namespace,
            logger: this.logger,
            memory: this.memory,
            dynamic: { namespace: this.namespace, ledgerNamespace: dynamicLedgerNamespace(this.namespace), limit: DYNAMIC_TAKE_LIMIT, leaseMs: DYNAMIC_LEASE_MS },
            traceContext,
          },
          options,
        ),
      );
    const report = await (this.tracing === undefined ? pass() : this.tracing.pass(pass));
    this.events.tickCompleted(report, (performance.now() - started) / 1000);
    return report;
  }

  /**
   * Deletes the ledger rows of this namespace that no process has evaluated
   * for `graceMs`: not written by a pass, not reported by a running
   * schedule (src/db/sql/ledger-rows.ts, pruneLedgerRows), and not this process's own.
   */
  async pruneLedger(graceMs: number, now?: Date): Promise<number> {
    const keep = [...this.entries, ...this.choreEntries].map((entry) => entry.ledgerKey);
    const rows = await pruneLedgerRows(this.database.db, { namespace: this.namespace, keep, graceMs, now });
    this.events.pruned({ table: "schedule_state", rows });
    return rows;
  }

  /** Reports this process's schedule as running (src/db/sql/workers.ts), so the prune chore keeps its rows whoever runs it. */
  reportSchedule(): Promise<void> {
    return reportSchedule(this.database.db, this.scheduleReport());
  }

  /** This process's schedule as a version the prune chore must keep while it runs: its ledger keys (chores included) and their digest. */
  scheduleReport(): ScheduleReport {
    const ledgerKeys = [...new Set([...this.entries, ...this.choreEntries].map((entry) => entry.ledgerKey))].sort();
    const digest = createHash("sha256").update(ledgerKeys.join("\n")).digest("hex");
    return { namespace: this.namespace, digest, ledgerKeys };
  }

  /**
   * Enqueues one job per missed slot of entry `name` in a range, or lists
   * them (`dryRun`): src/schedule/backfill.ts. Never a slot that already has
   * a job, nor one after the ledger (the ticker's).
   */
  async backfill(name: string | ResolvedEntry, options: BackfillOptions): Promise<BackfillResult> {
    const entry = typeof name === "string" ? findEntry(this.entries, name) : name;
    const result = await runBackfill(this.database.db, this.namespace, entry, options, this.tracing);
    if (!result.dryRun) {
      this.logger.info("backfilled an entry's missed slots", {
        entry: entry.entryKey ?? entry.jobName,
        from: result.from.toISOString(),
        to: result.to.toISOString(),
        enqueued: result.enqueued,
        existing: result.existing,
        ahead: result.ahead,
      });
    }
    return result;
  }

  /**
   * Clears the quarantine of the entry with this ledger key (or identity, for
   * an entry of this process's schedule): every replica's next pass fires
   * its due slot (src/schedule/tick.ts reads the rows of the entries it holds
   * back). Undefined when this namespace has no such ledger row.
   */
  async clearQuarantine(keyOrIdentity: string): Promise<{ key: string; jobName: string; wasQuarantined: boolean } | undefined> {
    const own = [...this.entries, ...this.choreEntries].find((entry) => entry.identity === keyOrIdentity);
    const row = await clearQuarantine(this.database.db, this.namespace, own?.ledgerKey ?? keyOrIdentity);
    if (row === undefined) return undefined;
    this.logger.info("quarantine cleared; every replica's next pass fires the entry's due slot", { ledgerKey: row.key, job: row.job_name, wasQuarantined: row.was_quarantined });
    return { key: row.key, jobName: row.job_name, wasQuarantined: row.was_quarantined };
  }

  /** Of these ledger keys, those whose row another session holds locked: one statement, waiting for none. */
  heldLedgerKeys(keys: readonly string[]): Promise<string[]> {
    return heldLedgerKeys(this.database.db, keys);
  }

  /** The database clock and this namespace's ledger rows, by key: one statement. */
  async ledger(): Promise<{ nowMs: number; rows: ReadonlyMap<string, LedgerRow> }> {
    const { nowMs, rows } = await ledgerSnapshot(this.database.db, this.namespace);
    return { nowMs, rows: new Map(rows.map((row) => [row.key, row])) };
  }
}

import type { CarriedState, DeployPlan, PlanEntry, PlanRow, RemovedRow } from "../schedule/deploy-plan.js";
import type { PreflightProblemDocument } from "./commands.js";
import { upcomingSlotDocument, type UpcomingSlotDocument } from "./upcoming.js";
import { iso, WIRE_VERSION, type Versioned } from "./version.js";

export interface CarriedDocument {
  readonly paused: { readonly at: string; readonly by: string | null; readonly note: string | null } | null;
  readonly quarantine: { readonly until: string; readonly count: number; readonly reason: string | null } | null;
  readonly waiting_for_worker: number;
}

/** A live ledger row: its key, job, the identity read back from the key (null when bounded to a digest), ledger value and live jobs. */
export interface PlanRowDocument {
  readonly key: string;
  readonly job: string;
  readonly identity: { readonly job: string; readonly key: string | null; readonly cron: string; readonly timezone: string } | null;
  /** The row's creation instant while `handled` is false. */
  readonly last_enqueued_slot: string;
  /** False while the entry never fired: no slot was handled since the row was created. */
  readonly handled: boolean;
  readonly queued: number;
  readonly running: number;
  readonly carried: CarriedDocument;
}

/** One entry of the new config and what happens to it. */
export interface PlanEntryDocument {
  readonly kind: "added" | "unchanged" | "retimed" | "rekeyed";
  readonly identity: string;
  readonly key: string | null;
  readonly job: string;
  readonly cron: string;
  readonly timezone: string;
  readonly chore: boolean;
  /** Whether a live worker registers the job now; false: its jobs wait until the new workers start. */
  readonly served: boolean;
  /** unchanged: its own row; retimed/rekeyed: the old identity's row, which retires. */
  readonly row: PlanRowDocument | null;
  readonly first: UpcomingSlotDocument | null;
  readonly overdue: { readonly slot: string; readonly stale: boolean; readonly passed_over: number; readonly handled_at: string } | null;
  readonly switch: { readonly last_old: string | null; readonly first_new: string | null; readonly verdict: string; readonly message: string } | null;
  readonly retires_at: string | null;
}

export interface PlanRemovedDocument {
  readonly row: PlanRowDocument;
  readonly chore: boolean;
  readonly retires_at: string;
  readonly served_by_live_worker: boolean;
  readonly served_by_new_config: boolean;
}

/** `cronledger plan --json`: the new config against the live ledger, workers and jobs. */
export interface PlanDocument extends Versioned {
  readonly ok: boolean;
  readonly config: string | null;
  readonly namespace: string;
  readonly database_now: string;
  readonly switch_at: string;
  readonly grace_ms: number;
  readonly live_workers: number;
  readonly retires_rows: boolean;
  readonly drops_job_names: boolean;
  readonly entries: readonly PlanEntryDocument[];
  readonly removed: readonly PlanRemovedDocument[];
  readonly dropped_job_names: readonly { readonly job: string; readonly queued: number; readonly running: number }[];
  /** Stored dynamic entries (`ledger.schedules`) whose job the new config does not define, in all and by job; null when the database has none of their table yet. */
  readonly dynamic_orphans: { readonly total: number; readonly by_job: Readonly<Record<string, number>> } | null;
  /** dynamic_orphans.total > 0: needs approval, like a dropped job name. */
  readonly orphans_dynamic_entries: boolean;
  readonly unserved_job_names: readonly string[];
  /** The preflight problems of the new config, as `cronledger preflight --json` lists them. */
  readonly problems: readonly PreflightProblemDocument[];
}

const date = (ms: number) => iso(new Date(ms));

function carriedDocument(carried: CarriedState): CarriedDocument {
  return {
    paused: carried.paused === null ? null : { at: date(carried.paused.atMs), by: carried.paused.by, note: carried.paused.note },
    quarantine: carried.quarantine === null ? null : { until: date(carried.quarantine.untilMs), count: carried.quarantine.count, reason: carried.quarantine.reason },
    waiting_for_worker: carried.waitingForWorker,
  };
}

function rowDocument(row: PlanRow): PlanRowDocument {
  const identity = row.identity;
  return {
    key: row.key,
    job: row.jobName,
    identity: identity === null ? null : { job: identity.jobName, key: identity.entryKey ?? null, cron: identity.cron, timezone: identity.timezone },
    last_enqueued_slot: date(row.lastSlotMs),
    handled: row.handled,
    queued: row.queued,
    running: row.running,
    carried: carriedDocument(row.carried),
  };
}

function entryDocument(item: PlanEntry): PlanEntryDocument {
  const { entry } = item;
  return {
    kind: item.kind,
    identity: entry.identity,
    key: entry.entryKey ?? null,
    job: entry.jobName,
    cron: entry.cron.source,
    timezone: entry.timezone,
    chore: item.chore,
    served: item.served,
    row: item.row === null ? null : rowDocument(item.row),
    first: item.first === null ? null : upcomingSlotDocument(item.first),
    overdue: item.overdue === null ? null : { slot: date(item.overdue.slotMs), stale: item.overdue.stale, passed_over: item.overdue.passedOver, handled_at: date(item.overdueAtMs ?? item.overdue.slotMs) },
    switch:
      item.switchCheck === null
        ? null
        : {
            last_old: item.switchCheck.lastOldMs === null ? null : date(item.switchCheck.lastOldMs),
            first_new: item.switchCheck.firstNewMs === null ? null : date(item.switchCheck.firstNewMs),
            verdict: item.switchCheck.verdict,
            message: item.switchCheck.message,
          },
    retires_at: item.retiresAtMs === null ? null : date(item.retiresAtMs),
  };
}

function removedDocument(item: RemovedRow): PlanRemovedDocument {
  return {
    row: rowDocument(item.row),
    chore: item.chore,
    retires_at: date(item.retiresAtMs),
    served_by_live_worker: item.servedByLiveWorker,
    served_by_new_config: item.servedByNewConfig,
  };
}

export function planDocument(plan: DeployPlan, config: string | null, problems: readonly PreflightProblemDocument[]): PlanDocument {
  return {
    version: WIRE_VERSION,
    ok: !problems.some((problem) => problem.severity === "error"),
    config,
    namespace: plan.namespace,
    database_now: date(plan.nowMs),
    switch_at: date(plan.atMs),
    grace_ms: plan.graceMs,
    live_workers: plan.liveWorkers,
    retires_rows: plan.retiresRows,
    drops_job_names: plan.dropsJobNames,
    entries: plan.entries.map(entryDocument),
    removed: plan.removed.map(removedDocument),
    dropped_job_names: plan.droppedJobNames.map((name) => ({ job: name.jobName, queued: name.queued, running: name.running })),
    unserved_job_names: plan.unservedJobNames,
    dynamic_orphans: plan.dynamicOrphans === null ? null : { total: plan.dynamicOrphans.total, by_job: plan.dynamicOrphans.byJob },
    orphans_dynamic_entries: plan.orphansDynamicEntries,
    problems,
  };
}

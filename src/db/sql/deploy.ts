import { sql } from "drizzle-orm";
import { jobQueue, scheduleState, scheduleVersions, workers } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { epochMs } from "./fragments.js";

/**
 * What a deploy plan reads of the live system (src/schedule/deploy-plan.ts):
 * the ledger rows of a namespace with their carried state, the live workers
 * and the live jobs, in one read-only statement, so the parts agree with
 * each other and with the database clock they were read at. Arrays and rows
 * travel as JSON text: every driver returns the same strings, whatever it
 * knows of array types.
 */

export interface DeployLedgerRow {
  readonly key: string;
  readonly job_name: string;
  readonly slot_ms: number;
  readonly created_ms: number;
  readonly updated_ms: number;
  readonly quarantined_until_ms: number | null;
  readonly quarantine_reason: string | null;
  readonly quarantine_count: number;
  readonly paused_ms: number | null;
  readonly paused_by: string | null;
  readonly paused_note: string | null;
  /** When a running process last reported a schedule holding this key (the prune grace counts from the later of this and `updated_ms`). */
  readonly reported_ms: number | null;
}

export interface DeployWorkerRow {
  readonly id: string;
  readonly job_names: readonly string[];
  readonly queues: readonly string[];
}

/** Live jobs (queued or running) per job name, queue and schedule key. */
export interface DeployJobGroup {
  readonly job_name: string;
  readonly queue: string;
  readonly schedule_key: string | null;
  readonly queued: number;
  readonly running: number;
}

export interface DeployRead {
  readonly nowMs: number;
  readonly rows: readonly DeployLedgerRow[];
  readonly workers: readonly DeployWorkerRow[];
  readonly jobs: readonly DeployJobGroup[];
}

const s = scheduleState;
const w = workers;
const q = jobQueue;
const v = scheduleVersions;

export async function readDeployState(executor: Executor, namespace: string): Promise<DeployRead> {
  const [row] = await query<{ now_ms: number; rows: string | null; workers: string | null; jobs: string | null }>(
    executor,
    sql`select ${epochMs(sql`now()`)} as now_ms,
      (select json_agg(json_build_object(
          'key', ${s.key}, 'job_name', ${s.jobName}, 'slot_ms', ${epochMs(s.lastEnqueuedSlot)}, 'created_ms', ${epochMs(s.createdAt)},
          'updated_ms', ${epochMs(s.updatedAt)}, 'quarantined_until_ms', ${epochMs(s.quarantinedUntil)}, 'quarantine_reason', ${s.quarantineReason},
          'quarantine_count', ${s.quarantineCount}, 'paused_ms', ${epochMs(s.pausedAt)}, 'paused_by', ${s.pausedBy}, 'paused_note', ${s.pausedNote},
          'reported_ms', r.reported_ms
        ) order by ${s.key})::text
        from ${scheduleState}
        -- Each key's latest report, from one pass over the versions (not one per row).
        left join (select k.key, ${epochMs(sql`max(${v.reportedAt})`)} as reported_ms
                   from ${scheduleVersions}, unnest(${v.ledgerKeys}) as k(key) where ${v.namespace} = ${namespace} group by k.key) as r
          on r.key = ${s.key}
        where ${s.namespace} = ${namespace}) as rows,
      (select json_agg(json_build_object('id', ${w.id}, 'job_names', ${w.jobNames}, 'queues', ${w.queues}) order by ${w.id})::text
        from ${workers}
        where ${w.namespace} = ${namespace} and ${w.heartbeatAt} >= now() - ${w.leaseMs} * interval '1 millisecond') as workers,
      (select json_agg(g order by g.job_name, g.queue, g.schedule_key)::text from (
          select ${q.jobName} as job_name, ${q.queue} as queue, ${q.scheduleKey} as schedule_key,
            count(*) filter (where ${q.status} in ('queued', 'held'))::int as queued, count(*) filter (where ${q.status} = 'running')::int as running
          from ${jobQueue} group by 1, 2, 3) as g) as jobs`,
  );
  const parse = <T>(text: string | null | undefined): T[] => (text ? (JSON.parse(text) as T[]) : []);
  return { nowMs: row?.now_ms ?? Date.now(), rows: parse(row?.rows), workers: parse(row?.workers), jobs: parse(row?.jobs) };
}

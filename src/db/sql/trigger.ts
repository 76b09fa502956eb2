import { sql } from "drizzle-orm";
import { jobKeys } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { JOB_INSERT, SLOT_POLICY } from "./ctes.js";
import { epochMs } from "./fragments.js";
import { jobInsertCtes } from "./jobs.js";
import type { EntryJob } from "./ledger.js";
import { slotJobStatus, slotPolicyCtes } from "./slot-policy.js";

/** A run-now of one schedule entry: what its job is made of, and the request's idempotency key. */
export interface TriggerInput extends EntryJob {
  /** The job's idempotency key, which says who asked (src/jobs/trigger-key.ts). */
  readonly idempotencyKey: string;
  /** What job_keys guards: the request id and the entry, not who asked (src/jobs/trigger-key.ts). */
  readonly requestKey: string;
  /** The run-now's producer span context, as JSON (src/open-telemetry.ts); null when the process does not trace. */
  readonly traceContextJson?: string | null;
}

export interface TriggerRow {
  /** The job an earlier request with the same id made (a double click); null otherwise. */
  existing_id: number | null;
  /** The job this request made; null when it was skipped, or when the key existed. */
  job_id: number | null;
  skip_reason: string | null;
  skip_detail: string | null;
  /** The history row recording a skipped run-now. */
  skipped_job_id: number | null;
  slot_ms: number;
}

/**
 * A run-now as one statement: unless a job already holds the request's key
 * (its request id for this entry, whoever sent it),
 * the entry's overlap policy decides it like a slot of the pass
 * (src/db/sql/slot-policy.ts: skipped and recorded, or superseding the
 * waiting and running jobs, or enqueued), and its job goes in through the
 * one job insert with the entry's payload, the trigger instant as its slot.
 * A pause does not stop a run-now (Temporal's trigger-immediately runs a
 * paused schedule too).
 */
export async function triggerEntry(executor: Executor, input: TriggerInput): Promise<TriggerRow> {
  const k = jobKeys;
  const [row] = await query<TriggerRow>(
    executor,
    sql`with existing as (
          select ${k.jobId} as job_id from ${jobKeys} where ${k.jobName} = ${input.jobName} and ${k.idempotencyKey} = ${input.requestKey}
        ), ${slotPolicyCtes(
          sql`select ${input.key}::text as key, now() as slot_at, ${input.overlap}::text as overlap, false as paused, null::text as paused_by,
                null::text as paused_note, ${input.jobName}::text as job_name, ${input.queue}::text as queue, ${input.payloadJson}::text as payload,
                ${input.priority}::int as priority, ${input.maxAttempts}::int as max_attempts
              where not exists (select 1 from existing)`,
          sql`now()`,
        )}, ${jobInsertCtes(
          sql`
          select job_name, queue, payload::jsonb, priority, now(), max_attempts, ${input.idempotencyKey}::text, key, slot_at::timestamptz, null::jsonb,
            ${input.traceContextJson ?? null}::jsonb, ${slotJobStatus(SLOT_POLICY.decided)}
          from ${SLOT_POLICY.decided} where skip_reason is null`,
          { withStatus: true, guardKey: sql`${input.requestKey}::text` },
        )}
        select (select job_id from existing)::float8 as existing_id, (select id from ${JOB_INSERT.inserted} limit 1)::float8 as job_id,
          (select skip_reason from ${SLOT_POLICY.decided} limit 1) as skip_reason, (select skip_detail from ${SLOT_POLICY.decided} limit 1) as skip_detail,
          (select id from ${SLOT_POLICY.moved} where status = 'skipped' limit 1)::float8 as skipped_job_id, ${epochMs(sql`now()`)} as slot_ms
        from ${JOB_INSERT.notified} cross join ${SLOT_POLICY.overlapNotified}`,
  );
  if (row === undefined) throw new Error("cronledger: a run-now returned no row");
  return row;
}

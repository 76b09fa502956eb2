import { sql, type SQL } from "drizzle-orm";
import { JobNotRegisteredError } from "../../errors.js";
import { jobQueue, scheduleVersions, workers } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { alias } from "drizzle-orm/pg-core";
import { ARCHIVE } from "./ctes.js";
import { array, clock, epochMs, milliseconds, name } from "./fragments.js";
import { archiveCtes, movedToHistory } from "./history.js";

/**
 * The registry of what is running: workers (`cronledger.workers`: the job
 * names and queues each can run, and its heartbeat) and the schedules that
 * running processes report (`cronledger.schedule_versions`). The claim
 * (src/db/sql/jobs.ts) filters by a worker's own names; these statements
 * answer what no live worker can run, and which ledger keys some live
 * version of the app still evaluates.
 */

/** What a worker registers: who it is, what it runs, and how long its heartbeat stays good. */
export interface WorkerRegistration {
  readonly id: string;
  readonly namespace: string;
  readonly jobNames: readonly string[];
  readonly queues: readonly string[];
  readonly leaseMs: number;
}

/** A worker is live while its heartbeat is younger than its lease. */
const liveWorker = sql`${workers.heartbeatAt} >= now() - ${workers.leaseMs} * interval '1 millisecond'`;

/**
 * The upsert that registers `worker` or refreshes its heartbeat, as a
 * statement a CTE can hold: the job heartbeat (src/db/sql/jobs.ts) carries
 * it, so a worker's registration costs no statement of its own, and a row
 * the prune chore removed while the worker was cut off comes back.
 */
export function registerWorker(worker: WorkerRegistration): SQL {
  return sql`insert into ${workers} (${name(workers.id)}, ${name(workers.namespace)}, ${name(workers.jobNames)}, ${name(workers.queues)}, ${name(workers.leaseMs)})
    values (${worker.id}, ${worker.namespace}, ${array(worker.jobNames, "text")}, ${array(worker.queues, "text")}, ${Math.round(worker.leaseMs)})
    on conflict (${name(workers.id)}) do update set ${name(workers.heartbeatAt)} = now()`;
}

/**
 * A worker that stopped: no longer live (a lease of 0), but its row stays, with
 * its last heartbeat, as the record that its job names were registered then
 * (failUnregisteredJobs); pruneWorkers deletes it later.
 */
export async function unregisterWorker(executor: Executor, id: string): Promise<void> {
  await executor.execute(sql`update ${workers} set ${name(workers.leaseMs)} = 0, ${name(workers.heartbeatAt)} = now() where ${workers.id} = ${id}`);
}

/**
 * Deletes the rows of workers whose heartbeat is older than `olderThanMs`
 * (they stopped, or died without stopping); returns how many. Judged by the
 * database clock always: whether a process is alive is not a matter of
 * `tick({ now })`. The prune chore keeps them as long as failUnregisteredJobs
 * looks back.
 */
export async function pruneWorkers(executor: Executor, olderThanMs: number): Promise<number> {
  const [row] = await query<{ n: number }>(
    executor,
    sql`with gone as (delete from ${workers} where ${workers.heartbeatAt} < now() - ${milliseconds(olderThanMs)} returning 1)
        select count(*)::int as n from gone`,
  );
  return row?.n ?? 0;
}

/** No live worker serves this job's queue and knows its name. */
const unknownToLiveWorkers = (jobName: SQL, queue: SQL) =>
  sql`not exists (select 1 from ${workers} where ${liveWorker} and ${jobName} = any(${workers.jobNames}) and ${queue} = any(${workers.queues}))`;

export interface WaitingJobs {
  job_name: string;
  count: number;
  oldest_ms: number;
  /** How long the oldest has been ready, by the same clock. */
  waited_ms: number;
}

/**
 * Ready jobs that no live worker can run (no worker that serves their queue
 * knows their name), by job name, with the instant the oldest became ready.
 * Counted per queue and name first, so the registry is consulted once per
 * group, not once per job.
 */
export async function jobsWaitingForWorker(executor: Executor, now?: Date): Promise<WaitingJobs[]> {
  return query<WaitingJobs>(
    executor,
    sql`select job_name, sum(n)::int as count, ${epochMs(sql`min(oldest)`)} as oldest_ms,
          ${epochMs(sql`${clock(now)}`)} - ${epochMs(sql`min(oldest)`)} as waited_ms
        from (
          select ${jobQueue.queue} as queue, ${jobQueue.jobName} as job_name, count(*) as n, min(${jobQueue.runAt}) as oldest
          from ${jobQueue} where ${jobQueue.status} = 'queued' and ${jobQueue.runAt} <= ${clock(now)}
          group by 1, 2
        ) as ready
        where ${unknownToLiveWorkers(sql`ready.job_name`, sql`ready.queue`)}
        group by job_name order by job_name`,
  );
}

/** No worker, live or stopped, that serves this job's queue has registered its name within `withinMs` (by its last heartbeat). */
const unregisteredWithin = (jobName: SQL, queue: SQL, withinMs: number, now: Date | undefined) =>
  sql`not exists (select 1 from ${workers} where ${workers.heartbeatAt} >= ${clock(now)} - ${milliseconds(withinMs)}
        and ${jobName} = any(${workers.jobNames}) and ${queue} = any(${workers.queues}))`;

/**
 * Fails, with a JobNotRegisteredError, queued jobs that have been ready for
 * longer than `olderThanMs` and whose name no worker serving their queue has
 * registered within `olderThanMs`, live or not: stored jobs that can never run
 * (a job removed from the code, a typo in a raw enqueue). Never a name in
 * `registered` (the calling process's own jobs), nor one whose workers are
 * merely all down: a job that waits through a rolling deploy or a maintenance
 * is never touched.
 */
export async function failUnregisteredJobs(
  executor: Executor,
  olderThanMs: number,
  registered: readonly string[],
  now?: Date,
): Promise<{ failed: number; failedByJob: Record<string, number> }> {
  const q = jobQueue;
  const j = alias(jobQueue, "j");
  const error = sql`format(${JobNotRegisteredError.UNCLAIMED_FORMAT}::text, ${j.jobName}, ${j.queue}, ${`${+(olderThanMs / 3_600_000).toFixed(2)} h`}::text)`;
  const rows = await query<{ job_name: string; n: number }>(
    executor,
    sql`with doomed as (
          select ${q.id} as id from ${jobQueue}
          where ${q.status} = 'queued' and ${q.runAt} < ${clock(now)} - ${milliseconds(olderThanMs)}
            and not ${q.jobName} = any(${array(registered, "text")})
            and ${unregisteredWithin(sql`${q.jobName}`, sql`${q.queue}`, olderThanMs, now)}
          for update skip locked
        ), ${ARCHIVE.moved} as (
          delete from ${jobQueue} as j where ${j.id} = any(array(select id from doomed))
          returning ${movedToHistory({ status: sql`'failed'`, outcome: sql`null::text`, lastError: error })}
        ), ${archiveCtes()}
        select job_name, count(*)::int as n from ${ARCHIVE.moved} group by job_name`,
  );
  return { failed: rows.reduce((sum, row) => sum + row.n, 0), failedByJob: Object.fromEntries(rows.map((row) => [row.job_name, row.n])) };
}

export interface ScheduleReport {
  readonly namespace: string;
  readonly digest: string;
  readonly ledgerKeys: readonly string[];
}

/**
 * Records that a process running this schedule is alive. The first report
 * of a version stores its keys; later ones only move `reported_at`, so a
 * refresh sends the keys only when the row was pruned meanwhile.
 */
export async function reportSchedule(executor: Executor, report: ScheduleReport): Promise<void> {
  const refreshed = await query<{ ok: number }>(
    executor,
    sql`update ${scheduleVersions} set ${name(scheduleVersions.reportedAt)} = now()
        where ${scheduleVersions.namespace} = ${report.namespace} and ${scheduleVersions.digest} = ${report.digest} returning 1 as ok`,
  );
  if (refreshed.length > 0) return;
  await executor.execute(
    sql`insert into ${scheduleVersions} (${name(scheduleVersions.namespace)}, ${name(scheduleVersions.digest)}, ${name(scheduleVersions.ledgerKeys)})
        values (${report.namespace}, ${report.digest}, ${array(report.ledgerKeys, "text")})
        on conflict (${name(scheduleVersions.namespace)}, ${name(scheduleVersions.digest)}) do update set ${name(scheduleVersions.reportedAt)} = now()`,
  );
}

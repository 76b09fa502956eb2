import { sql, type SQL } from "drizzle-orm";
import { expect } from "vitest";
import { query, type Database } from "../../src/db/connection.js";
import type { OverlapPolicy } from "../../src/schema.js";

/**
 * What the overlap-policy acceptance tests (test/overlap-replicas.test.ts on a static entry,
 * test/dynamic-overlap-replicas.test.ts on a dynamic one) read and assert, shared so the two hold the
 * same invariants: the entry's jobs are the rows `where` selects (a job name, or a schedule key), the
 * handlers record their runs in `overlap_runs` (test/fixtures/overlap-job.ts).
 */

/** The entry's live jobs at one step. */
export interface QueueSample {
  queued: number;
  held: number;
  running: number;
  /** Running jobs older than the entry's newest live job that were not asked to stop. */
  unasked: number;
}

type Db = Database["db"];

/** The table the fixtures' jobs record their runs in. */
export const OVERLAP_RUNS_TABLE = sql`create table overlap_runs (job_id bigint primary key, replica text not null, started timestamptz not null, ended timestamptz)`;

export async function sampleQueue(db: Db, where: SQL): Promise<QueueSample | undefined> {
  const [sample] = await query<QueueSample>(
    db,
    sql`select count(*) filter (where status = 'queued')::int as queued, count(*) filter (where status = 'held')::int as held,
          count(*) filter (where status = 'running')::int as running,
          count(*) filter (where status = 'running' and cancel_requested_at is null and id < (select max(id) from cronledger.job_queue where ${where}))::int as unasked
        from cronledger.job_queue where ${where}`,
  );
  return sample;
}

/** The entry's job rows by slot, and its runs as the handlers' clocks and the history saw them. */
export interface OverlapFindings {
  readonly rows: readonly { slot_ms: number; status: string; outcome: string | null }[];
  /** The most runs at once by the handlers' clocks. */
  readonly mostAtOnce: number;
  readonly runCount: number;
  readonly attemptCount: number;
  /** Pairs of attempts whose claim and end (history) overlap. */
  readonly overlapping: readonly string[];
}

export async function overlapFindings(db: Db, where: SQL): Promise<OverlapFindings> {
  const rows = await query<{ slot_ms: number; status: string; outcome: string | null }>(
    db,
    sql`select (extract(epoch from scheduled_for) * 1000)::float8 as slot_ms, status, outcome from cronledger.jobs where ${where} order by scheduled_for, id`,
  );
  const runs = await query<{ started_ms: number; ended_ms: number | null }>(
    db,
    sql`select (extract(epoch from started) * 1000)::float8 as started_ms, (extract(epoch from ended) * 1000)::float8 as ended_ms from overlap_runs order by started`,
  );
  const mostAtOnce = Math.max(...runs.map((a) => runs.filter((b) => b.started_ms <= a.started_ms && (b.ended_ms ?? Infinity) > a.started_ms).length));
  // The history's view of the same runs: each attempt's claim (started_at) and its end (finished_at; null while it runs).
  const attempts = await query<{ id: number; started_ms: number; finished_ms: number | null }>(
    db,
    sql`select id::float8 as id, (extract(epoch from started_at) * 1000)::float8 as started_ms, (extract(epoch from finished_at) * 1000)::float8 as finished_ms
        from cronledger.jobs where ${where} and started_at is not null order by started_at, id`,
  );
  const overlapping = attempts.flatMap((a, index) =>
    attempts.slice(index + 1).filter((b) => b.started_ms < (a.finished_ms ?? Infinity)).map((b) => `#${a.id} and #${b.id}`),
  );
  return { rows, mostAtOnce, runCount: runs.length, attemptCount: attempts.length, overlapping };
}

/** The policy's invariants over a run of `samples` steps in which the replicas reported `skippedSlots` slots skipped. */
export function expectOverlapPolicy(policy: OverlapPolicy, findings: OverlapFindings, samples: readonly QueueSample[], skippedSlots: number): void {
  const { rows, mostAtOnce, overlapping } = findings;
  const skippedRows = rows.filter((row) => row.status === "skipped");
  expect(findings.runCount).toBeGreaterThanOrEqual(2);
  if (policy === "skip") {
    // Never two jobs of the entry queued or running at once: in the queue at every step, and in the handlers' own clocks.
    expect(samples.every((sample) => sample.queued + sample.running <= 1), JSON.stringify(samples)).toBe(true);
    expect(mostAtOnce).toBe(1);
    expect(skippedSlots).toBeGreaterThan(0);
    expect(skippedRows).toHaveLength(skippedSlots);
    expect(skippedRows.every((row) => row.outcome === "overlap")).toBe(true);
  } else if (policy === "buffer_one") {
    // One runs at a time, at most one waits (held behind it), slots beyond that are skipped; runs never overlap.
    expect(samples.every((sample) => sample.running <= 1 && sample.queued + sample.held <= 1), JSON.stringify(samples)).toBe(true);
    expect(samples.some((sample) => sample.held === 1), JSON.stringify(samples)).toBe(true);
    expect(mostAtOnce).toBe(1);
    expect(overlapping).toEqual([]);
    expect(findings.attemptCount).toBeGreaterThanOrEqual(3);
    expect(skippedSlots).toBeGreaterThan(0);
    expect(skippedRows).toHaveLength(skippedSlots);
    expect(skippedRows.every((row) => row.outcome === "overlap")).toBe(true);
  } else if (policy === "cancel_other") {
    // Nothing is skipped; one runs at a time and at most one waits; every running job older than the newest has been asked
    // to stop; the replacing job starts only after the stopped one has ended.
    expect(skippedSlots).toBe(0);
    expect(skippedRows).toEqual([]);
    expect(samples.every((sample) => sample.running <= 1 && sample.queued + sample.held <= 1 && sample.unasked === 0), JSON.stringify(samples)).toBe(true);
    // The handlers never overlap (their own records, stamped by the server's clock): the policy's promise.
    expect(mostAtOnce).toBe(1);
    // And the history agrees: the replacing job's claim (started_at) after the stopped one's end (finished_at). A claim's
    // stamp is read while it runs, after the snapshot that found the released job (claimJobs, src/db/sql/jobs.ts); with
    // now(), fixed at its Bind, a loaded machine once showed it before that end (test/overlap.test.ts, "a held job's claim").
    expect(overlapping).toEqual([]);
    // The policy acted: running jobs were stopped (they end cancelled) and their replacements waited held.
    expect(rows.filter((row) => row.status === "cancelled").length).toBeGreaterThan(0);
    expect(samples.some((sample) => sample.held === 1), JSON.stringify(samples)).toBe(true);
  } else {
    // allow_all: every slot is enqueued and runs whatever runs already; with jobs of three periods, several at once.
    expect(skippedSlots).toBe(0);
    expect(skippedRows).toEqual([]);
    expect(samples.every((sample) => sample.held === 0), JSON.stringify(samples)).toBe(true);
    expect(mostAtOnce).toBeGreaterThan(1);
    expect(overlapping.length).toBeGreaterThan(0);
  }
}

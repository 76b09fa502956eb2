// The soak's invariant checker: after the quiet drain, it reads the database and the handlers' side-effect log and
// says which of cronledger's promises did not hold. Each violation names its check; the orchestrator prints them
// with the seed to replay. The checks (docs/benchmarks.md, "Fault soak"):
//
// - enqueue-terminal: every acknowledged enqueue is one job that ended (succeeded, or failed/cancelled: its ticket);
// - job-row-once: no job is in the queue and the history, or twice in the history;
// - effect-explained: every side effect belongs to an attempt the database recorded (attempt <= the job's attempts);
// - effect-once: no run of an attempt wrote its side effect twice;
// - attempt-run-once: no attempt ran twice (in two processes, or twice in one) but where a record, a kill or a
//   server crash explains it;
// - success-has-effect: a succeeded job's last attempt did end well in a handler;
// - success-kept: a job whose last attempt ended well in a handler is succeeded, but where its process was killed
//   (or the server crashed) before the result could be written;
// - completed-not-rerun: an attempt that ended well is the job's last one, or its result is on record
//   (superseded_attempts), or its process was killed (or the server crashed) before it could be written;
// - slot-once / slot-missing: each slot of each entry has one row, none missing outside an all-down period;
// - overlap-<policy>: runs of a skip, buffer_one or cancel_other entry never overlap, but where a fault took one's
//   lease (its replica killed, cut off, slowed or its server restarted while it ran);
// - process-died / replica-stop: no replica ended but the ones killed, and each stopped on SIGTERM at the end.
import type { Sql } from "postgres";
import { OVERLAP_ENTRIES, SLOT_MS, WORK_JOB, type Effect, type Overlap } from "./shape.js";

export interface Interval {
  readonly from: number;
  readonly to: number;
}

export interface Violation {
  readonly check: string;
  readonly detail: string;
}

export interface CheckInput {
  readonly sql: Sql;
  readonly effects: readonly Effect[];
  /** Acknowledged enqueues: idempotency key and the job id the enqueue returned. */
  readonly acks: readonly { readonly key: string; readonly id: number }[];
  /** Per replica, when it was impaired (killed, cut off, slowed, answered with errors). */
  readonly impaired: readonly (readonly Interval[])[];
  /** When the server was down (stopped, until started again). */
  readonly serverDown: readonly Interval[];
  /** When the server was stopped in immediate mode (a crash: unflushed commits are lost). */
  readonly serverCrashes: readonly number[];
  /** Processes the orchestrator SIGKILLed, by pid, and when. */
  readonly killed: ReadonlyMap<number, number>;
  /** Replica processes that ended without being killed, or did not stop on SIGTERM. */
  readonly deaths: readonly string[];
  readonly unstopped: readonly string[];
  /** The slots to expect: from the first to the last of this window. */
  readonly window: Interval;
}

interface JobRow {
  id: number;
  job_name: string;
  status: string;
  attempts: number;
  idempotency_key: string | null;
  scheduled_for_ms: number | null;
  in_queue: boolean;
}

/** After an all-down period, how long until the replicas are back at their slots (reconnect backoff, the lease). */
const RECOVERY_MS = 10_000;
const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
/**
 * Claims and completions commit without waiting for their WAL flush (docs/decisions.md): a server crash loses
 * the last few hundred milliseconds of them. A run this close before a crash may have lost its claim or its result.
 */
const CRASH_LOSES_MS = 5_000;

const overlaps = (a: Interval, b: Interval) => a.from < b.to && b.from < a.to;

/** The periods when no replica could do anything: the server down, or every replica impaired at once. */
export function allDown(impaired: readonly (readonly Interval[])[], serverDown: readonly Interval[], window: Interval): Interval[] {
  const periods: Interval[] = [...serverDown];
  const step = 100;
  let from: number | undefined;
  for (let t = window.from; t <= window.to; t += step) {
    const down = impaired.length > 0 && impaired.every((intervals) => intervals.some((i) => i.from <= t && t <= i.to));
    if (down && from === undefined) from = t;
    if (!down && from !== undefined) {
      periods.push({ from, to: t });
      from = undefined;
    }
  }
  if (from !== undefined) periods.push({ from, to: window.to });
  return periods;
}

interface Execution extends Interval {
  readonly id: number;
  readonly attempt: number;
  readonly replica: number;
}

function executions(effects: readonly Effect[], job: string, killed: ReadonlyMap<number, number>, end: number): Execution[] {
  const open = new Map<string, Effect>();
  const runs: Execution[] = [];
  const replicaOf = (effect: Effect) => Number(effect.replica.replace(/\D/g, ""));
  for (const effect of effects) {
    if (effect.job !== job) continue;
    const key = `${effect.pid}:${effect.id}:${effect.attempt}`;
    if (effect.e === "start") open.set(key, effect);
    else {
      const start = open.get(key);
      open.delete(key);
      if (start) runs.push({ id: effect.id, attempt: effect.attempt, replica: replicaOf(effect), from: start.t, to: effect.t });
    }
  }
  // A run whose process was killed ended then; one still running at the end, at the end.
  for (const start of open.values()) runs.push({ id: start.id, attempt: start.attempt, replica: replicaOf(start), from: start.t, to: killed.get(start.pid) ?? end });
  return runs.sort((a, b) => a.from - b.from);
}

function checkOverlap(input: CheckInput, job: string, overlap: Overlap, violations: Violation[]): void {
  const runs = executions(input.effects, job, input.killed, input.window.to);
  const excused = (run: Execution) => input.serverDown.some((i) => overlaps(i, run)) || (input.impaired[run.replica] ?? []).some((i) => overlaps(i, run));
  for (let i = 0; i < runs.length; i += 1) {
    const a = runs[i] as Execution;
    for (let j = i + 1; j < runs.length && (runs[j] as Execution).from < a.to; j += 1) {
      const b = runs[j] as Execution;
      if (b.id === a.id || excused(a) || excused(b)) continue;
      violations.push({ check: `overlap-${overlap}`, detail: `${job}: job ${a.id} (attempt ${a.attempt}, ${a.to - a.from} ms) and job ${b.id} ran together for ${Math.min(a.to, b.to) - b.from} ms` });
    }
  }
}

/** The process id in a worker's id (`host:pid:random`). */
const pidOf = (worker: string) => Number(worker.split(":").at(-2));

/**
 * Runs of one attempt by two processes: the claim commits without waiting for its WAL flush (docs/decisions.md),
 * so a server crash can lose it and the job is claimed again at the same attempt, as documented (at least once).
 * Each run but one must be explained: its result on record (superseded_attempts, by worker), its process killed,
 * or a server crash while they ran.
 */
function checkAttemptRuns(input: CheckInput, runs: readonly Effect[], recorded: ReadonlySet<string>, starts: ReadonlyMap<string, number>, violations: Violation[]): void {
  const first = runs[0] as Effect;
  const from = Math.min(...runs.map((run) => starts.get(`${run.id}:${run.attempt}:${run.pid}`) ?? run.t));
  const to = Math.max(...runs.map((run) => run.t)) + CRASH_LOSES_MS;
  if (input.serverCrashes.some((at) => from <= at && at <= to)) return;
  const unexplained = runs.filter((run) => !recorded.has(`${run.id}:${run.attempt}:${run.pid}`) && !input.killed.has(run.pid));
  if (unexplained.length > 1) {
    violations.push({ check: "attempt-run-once", detail: `${first.job} job ${first.id} attempt ${first.attempt} ran in ${runs.length} processes (${runs.map((run) => run.pid).join(", ")}) with no record of why` });
  }
}

/**
 * One attempt run twice by the same process: a server crash (or a failover) lost its claim, and the process
 * claimed the job again at the same attempt. Its first result is then on record (superseded_attempts), or the
 * crash came while it ran; anything else is a worker running an attempt twice.
 */
function checkRerunInProcess(input: CheckInput, runs: readonly Effect[], from: number, recorded: ReadonlySet<string>, violations: Violation[]): void {
  const first = runs[0] as Effect;
  const to = Math.max(...runs.map((run) => run.t)) + CRASH_LOSES_MS;
  if (recorded.has(`${first.id}:${first.attempt}:${first.pid}`) || input.serverCrashes.some((at) => from <= at && at <= to)) return;
  violations.push({ check: "attempt-run-once", detail: `${first.job} job ${first.id} attempt ${first.attempt} ran ${runs.length} times in process ${first.pid} with no record of why` });
}

function checkEffects(input: CheckInput, jobs: ReadonlyMap<number, JobRow>, recorded: ReadonlySet<string>, violations: Violation[]): void {
  const ends = new Map<string, Effect[]>();
  /** The first start of each attempt in each process, and how many times it started there. */
  const starts = new Map<string, number>();
  const startCount = new Map<string, number>();
  for (const effect of input.effects) {
    if (effect.e === "start") {
      const key = `${effect.id}:${effect.attempt}:${effect.pid}`;
      if (!starts.has(key)) starts.set(key, effect.t);
      startCount.set(key, (startCount.get(key) ?? 0) + 1);
      continue;
    }
    const key = `${effect.id}:${effect.attempt}`;
    ends.set(key, [...(ends.get(key) ?? []), effect]);
  }
  const superseded = new Set([...recorded].map((key) => key.split(":").slice(0, 2).join(":")));
  for (const [key, list] of ends) {
    const first = list[0] as Effect;
    const job = jobs.get(first.id);
    const byPid = new Map<number, Effect[]>();
    for (const effect of list) byPid.set(effect.pid, [...(byPid.get(effect.pid) ?? []), effect]);
    for (const [pid, mine] of byPid) {
      const runs = startCount.get(`${key}:${pid}`) ?? 0;
      if (mine.length > Math.max(runs, 1)) violations.push({ check: "effect-once", detail: `${first.job} job ${first.id} attempt ${first.attempt} wrote its side effect ${mine.length} times in process ${pid}, which ran it ${runs} times` });
      else if (mine.length > 1) checkRerunInProcess(input, mine, starts.get(`${key}:${pid}`) ?? first.t, recorded, violations);
    }
    if (byPid.size > 1) checkAttemptRuns(input, [...byPid.values()].map((mine) => mine[0] as Effect), recorded, starts, violations);
    if (!job || first.attempt > job.attempts) {
      if (!superseded.has(key)) violations.push({ check: "effect-explained", detail: `${first.job} job ${first.id} attempt ${first.attempt}: a side effect the database has no attempt for (${job ? `attempts ${job.attempts}` : "no such job"})` });
      continue;
    }
    const excused = list.some((effect) => input.killed.has(effect.pid)) || input.serverCrashes.some((at) => first.t <= at && at <= first.t + CRASH_LOSES_MS);
    if (first.ok && first.attempt < job.attempts && !superseded.has(key) && !excused) {
      violations.push({ check: "completed-not-rerun", detail: `${first.job} job ${first.id}: attempt ${first.attempt} ended well, yet the job ran again (attempts ${job.attempts}) with no record of that result` });
    }
  }
  for (const job of jobs.values()) {
    if (job.job_name !== WORK_JOB || !TERMINAL.has(job.status)) continue;
    const last = ends.get(`${job.id}:${job.attempts}`) ?? [];
    if (job.status === "succeeded" && !last.some((effect) => effect.ok)) {
      violations.push({ check: "success-has-effect", detail: `${job.job_name} job ${job.id} is succeeded at attempt ${job.attempts}, which no handler ended well` });
    }
    const kept = last.filter((effect) => effect.ok && !input.killed.has(effect.pid) && !input.serverCrashes.some((at) => effect.t <= at && at <= effect.t + CRASH_LOSES_MS));
    if (job.status !== "succeeded" && kept.length > 0 && !superseded.has(`${job.id}:${job.attempts}`)) {
      violations.push({ check: "success-kept", detail: `${job.job_name} job ${job.id} is ${job.status} at attempt ${job.attempts}, which a handler ended well (process ${kept[0]?.pid})` });
    }
  }
}

function checkSlots(input: CheckInput, rows: readonly JobRow[], violations: Violation[]): void {
  const down = allDown(input.impaired, input.serverDown, input.window);
  const excused = (slot: number) => down.some((period) => period.from - SLOT_MS <= slot && slot <= period.to + RECOVERY_MS);
  for (const { job } of OVERLAP_ENTRIES) {
    const bySlot = new Map<number, number>();
    for (const row of rows) if (row.job_name === job && row.scheduled_for_ms !== null) bySlot.set(row.scheduled_for_ms, (bySlot.get(row.scheduled_for_ms) ?? 0) + 1);
    for (const [slot, n] of bySlot) if (n > 1) violations.push({ check: "slot-once", detail: `${job}: slot ${new Date(slot).toISOString()} has ${n} jobs` });
    const first = Math.ceil(input.window.from / SLOT_MS) * SLOT_MS;
    for (let slot = first; slot <= input.window.to; slot += SLOT_MS) {
      if (!bySlot.has(slot) && !excused(slot)) violations.push({ check: "slot-missing", detail: `${job}: slot ${new Date(slot).toISOString()} has no job, outside any all-down period` });
    }
  }
}

export async function check(input: CheckInput): Promise<Violation[]> {
  const violations: Violation[] = [];
  const rows = await input.sql<JobRow[]>`
    select id::float8 as id, job_name, status, attempts, idempotency_key,
      (extract(epoch from scheduled_for) * 1000)::float8 as scheduled_for_ms, true as in_queue from cronledger.job_queue
    union all
    select id::float8, job_name, status, attempts, idempotency_key,
      (extract(epoch from scheduled_for) * 1000)::float8, false from cronledger.job_history`;
  const recorded = new Set(
    (await input.sql<{ id: number; attempt: number; worker: string }[]>`select job_id::float8 as id, attempt, worker from cronledger.superseded_attempts`).map(
      (row) => `${row.id}:${row.attempt}:${pidOf(row.worker)}`,
    ),
  );
  const jobs = new Map<number, JobRow>();
  for (const row of rows) {
    if (jobs.has(row.id)) violations.push({ check: "job-row-once", detail: `job ${row.id} (${row.job_name}) has two rows` });
    jobs.set(row.id, row);
  }
  for (const ack of input.acks) {
    const job = jobs.get(ack.id);
    if (!job || job.idempotency_key !== ack.key) violations.push({ check: "enqueue-terminal", detail: `acknowledged enqueue ${ack.key} (job ${ack.id}) has no job row` });
    else if (!TERMINAL.has(job.status)) violations.push({ check: "enqueue-terminal", detail: `acknowledged enqueue ${ack.key} (job ${ack.id}) is still ${job.status} after the drain` });
  }
  checkEffects(input, jobs, recorded, violations);
  checkSlots(input, rows, violations);
  for (const { job, overlap } of OVERLAP_ENTRIES) if (overlap !== "allow_all") checkOverlap(input, job, overlap, violations);
  for (const death of input.deaths) violations.push({ check: "process-died", detail: death });
  for (const stop of input.unstopped) violations.push({ check: "replica-stop", detail: stop });
  return violations;
}

/**
 * The scheduler's pass on the ledger, `cronledger.schedule_state`, written
 * against src/schema.ts, and the ledger read for the status. The pass is one
 * raw statement of CTEs (drizzle's builder has no data-modifying CTEs joined
 * to arrays): see runPass and passSql, its two variants (light and full)
 * rendered once per shape. About 430 lines: the pass and its repairs share
 * the row shapes and are read together. The ledger's rows outside the pass
 * (quarantine, pause, prune) are in src/db/sql/ledger-rows.ts.
 */

import { sql, type SQL } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import { scheduleState, type OverlapPolicy } from "../../schema.js";
import { query, type Executor } from "../executor.js";
import { JOB_INSERT, PASS, SLOT_POLICY } from "./ctes.js";
import { clock, epochMs, isoOf, name, reusableShapes } from "./fragments.js";
import { dueProbeColumns } from "./dynamic-fire.js";
import { jobInsertCtes } from "./jobs.js";
import { slotJobStatus, slotPolicyCtes } from "./slot-policy.js";


/** `schedule_state` as `s`, joined to the arrays of planned entries. */
const s = alias(scheduleState, "s");

/** An entry as every statement that fires it takes it (the pass, a run-now): its ledger key, what its job is made of, its overlap policy. */
export interface EntryJob {
  /** The entry's ledger key (`schedule_state.key`, its jobs' `schedule_key`). */
  readonly key: string;
  readonly jobName: string;
  readonly queue: string;
  readonly payloadJson: string;
  readonly priority: number;
  readonly maxAttempts: number;
  /** The entry's overlap policy (src/db/sql/slot-policy.ts): "allow_all" inserts every slot's job as before. */
  readonly overlap: OverlapPolicy;
}

/** One entry the pass looks at. */
export interface PassEntry extends EntryJob {
  readonly catchUpWindowMs: number;
  /** The ledger value this process last saw, recreated if the row vanished; null for an entry never seen. */
  readonly knownLedgerMs: number | null;
}

/** One slot that may be its entry's due slot, depending on the clock the statement reads. */
export interface PassSlot {
  readonly key: string;
  readonly slotMs: number;
  readonly fireMs: number;
  readonly idempotencyKey: string;
}

export interface PassInput {
  readonly namespace: string;
  /** `tick({ now })`'s fixed instant; null means the database clock. */
  readonly exactNow: Date | null;
  /** The span the clock must read within for the slots to hold. */
  readonly lowMs: number;
  readonly highMs: number;
  /** Ledger values further ahead of the clock than this are corrupt and repaired to now. */
  readonly futureToleranceMs: number;
  readonly entries: readonly PassEntry[];
  readonly slots: readonly PassSlot[];
  /**
   * Null: rows another session holds are skipped (and reported as locked).
   * A number: they are waited for, up to this many milliseconds (PostgreSQL's
   * lock_timeout, set for this statement alone), after which the statement
   * fails with SQLSTATE 55P03.
   */
  readonly lockWaitMs?: number | null;
  /**
   * With `lockWaitMs` null: how long any other lock the statement needs (its
   * job insert's: an application trigger's row lock, an idempotency key
   * another transaction is inserting) is waited for before the statement fails
   * with SQLSTATE 55P03; undefined waits up to the pass timeout.
   */
  readonly otherLockWaitMs?: number;
  /**
   * The light statement (runPass): none of the pause's and overlap policy's
   * CTEs, for entries that all allow all and that the process knows of no
   * pause of. A row it finds paused is only reported (`paused`).
   */
  readonly light?: boolean;
  /**
   * The trace context stored with every job the statement inserts, as JSON: the pass's producer span
   * (src/open-telemetry.ts); null or omitted when the process does not trace.
   */
  readonly traceContextJson?: string | null;
  /**
   * Whether dynamic entries are due, asked in this statement too (src/db/sql/dynamic-fire.ts,
   * dueProbeColumns; `dyn_next_ms` and `dyn_due` in every row): the pass's first statement asks, so a
   * pass of static entries with no dynamic entry due stays one statement.
   */
  readonly probe?: { readonly namespace: string; readonly limit: number } | null;
}

/** One row per entry of the pass (one row with a null key when it had none). */
export interface PassRow {
  now_ms: number;
  key: string | null;
  old_ms: number | null;
  slot_ms: number | null;
  stale: boolean | null;
  claimed: boolean;
  created_ms: number | null;
  repaired: boolean;
  job_id: number | null;
  /** The row was to be written (a due slot or a repair) but another session held its lock: skipped, still due. */
  locked: boolean;
  /** The ledger's quarantine of the entry, when it has one: no pass claims it before this instant. */
  quarantined_until_ms: number | null;
  /** A claimed slot that was not enqueued but recorded as skipped (paused, or its overlap policy): why, in a word; null otherwise. */
  skip_reason: string | null;
  /** The skipped slot's reason in words (who paused the entry and their note; the job an overlap policy waited on). */
  skip_detail: string | null;
  /** The history row recording a skipped slot. */
  skipped_job_id: number | null;
  /**
   * The entry's ledger row was paused in the statement's snapshot (null in the row of a pass without entries).
   * A light statement left such a row alone: its entry is to be run again in the full statement.
   */
  paused: boolean | null;
  /** With PassInput.probe: the dynamic entries' earliest next fire, and how many are due (up to the probe's limit). */
  dyn_next_ms?: number | null;
  dyn_due?: number | null;
}

/**
 * The scheduler's pass as one statement: read the ledger rows of the
 * planned entries; create the missing ones at `now` (or at the value the
 * process last saw, for a row that vanished under it); repair values in the
 * future; pick each entry's due slot among its candidates by the clock the
 * statement reads; claim them all in one UPDATE guarded by the value read;
 * insert the jobs of the claimed, non-stale slots through the one job
 * insert. Every step sees the same snapshot, and a replica that claimed
 * first makes the guard fail (0 rows: a lost race). A statement is atomic:
 * a crash leaves the claim and its job, or neither.
 *
 * Contention: only the rows the statement will write (due slots and
 * repairs) are locked, with SKIP LOCKED, so a row another session holds
 * (an open transaction, a replica's statement in flight) never stalls the
 * others: it comes back as `locked`, unwritten and still due. Quarantine:
 * an entry whose row is quarantined until later is not claimed, and a claim
 * clears the quarantine.
 *
 * Two variants (`light`): the full statement decides pauses and overlap
 * policies (src/db/sql/slot-policy.ts); the light one has none of those
 * CTEs and never touches a paused row (it only reports it, `paused`), for
 * the tick to run that entry again in the full statement. The policy's CTEs
 * cost the statement's parse and plan even when they handle no row: at
 * 100,000 entries 4.0 s against 2.6 s for a cold idle pass, 7.3 s against
 * 5.3 s all due (docs/benchmarks.md). Each shape's text is rendered once.
 */
export async function runPass(executor: Executor, input: PassInput): Promise<PassRow[]> {
  // The idle pass, every second on every replica: the clock alone, without planning the empty statement.
  const probe = input.probe ?? null;
  if (input.entries.length === 0) {
    const truncated = sql`date_trunc('milliseconds', ${clock(input.exactNow)})`;
    return query<PassRow>(
      executor,
      sql`select ${epochMs(truncated)} as now_ms, null as key, null as old_ms, null as slot_ms, null as stale,
            false as claimed, null as created_ms, false as repaired, null as job_id, false as locked, null as quarantined_until_ms,
            null as skip_reason, null as skip_detail, null as skipped_job_id, null as paused${
              probe === null ? sql`` : sql`, ${dueProbeColumns(sql`${probe.namespace}::text`, sql`${probe.limit}::int`, truncated)}`
            }`,
    );
  }
  const lockWaitMs = input.lockWaitMs ?? null;
  const lockTimeoutMs = lockWaitMs ?? input.otherLockWaitMs ?? null;
  const shape = { light: input.light === true, fixedClock: input.exactNow !== null, lockTimeout: lockTimeoutMs !== null, skipLocked: lockWaitMs === null, probe: probe !== null };
  return query<PassRow>(
    executor,
    passStatement(shape)({
      now: input.exactNow?.toISOString() ?? null,
      keys: input.entries.map((row) => row.key),
      jobNames: input.entries.map((row) => row.jobName),
      windows: input.entries.map((row) => row.catchUpWindowMs),
      starts: input.entries.map((row) => isoOf(row.knownLedgerMs)),
      queues: input.entries.map((row) => row.queue),
      payloads: input.entries.map((row) => row.payloadJson),
      priorities: input.entries.map((row) => row.priority),
      maxAttempts: input.entries.map((row) => row.maxAttempts),
      overlaps: input.entries.map((row) => row.overlap),
      slotKeys: input.slots.map((row) => row.key),
      slotMs: input.slots.map((row) => row.slotMs),
      slotAt: input.slots.map((row) => isoOf(row.slotMs)),
      fireMs: input.slots.map((row) => row.fireMs),
      idempotencyKeys: input.slots.map((row) => row.idempotencyKey),
      namespace: input.namespace,
      lowMs: input.lowMs,
      highMs: input.highMs,
      toleranceMs: input.futureToleranceMs,
      lockTimeout: lockTimeoutMs === null ? null : String(Math.max(1, Math.round(lockTimeoutMs))),
      traceContext: input.traceContextJson ?? null,
      probeNamespace: probe?.namespace ?? null,
      probeLimit: probe?.limit ?? null,
    }),
  );
}

type PassValue =
  | "now"
  | "keys"
  | "jobNames"
  | "windows"
  | "starts"
  | "queues"
  | "payloads"
  | "priorities"
  | "maxAttempts"
  | "overlaps"
  | "slotKeys"
  | "slotMs"
  | "slotAt"
  | "fireMs"
  | "idempotencyKeys"
  | "namespace"
  | "lowMs"
  | "highMs"
  | "toleranceMs"
  | "lockTimeout"
  | "traceContext"
  | "probeNamespace"
  | "probeLimit";

/** What makes one pass statement's text differ from another's. */
interface PassShape {
  /** Without the pause's and overlap policy's CTEs (runPass). */
  readonly light: boolean;
  /** `tick({ now })`'s instant instead of the database clock. */
  readonly fixedClock: boolean;
  /** A lock_timeout set for the statement. */
  readonly lockTimeout: boolean;
  /** Ledger rows other sessions hold are skipped, not waited for. */
  readonly skipLocked: boolean;
  /** The statement also asks whether dynamic entries are due (PassInput.probe). */
  readonly probe: boolean;
}

/** The pass's text, rendered once per shape (src/db/sql/fragments.ts, reusableShapes): at most 16 shapes are used. */
const passStatement = reusableShapes<PassShape, PassValue>((shape, value) => passSql(shape, value));

function passSql({ light, fixedClock, lockTimeout, skipLocked, probe }: PassShape, value: (name: PassValue) => SQL): SQL {
  const { entry, due, corrupt, locked, created, repaired, claimed } = PASS;
  const truncatedNow = sql`date_trunc('milliseconds', ${fixedClock ? sql`${value("now")}::timestamptz` : sql`now()`})`;
  const ledgerMs = epochMs(s.lastEnqueuedSlot);
  // set_config(..., true) lasts until the end of this statement's own transaction; the join makes it run before any row is locked.
  const lockWait = lockTimeout ? sql`cross join (select set_config('lock_timeout', ${value("lockTimeout")}, true)) as lock_wait` : sql``;
  // The light statement leaves a paused row alone (neither claimed nor repaired): the tick runs its entry again in the full one.
  const notPaused = light ? sql` and not e.paused` : sql``;
  const decisions = passDecisions(light, value("traceContext"));
  return sql`
    with ${PASS.clock} as (
      select t as now, ${epochMs(sql`t`)} as now_ms from (select ${truncatedNow} as t) as c
    ), ${entry} as (
      select e.*, ${ledgerMs} as old_ms, ${epochMs(s.quarantinedUntil)} as quarantined_until_ms,
        ${s.pausedAt} is not null as paused, ${s.pausedBy} as paused_by, ${s.pausedNote} as paused_note
      from unnest(
        ${value("keys")}::text[], ${value("jobNames")}::text[], ${value("windows")}::float8[], ${value("starts")}::text[],
        ${value("queues")}::text[], ${value("payloads")}::text[], ${value("priorities")}::int[], ${value("maxAttempts")}::int[]${light ? sql`` : sql`,
        ${value("overlaps")}::text[]`}
      ) as e(key, job_name, window_ms, start_at, queue, payload, priority, max_attempts${light ? sql`` : sql`, overlap`})
      left join ${scheduleState} as s on ${s.key} = e.key
    ), ${due} as (
      select distinct on (c.key) c.key, c.slot_ms, c.slot_at, c.idempotency_key, e.old_ms,
        c.slot_ms < clock.now_ms - e.window_ms as stale
      from unnest(
        ${value("slotKeys")}::text[], ${value("slotMs")}::float8[], ${value("slotAt")}::text[], ${value("fireMs")}::float8[], ${value("idempotencyKeys")}::text[]
      ) as c(key, slot_ms, slot_at, fire_ms, idempotency_key)
      join ${entry} e on e.key = c.key
      cross join ${PASS.clock} as clock
      where clock.now_ms between ${value("lowMs")}::float8 and ${value("highMs")}::float8
        and e.old_ms <= clock.now_ms + ${value("toleranceMs")}::float8
        and c.fire_ms <= clock.now_ms
        and c.slot_ms > e.old_ms
        and (e.quarantined_until_ms is null or e.quarantined_until_ms <= clock.now_ms)${notPaused}
      order by c.key, c.slot_ms desc
    ), ${corrupt} as (
      -- The clock as a scalar, so the filter picks the few corrupt rows before any join instead of after it.
      select e.key, e.old_ms from ${entry} e where e.old_ms > (select now_ms from ${PASS.clock}) + ${value("toleranceMs")}::float8${notPaused}
    ), ${locked} as (
      -- Only the rows this statement writes. One another session holds is reported, not waited for (or waited for briefly).
      select ${s.key} as key from ${scheduleState} as s
      ${lockWait}
      where ${s.key} = any(array(select key from ${due} union all select key from ${corrupt}))
      for update of s ${skipLocked ? sql`skip locked` : sql``}
    ), ${created} as (
      insert into ${scheduleState} (${name(scheduleState.key)}, ${name(scheduleState.namespace)}, ${name(scheduleState.jobName)}, ${name(scheduleState.lastEnqueuedSlot)})
      select e.key, ${value("namespace")}, e.job_name, coalesce(e.start_at::timestamptz, clock.now)
      from ${entry} e cross join ${PASS.clock} as clock
      where e.old_ms is null
      on conflict (${name(scheduleState.key)}) do nothing
      returning ${name(scheduleState.key)} as key, ${epochMs(scheduleState.lastEnqueuedSlot)} as ms
    ), ${repaired} as (
      update ${scheduleState} as s set ${name(scheduleState.lastEnqueuedSlot)} = (select now from ${PASS.clock}), ${name(scheduleState.updatedAt)} = now()
      from ${corrupt} r join ${locked} l on l.key = r.key
      where ${s.key} = r.key and ${ledgerMs} = r.old_ms
      returning ${s.key} as key
    ), ${claimed} as (
      update ${scheduleState} as s set ${name(scheduleState.lastEnqueuedSlot)} = d.slot_at::timestamptz, ${name(scheduleState.updatedAt)} = now(),
        ${name(scheduleState.quarantinedUntil)} = null, ${name(scheduleState.quarantineReason)} = null,
        ${name(scheduleState.quarantineCount)} = 0, ${name(scheduleState.quarantinedSince)} = null
      from ${due} d join ${locked} l on l.key = d.key
      where ${s.key} = d.key and ${ledgerMs} = d.old_ms
      returning ${s.key} as key
    ), ${decisions}
    ${passRows(light, probe ? dueProbeColumns(sql`${value("probeNamespace")}::text`, sql`${value("probeLimit")}::int`, sql`(select now from ${PASS.clock})`) : null)}`;
}

/**
 * The pass's decisions on its claimed slots: the light statement inserts the
 * jobs of every claimed, non-stale slot; the full one first lets a pause or
 * an overlap policy hold a slot back (src/db/sql/slot-policy.ts).
 */
function passDecisions(light: boolean, traceContext: SQL): SQL {
  const { entry, due, claimed } = PASS;
  const jobsOf = sql`select e.job_name, e.queue, e.payload::jsonb, e.priority, clock.now, e.max_attempts, d.idempotency_key, e.key, d.slot_at::timestamptz, null::jsonb,
        ${traceContext}::jsonb
      from ${claimed} cl join ${due} d on d.key = cl.key join ${entry} e on e.key = cl.key cross join ${PASS.clock} as clock
      where not d.stale`;
  if (light) return sql`${jobInsertCtes(jobsOf)}`;
  // The claimed, non-stale slots of the entries a policy or a pause can hold back, driven by the due ones with a hashed
  // semi-join on the claim (a join on its RETURNING was planned as a nested loop). An entry that allows all and runs is
  // never a candidate: it fires as before, and a 100,000-entry pass does not carry every slot through the policy's CTEs
  // (7.3 s against 5.8 s before the policies, docs/benchmarks.md).
  const candidates = sql`select d.key, d.slot_at, e.overlap, coalesce(e.paused, false) as paused, e.paused_by, e.paused_note,
      e.job_name, e.queue, e.payload, e.priority, e.max_attempts
    from ${due} d join ${entry} e on e.key = d.key
    where not d.stale and (e.overlap <> 'allow_all' or e.paused) and d.key in (select key from ${claimed})`;
  // A slot the policy decided goes in with the status it chose (held while a job of its entry runs); any other as queued.
  const jobsWithStatus = sql`select e.job_name, e.queue, e.payload::jsonb, e.priority, clock.now, e.max_attempts, d.idempotency_key, e.key, d.slot_at::timestamptz,
        null::jsonb, ${traceContext}::jsonb, case when dc.key is null then 'queued' else ${slotJobStatus(sql`dc`)} end
      from ${claimed} cl join ${due} d on d.key = cl.key join ${entry} e on e.key = cl.key cross join ${PASS.clock} as clock
      left join ${SLOT_POLICY.decided} dc on dc.key = cl.key
      where not d.stale and dc.skip_reason is null`;
  return sql`${slotPolicyCtes(candidates, sql`(select now from ${PASS.clock})`)}, ${jobInsertCtes(jobsWithStatus, { withStatus: true })}`;
}

/** The pass's rows: one per entry, with what the statement did to it (PassRow); one row of nulls when it had none. */
function passRows(light: boolean, probe: SQL | null): SQL {
  const { entry, due, corrupt, locked, created, repaired, claimed } = PASS;
  const skips = light
    ? sql`null::text as skip_reason, null::text as skip_detail, null::float8 as skipped_job_id`
    : sql`dc.skip_reason, dc.skip_detail, sk.id::float8 as skipped_job_id`;
  return sql`
    select clock.now_ms, e.key, e.old_ms, d.slot_ms, d.stale, cl.key is not null as claimed, cr.ms as created_ms,
      rp.key is not null as repaired, i.id::float8 as job_id,
      (d.key is not null or co.key is not null) and l.key is null as locked, e.quarantined_until_ms,
      ${skips}, e.paused${probe === null ? sql`` : sql`, ${probe}`}
    from ${PASS.clock} as clock cross join ${JOB_INSERT.notified}${light ? sql`` : sql` cross join ${SLOT_POLICY.overlapNotified}`}
    left join ${entry} e on true
    left join ${due} d on d.key = e.key
    left join ${corrupt} co on co.key = e.key
    left join ${locked} l on l.key = e.key
    left join ${claimed} cl on cl.key = e.key
    left join ${created} cr on cr.key = e.key
    left join ${repaired} rp on rp.key = e.key
    left join ${JOB_INSERT.inserted} i on i.schedule_key = e.key${
      light
        ? sql``
        : sql`
    left join ${SLOT_POLICY.decided} dc on dc.key = e.key
    left join ${SLOT_POLICY.moved} sk on sk.schedule_key = e.key and sk.status = 'skipped'`
    }`;
}

export interface LedgerRow {
  key: string;
  slot_ms: number;
  created_ms: number;
  /** False while the row holds the value it was created with: no slot was handled (claimed, skipped or repaired) since. */
  handled: boolean;
  quarantined_until_ms: number | null;
  quarantine_reason: string | null;
  quarantine_count: number;
  quarantined_since_ms: number | null;
  /** An operator's pause (pauseEntry): when, who and why; null when the entry runs. */
  paused_at_ms: number | null;
  paused_by: string | null;
  paused_note: string | null;
}

/** The ledger of a namespace as the status reads it: its rows and the database clock they were read at. */
export interface LedgerSnapshot {
  readonly nowMs: number;
  readonly rows: LedgerRow[];
}

/**
 * The ledger rows of a namespace and the database clock, in one statement:
 * what the status shows. The rows hang off a one-row clock by a left join,
 * so an empty ledger still answers with the clock (one row of nulls).
 */
export async function ledgerSnapshot(executor: Executor, namespace: string): Promise<LedgerSnapshot> {
  const rows = await query<LedgerRow & { now_ms: number }>(
    executor,
    sql`select ${epochMs(sql`now()`)} as now_ms, l.* from (select 1) as clock left join lateral (
          select ${scheduleState.key} as key, ${epochMs(scheduleState.lastEnqueuedSlot)} as slot_ms, ${epochMs(scheduleState.createdAt)} as created_ms,
            ${scheduleState.updatedAt} <> ${scheduleState.createdAt} as handled,
            ${epochMs(scheduleState.quarantinedUntil)} as quarantined_until_ms, ${scheduleState.quarantineReason} as quarantine_reason,
            ${scheduleState.quarantineCount} as quarantine_count, ${epochMs(scheduleState.quarantinedSince)} as quarantined_since_ms,
            ${epochMs(scheduleState.pausedAt)} as paused_at_ms, ${scheduleState.pausedBy} as paused_by, ${scheduleState.pausedNote} as paused_note
          from ${scheduleState} where ${scheduleState.namespace} = ${namespace}
        ) as l on true`,
  );
  return { nowMs: rows[0]?.now_ms ?? Date.now(), rows: rows.filter((row) => row.key !== null) };
}

// Schedules as data, one entry: longer than most, as validation's shared path for bulk loads and the calendars it and
// the pass share belong together.
import type { DynamicDefinitionColumns, DynamicEntryRow, DynamicSlots } from "../db/sql/dynamic.js";
import type { TakenRow } from "../db/sql/dynamic-fire.js";
import type { OverlapPolicy } from "../schema.js";
import { ScheduleEntryError, type ScheduleProblem } from "../errors.js";
import { defineJob, isJobDefinition, storablePayload, type JobDefinition } from "../jobs/define-job.js";
import { resolveMaxPayloadBytes } from "../jobs/payload-limit.js";
import { parseCron, type ParsedCron } from "./cron.js";
import { fireTime } from "./plan.js";
import { slotCalendar, type SlotCalendar } from "./slot-calendar.js";
import { resolveSchedule, type ResolvedEntry, type ResolveOptions } from "./validate.js";

/**
 * A dynamic entry (schedules as data, `ledger.schedules`): its key grammar,
 * its distinct ledger key, its validation before anything is written (the
 * same checks as a static entry's, src/schedule/validate.ts, plus its key),
 * the entry a pass makes of a stored row, with the same slot calendar as a
 * static entry, and the slots its row stores (slotsFrom). Caches here are
 * bounded, so a replica's heap does not grow with the number of entries
 * stored.
 */

/** Letters, digits and `. _ : - / @ + =`, 1 to 200 of them: a tenant id, a UUID, an email fit; `|` and `~` never (see ledgerKey and listDynamic). */
export const DYNAMIC_KEY_PATTERN = /^[A-Za-z0-9._:/@+=-]{1,200}$/;

/** The namespace of dynamic entries' ledger rows: `#` is in no namespace (src/options.ts), so no static row is ever in it. */
export function dynamicLedgerNamespace(namespace: string): string {
  return `${namespace}#dynamic`;
}

/**
 * A dynamic entry's ledger key, `<namespace>#dynamic|<key>`. A static
 * entry's is `<namespace>|<job>|<key>|<cron>|<zone>` (src/schedule/identity.ts):
 * the character after the namespace differs, so the two can never collide.
 * At most 64 + 9 + 200 characters: never bounded (hashed), so it reads back.
 */
export function dynamicLedgerKey(namespace: string, key: string): string {
  return `${dynamicLedgerNamespace(namespace)}|${key}`;
}

/** A dynamic entry's identity (its slots' idempotency keys and jitter derive from it): a static identity always holds `|`, this never does. */
export function dynamicIdentity(key: string): string {
  return `dynamic:${key}`;
}

/** What an application passes to `ledger.schedules.upsert`: a JOBS_SCHEDULE entry's fields and a required key. */
export interface DynamicEntryInput {
  /** The entry's identity, chosen by the application (e.g. `tenant:42:digest`): 1-200 letters, digits and `. _ : - / @ + =`. */
  readonly key: string;
  /** The job's name, or its defineJob() result. */
  readonly job: string | JobDefinition;
  readonly cron: string;
  readonly timezone?: string;
  readonly payload?: unknown;
  readonly overlap?: OverlapPolicy;
  /** A duration ("30s") or milliseconds. */
  readonly jitter?: string | number;
  readonly catchUpWindow?: string | number;
  readonly queue?: string;
  readonly priority?: number;
}

/** What validation needs of the process: its jobs (when it knows them), its static entries, its defaults. */
export interface DynamicValidation extends ResolveOptions {
  readonly namespace: string;
  /** The jobs the process knows: a job name not among them is refused (`unregistered_job`). Empty: any name is taken, its payload unchecked. */
  readonly jobs: readonly JobDefinition[];
  /** The static entries: a key equal to one's key or identity is refused. */
  readonly staticEntries: readonly ResolvedEntry[];
}

const FIELD_OF: Partial<Record<ScheduleProblem["code"], string>> = {
  invalid_cron: "cron",
  invalid_timezone: "timezone",
  unregistered_job: "job",
  invalid_payload: "payload",
  invalid_jitter: "jitter",
  duplicate_entry: "key",
  invalid_key: "key",
};

const KEY_REQUIRED = 'key is required: a string such as "tenant:42:digest"';
const KEY_GRAMMAR = "key must be 1-200 letters, digits and . _ : - / @ + = (no spaces, no | or ~)";

/**
 * Validates and resolves entries before anything is written: every problem
 * of every entry, each with its code and field, as one ScheduleEntryError.
 * Returns the rows to store, with each entry's first fire after `nowMs`
 * less `toleranceMs` (CLOCK_TOLERANCE_MS for the host's clock, 0 for an
 * instant given: an early `next_fire_at` costs a pass one look; a late one
 * would miss a slot).
 *
 * A bulk load repeats a few timings (job, cron, zone, policy) many times:
 * each distinct timing is checked once by the static entries' checks
 * (src/schedule/validate.ts) and shared, and each entry adds only its key,
 * its payload and its next fire (jitter aside, the timing's). An entry the
 * shared check cannot vouch for (a field of another type, an unknown field,
 * a payload refused) goes through the whole check on its own, so its
 * problems are worded as before. 100,000 entries of one timing: 5.4-6.0 s
 * of validation before, 0.2 s with this (docs/benchmarks.md).
 */
export function resolveDynamicEntries(inputs: readonly unknown[], options: DynamicValidation, nowMs: number, toleranceMs = CLOCK_TOLERANCE_MS): DynamicEntryRow[] {
  const problems: ScheduleProblem[] = [];
  const keys = checkKeys(inputs, options, problems);
  const maxPayloadBytes = resolveMaxPayloadBytes(options.maxPayloadBytes);
  const fromMs = nowMs - toleranceMs;
  const timings = new Map<string, Timing>();
  const rows: (DynamicEntryRow | undefined)[] = Array.from({ length: inputs.length });
  const alone: number[] = [];
  inputs.forEach((input, index) => {
    const signature = timingSignature(input);
    const timing = signature === undefined ? undefined : (timings.get(signature) ?? resolveTiming(input as Record<string, unknown>, options, fromMs));
    if (timing === undefined) return void alone.push(index);
    timings.set(signature!, timing);
    const payload = (input as { payload?: unknown }).payload;
    const stored = payload === undefined ? timing.emptyPayload : storablePayload(timing.entry.job, payload, maxPayloadBytes);
    if (!stored.ok) return void alone.push(index);
    rows[index] = dynamicRow(timing.entry, keys[index]!, stored.json, timing.nextSlotMs, timing.followingSlotMs);
  });
  if (alone.length > 0) {
    const subset = alone.map((index) => inputs[index]);
    // Each entry under a key of its own that resolveSchedule accepts, so entries of one job and timing are not duplicates of each other.
    const { entries, problems: found } = resolveSchedule(
      subset.map((input, at) => (typeof input === "object" && input !== null ? { ...(input as Record<string, unknown>), key: `k${alone[at]}` } : input)),
      jobsFor(subset, options),
      options,
    );
    for (const problem of found) {
      if (problem.severity !== "error" || problem.code === "duplicate_entry") continue;
      const index = alone[problem.index]!;
      problems.push({ ...problem, index, message: problem.message.replace(/^schedule\[\d+\]/, `entry[${index}]`), ...fieldOf(problem) });
    }
    for (const entry of entries) rows[alone[entry.index]!] = dynamicRow(entry, keys[alone[entry.index]!]!, entry.payloadJson, entry.calendar.nextMs(fromMs));
  }
  if (problems.length > 0) throw new ScheduleEntryError(problems.sort((a, b) => a.index - b.index));
  // In the order given: the results of upsertMany follow it.
  return rows.filter((row) => row !== undefined);
}

/** The keys of the entries ("" for one that has none), their problems (grammar, a static entry's, given twice) added to `problems`. */
function checkKeys(inputs: readonly unknown[], options: DynamicValidation, problems: ScheduleProblem[]): string[] {
  const staticNames = new Set(options.staticEntries.flatMap((entry) => [entry.identity, entry.ledgerKey, ...(entry.entryKey === undefined ? [] : [entry.entryKey])]));
  const seen = new Map<string, number>();
  return inputs.map((input, index) => {
    const raw = typeof input === "object" && input !== null ? (input as Record<string, unknown>).key : undefined;
    const valid = typeof raw === "string" && DYNAMIC_KEY_PATTERN.test(raw);
    const key = valid ? raw : "";
    if (!valid) problems.push(keyProblem(index, "invalid_key", typeof raw === "string" ? KEY_GRAMMAR : KEY_REQUIRED));
    else if (staticNames.has(key)) problems.push(keyProblem(index, "duplicate_entry", `key "${key}" is a static entry's key or identity (JOBS_SCHEDULE); choose another key.`));
    else if (seen.has(key)) problems.push(keyProblem(index, "duplicate_entry", `key "${key}" is given twice (entries ${seen.get(key)} and ${index}).`));
    seen.set(key, index);
    return key;
  });
}

function keyProblem(index: number, code: ScheduleProblem["code"], message: string): ScheduleProblem {
  return { code, severity: "error", index, field: "key", message };
}

/** What the entries of one timing share: the entry resolved from the first of them, its stored empty payload, its next slot and the one after. */
interface Timing {
  readonly entry: ResolvedEntry;
  readonly emptyPayload: ReturnType<typeof storablePayload>;
  readonly nextSlotMs: number | null;
  readonly followingSlotMs: number | null;
}

/** The fields an entry may hold; the ones after `key`, `job` and `payload` make its timing. */
const TIMING_FIELDS = ["cron", "timezone", "jitter", "catchUpWindow", "queue", "priority", "overlap"] as const;
const ENTRY_FIELDS = new Set<string>(["key", "job", "payload", ...TIMING_FIELDS]);

/**
 * The entry's timing as a string, equal for two entries exactly when their
 * job (by name) and timing fields are; undefined for an entry the shared
 * check does not take (not an object, an unknown field, a value neither a
 * string nor a finite number), which is checked alone.
 */
function timingSignature(input: unknown): string | undefined {
  if (typeof input !== "object" || input === null || Array.isArray(input)) return undefined;
  const record = input as Record<string, unknown>;
  for (const field of Object.keys(record)) if (!ENTRY_FIELDS.has(field)) return undefined;
  const job = record.job;
  const parts: (string | number | null)[] = [typeof job === "string" ? `s${job}` : isJobDefinition(job) ? `d${job.name}` : ""];
  if (parts[0] === "") return undefined;
  for (const field of TIMING_FIELDS) {
    const value = record[field];
    if (value === undefined) parts.push(null);
    else if (typeof value === "string" || (typeof value === "number" && Number.isFinite(value))) parts.push(value);
    else return undefined;
  }
  return JSON.stringify(parts);
}

/** An entry's timing resolved by the static entries' checks, with its own payload; undefined when they find a problem (the entry is then checked alone). */
function resolveTiming(input: Record<string, unknown>, options: DynamicValidation, fromMs: number): Timing | undefined {
  const { entries, problems } = resolveSchedule([{ ...input, key: "k" }], jobsFor([input], options), options);
  const entry = entries[0];
  if (entry === undefined || problems.some((problem) => problem.severity === "error")) return undefined;
  const nextSlotMs = entry.calendar.nextMs(fromMs);
  return {
    entry,
    emptyPayload: storablePayload(entry.job, undefined, resolveMaxPayloadBytes(options.maxPayloadBytes)),
    nextSlotMs,
    followingSlotMs: nextSlotMs === null ? null : entry.calendar.nextMs(nextSlotMs),
  };
}

/** The jobs an entry may name: the process's, or (when it knows none) a placeholder for each name the entries give. */
function jobsFor(inputs: readonly unknown[], options: DynamicValidation): readonly JobDefinition[] {
  if (options.jobs.length > 0) return options.jobs;
  const names = new Set(inputs.map(jobName));
  return [...names].map(placeholderJob).filter((job) => job !== undefined);
}

/** The row to store of a resolved entry under its key, with its payload and its first slots (the slot given and the one after, jittered by its own identity). */
function dynamicRow(entry: ResolvedEntry, key: string, payloadJson: string, slotMs: number | null, followingSlotMs?: number | null): DynamicEntryRow {
  return {
    key,
    jobName: entry.jobName,
    cron: entry.cron.canonical,
    timezone: entry.timezone,
    payloadJson,
    jitterMs: entry.jitterMs,
    catchUpWindowMs: entry.catchUpWindowMs,
    queue: entry.queue,
    priority: entry.priority,
    maxAttempts: entry.job.retry.maxAttempts,
    overlap: entry.overlap,
    slots: slotsFrom({ calendar: entry.calendar, jitterMs: entry.jitterMs, identity: dynamicIdentity(key) }, slotMs, followingSlotMs),
  };
}

/**
 * An entry's next slot `slotMs` with the one after it (computed unless
 * given), and their fire times: what its row stores (DynamicSlots), from the
 * same calendar a static entry of its cron and zone has.
 */
export function slotsFrom(
  entry: Pick<ResolvedEntry, "calendar" | "jitterMs" | "identity">,
  slotMs: number | null,
  followingSlotMs: number | null = slotMs === null ? null : entry.calendar.nextMs(slotMs),
): DynamicSlots {
  if (slotMs === null) return { nextFireMs: null, nextSlotMs: null, followingSlotMs: null, followingFireMs: null };
  return {
    nextFireMs: fireTime(entry, slotMs),
    nextSlotMs: slotMs,
    followingSlotMs,
    followingFireMs: followingSlotMs === null ? null : fireTime(entry, followingSlotMs),
  };
}

/**
 * How far the upserting process's clock may be ahead of the database's: an
 * entry's first `next_fire_at` is computed from this much before the
 * process's clock, so it is never after the first slot the pass must fire.
 */
export const CLOCK_TOLERANCE_MS = 60_000;

function jobName(input: unknown): string | undefined {
  const job = typeof input === "object" && input !== null ? (input as { job?: unknown }).job : undefined;
  if (typeof job === "string") return job;
  return typeof job === "object" && job !== null && typeof (job as { name?: unknown }).name === "string" ? (job as { name: string }).name : undefined;
}

function fieldOf(problem: ScheduleProblem): { field?: string } {
  const field = FIELD_OF[problem.code] ?? /\b(catchUpWindow|queue|priority|overlap|payload|timezone|cron|job|jitter)\b/.exec(problem.message)?.[1];
  return field === undefined ? {} : { field };
}

/** Bounded caches: a replica handles entries of any number of timings and jobs in a heap of its own size. */
const CACHE_LIMIT = 1_000;
const crons = new Map<string, ParsedCron>();
const calendars = new Map<string, SlotCalendar>();
const placeholders = new Map<string, JobDefinition>();

function cached<T>(cache: Map<string, T>, key: string, make: () => T): T {
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  if (cache.size >= CACHE_LIMIT) cache.clear();
  const made = make();
  cache.set(key, made);
  return made;
}

/**
 * A job this process does not know, for an entry that names it: a pass fires
 * a stored entry whatever jobs it runs (its job waits for a worker that
 * knows it), and its attempts are stored with it.
 */
function placeholderJob(name: string | undefined): JobDefinition | undefined {
  if (name === undefined) return undefined;
  try {
    return cached(placeholders, name, () => defineJob({ name, run: () => undefined }) as unknown as JobDefinition);
  } catch {
    return undefined;
  }
}

/** A stored entry's cron and calendar: the same calendar as a static entry of that cron and zone, kept for the entries of a timing (bounded). Throws for a row no longer valid here. */
function storedCalendar(row: Pick<DynamicDefinitionColumns, "cron" | "timezone">): { cron: ParsedCron; calendar: SlotCalendar } {
  const cron = cached(crons, row.cron, () => parseCron(row.cron));
  return { cron, calendar: cached(calendars, `${row.cron}|${cron.wildcardHour}|${row.timezone}`, () => rememberingCalendar(slotCalendar(cron, { timezone: row.timezone }))) };
}

/**
 * The slots to write back for an entry the take fired (src/db/sql/dynamic.ts,
 * fireDue): the next slot it moved the entry to, and the one after it from
 * the entry's calendar. Undefined for a row no longer valid here.
 */
export function firedSlots(row: TakenRow): DynamicSlots | undefined {
  try {
    const { calendar } = storedCalendar(row);
    return slotsFrom({ calendar, jitterMs: row.jitter_ms, identity: dynamicIdentity(row.key) }, row.next_slot_ms);
  } catch {
    return undefined;
  }
}

/** The entry a pass makes of a stored row: the same calendar as a static entry of that cron and zone. Undefined for a row no longer valid here. */
export function takenEntry(row: DynamicDefinitionColumns & { readonly payload: string }, namespace: string, index: number): ResolvedEntry | undefined {
  try {
    const { cron, calendar } = storedCalendar(row);
    const job = placeholderJob(row.job_name);
    if (job === undefined) return undefined;
    return {
      index,
      job,
      jobName: row.job_name,
      entryKey: row.key,
      cron,
      timezone: row.timezone,
      calendar,
      identity: dynamicIdentity(row.key),
      ledgerKey: dynamicLedgerKey(namespace, row.key),
      payload: undefined,
      payloadJson: row.payload,
      jitterMs: row.jitter_ms,
      catchUpWindowMs: row.catch_up_window_ms,
      queue: row.queue,
      priority: row.priority,
      overlap: row.overlap as OverlapPolicy,
      maxAttempts: row.max_attempts,
    };
  } catch {
    return undefined;
  }
}

/** The fire time of a stored entry's next slot after `ms`, or null when it never fires again. */
export function nextFireOf(entry: ResolvedEntry, ms: number): number | null {
  const next = entry.calendar.nextMs(ms);
  return next === null ? null : fireTime(entry, next);
}

/** Answers a remembering calendar keeps per direction; past it they start over. */
const ANSWERS_KEPT = 64;

/**
 * The calendar with its last answers kept, instant by instant: the entries a
 * pass takes share a few (cron, zone) calendars and ask each the same few
 * instants (their ledger value, the pass's span, their slot), five questions
 * an entry. 25,000 of them cost 13-35 ms in UTC and 27-77 ms in Europe/Paris
 * (node 20, load ~6, micro benchmark); answered from memory, under 1 ms. The answers are
 * the calendar's own (a pure function of the instant), so nothing changes.
 */
function rememberingCalendar(calendar: SlotCalendar): SlotCalendar {
  const remember = (ask: (ms: number) => number | null) => {
    const answers = new Map<number, number | null>();
    return (ms: number): number | null => {
      const known = answers.get(ms);
      if (known !== undefined) return known;
      const answer = ask(ms);
      if (answers.size >= ANSWERS_KEPT) answers.clear();
      answers.set(ms, answer);
      return answer;
    };
  };
  const nextMs = remember(calendar.nextMs);
  const latestMs = remember(calendar.latestMs);
  return Object.freeze({ ...calendar, nextMs, latestMs });
}

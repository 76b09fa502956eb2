import { z } from "zod";
import { parseDuration } from "../duration.js";
import { CronledgerError, ScheduleValidationError, type ScheduleProblem } from "../errors.js";
import { isJobDefinition, storablePayload, type JobDefinition } from "../jobs/define-job.js";
import { describeTooLarge, resolveMaxPayloadBytes } from "../jobs/payload-limit.js";
import { closest, describeShapeIssues } from "../suggest.js";
import { parseCron, type ParsedCron } from "./cron.js";
import { entryIdentity, ledgerKey } from "./identity.js";
import { slotCalendar, type SlotCalendar } from "./slot-calendar.js";
import { durationInput, overlapPolicy } from "../option-schema.js";
import type { OverlapPolicy } from "../schema.js";
import { timezoneSpelling, zoneOf } from "./timezone.js";

export const DEFAULT_CATCH_UP_WINDOW_MS = 24 * 3_600_000;
/** Ordinary lateness (a slow tick, a deploy) must never drop a slot. */
export const MIN_CATCH_UP_WINDOW_MS = 2 * 60_000;
const NEVER_MATCHES_HORIZON_MS = 5 * 366 * 86_400_000;

/** A schedule entry after validation: everything the tick needs, precomputed. */
export interface ResolvedEntry {
  readonly index: number;
  readonly job: JobDefinition;
  readonly jobName: string;
  readonly entryKey: string | undefined;
  readonly cron: ParsedCron;
  readonly timezone: string;
  readonly calendar: SlotCalendar;
  readonly identity: string;
  readonly ledgerKey: string;
  readonly payload: unknown;
  readonly payloadJson: string;
  readonly jitterMs: number;
  readonly catchUpWindowMs: number;
  readonly queue: string;
  readonly priority: number;
  /** The entry's overlap policy, or the schedule's default (src/db/sql/slot-policy.ts). */
  readonly overlap: OverlapPolicy;
  /** A dynamic entry's stored attempts (src/schedule/dynamic-entry.ts); a static entry's come from its job's retry policy. */
  readonly maxAttempts?: number;
}

export interface ResolveOptions {
  readonly namespace?: string;
  /** The catch-up window of entries that set none (createCronledger's `catchUpWindow`); default 24 h. Floored like an entry's own. */
  readonly catchUpWindowMs?: number;
  /** The overlap policy of entries that set none (createCronledger's `overlap`); default "allow_all". */
  readonly overlap?: OverlapPolicy;
  /** Reference instant for the never_matches look-ahead; defaults to the wall clock. */
  readonly now?: Date;
  /** Largest stored JSON of an entry's payload; default 1 MiB (see createCronledger's `maxPayloadBytes`). */
  readonly maxPayloadBytes?: number;
}

const durationSchema = durationInput();
// Strict: a misspelt field (`timeZone`, `tz`) must not silently leave the entry on UTC.
const entryShape = z.strictObject(
  {
    job: z.union([z.string().min(1), z.custom<JobDefinition>(isJobDefinition)], {
      error: "job must be a defineJob() result or the name of a registered job",
    }),
    cron: z.string({ error: 'cron must be a string such as "*/15 * * * *"' }),
    // An empty timezone is reported as invalid_timezone by assertTimezone, with its hint.
    timezone: z.string({ error: 'timezone must be a string such as "Europe/Berlin"' }).optional(),
    key: z
      .string()
      .min(1, "key must not be empty; omit it instead")
      .refine((key) => !key.includes("|"), "key must not contain '|'")
      .optional(),
    payload: z.unknown().optional(),
    jitter: durationSchema.optional(),
    catchUpWindow: durationSchema.optional(),
    queue: z.string().min(1).optional(),
    priority: z.number().int().optional(),
    overlap: overlapPolicy("overlap ").optional(),
  },
  { error: "each entry must be an object like { job, cron }" },
);

function describe(index: number, jobName: string | undefined): string {
  return `schedule[${index}]${jobName ? ` (${jobName})` : ""}`;
}

function jobNameOf(entry: unknown): string | undefined {
  if (typeof entry !== "object" || entry === null) return undefined;
  const job = (entry as { job?: unknown }).job;
  if (typeof job === "string") return job;
  return isJobDefinition(job) ? job.name : undefined;
}

/**
 * Resolves every entry it can and reports every problem it finds; never
 * throws for a bad entry. Warnings (never_matches) leave the entry usable.
 */
export function resolveSchedule(
  entries: readonly unknown[],
  jobs: readonly JobDefinition[],
  options: ResolveOptions = {},
): { entries: ResolvedEntry[]; problems: ScheduleProblem[] } {
  const namespace = options.namespace ?? "default";
  const nowMs = (options.now ?? new Date()).getTime();
  const maxPayloadBytes = resolveMaxPayloadBytes(options.maxPayloadBytes);
  const registry = new Map(jobs.map((job) => [job.name, job]));
  const problems: ScheduleProblem[] = [];
  const resolved: ResolvedEntry[] = [];
  const seen = new Map<string, { index: number; timezone: string }>();
  const parsedCrons = new Map<string, ParsedCron>();
  const calendars = new Map<string, SlotCalendar>();
  // Entries of a large schedule often carry the same payload: one string for each distinct JSON, not one per entry.
  const payloadJsons = new Map<string, string>();

  entries.forEach((raw, index) => {
    const jobName = jobNameOf(raw);
    const where = describe(index, jobName);
    // Known once the cron and timezone are: every later problem of the entry carries it.
    let knownIdentity: string | undefined;
    const report = (code: ScheduleProblem["code"], message: string, identity = knownIdentity, severity: ScheduleProblem["severity"] = "error") => {
      problems.push({ code, severity, index, message: `${where}: ${message}`, ...(jobName ? { jobName } : {}), ...(identity ? { identity } : {}) });
    };

    const shape = entryShape.safeParse(raw);
    if (!shape.success) {
      report("invalid_entry", `${describeShapeIssues(shape.error, entryShape, { noun: "field", list: "entries take" })}.`);
      return;
    }
    const entry = shape.data;
    const name = typeof entry.job === "string" ? entry.job : entry.job.name;
    let timezone = entry.timezone ?? "UTC";
    let broken = false;

    const cron = checked(report, "invalid_cron", () => {
      const parsed = parsedCrons.get(entry.cron) ?? parseCron(entry.cron);
      parsedCrons.set(entry.cron, parsed);
      return parsed;
    });
    const spelt = checked(report, "invalid_timezone", () => timezoneSpelling(timezone));
    if (spelt === undefined) broken = true;
    else timezone = spelt;
    if (cron === undefined) broken = true;
    if (cron !== undefined && !broken) knownIdentity = entryIdentity({ jobName: name, key: entry.key, canonicalCron: cron.canonical, timezone });

    const registered = registry.get(name);
    const job = registered ?? (typeof entry.job === "string" ? undefined : entry.job);
    if (!registered) {
      const hint = closest(name, [...registry.keys()]);
      report(
        "unregistered_job",
        `job "${name}" is not registered${hint === undefined ? "" : ` (did you mean "${hint}"?)`}: add its defineJob() result to \`jobs\` (createCronledger / defineConfig), or fix the name.`,
      );
      broken = true;
    }

    let payloadJson = "{}";
    if (job) {
      const json = storedPayload(job, name, entry.payload, maxPayloadBytes, report);
      if (json === undefined) broken = true;
      else payloadJson = payloadJsons.get(json) ?? json;
      if (json !== undefined) payloadJsons.set(payloadJson, payloadJson);
    }

    const jitterMs = checked(report, "invalid_jitter", () => (entry.jitter === undefined ? 0 : parseDuration(entry.jitter, "jitter")));
    const catchUpWindowMs = checked(report, "invalid_entry", () =>
      Math.max(MIN_CATCH_UP_WINDOW_MS, entry.catchUpWindow === undefined ? (options.catchUpWindowMs ?? DEFAULT_CATCH_UP_WINDOW_MS) : parseDuration(entry.catchUpWindow, "catchUpWindow")),
    );
    if (jitterMs === undefined || catchUpWindowMs === undefined) broken = true;

    if (cron === undefined || jitterMs === undefined || catchUpWindowMs === undefined || broken) return;
    // Large schedules repeat a few timings many times: share one calendar per timing. The hour's DST
    // reading is part of the timing but not of the canonical form (`0,12` and `*/12` differ across DST).
    const calendarKey = `${cron.canonical}|${cron.wildcardHour}|${timezone}`;
    const calendar = calendars.get(calendarKey) ?? slotCalendar(cron, { timezone });
    calendars.set(calendarKey, calendar);
    const identity = knownIdentity ?? entryIdentity({ jobName: name, key: entry.key, canonicalCron: cron.canonical, timezone });

    if (jitterMs > 0 && jitterMs >= calendar.shortestGapMs()) return report("invalid_jitter", jitterTooLong(jitterMs, calendar.shortestGapMs()), identity);

    const timing = entryIdentity({ jobName: name, key: entry.key, canonicalCron: cron.canonical, timezone: zoneOf(timezone) });
    const first = seen.get(timing);
    if (first !== undefined) return report("duplicate_entry", duplicateOf(first, timezone, identity), identity);
    seen.set(timing, { index, timezone });

    const firstSlot = cron.neverMatches ? null : calendar.nextMs(nowMs);
    if (firstSlot === null || firstSlot > nowMs + NEVER_MATCHES_HORIZON_MS) report("never_matches", neverFires(entry.cron, timezone, firstSlot), identity, "warning");

    resolved.push({
      index,
      job: job as JobDefinition,
      jobName: name,
      entryKey: entry.key,
      cron,
      timezone,
      calendar,
      identity,
      ledgerKey: ledgerKey(namespace, identity),
      payload: entry.payload ?? {},
      payloadJson,
      jitterMs,
      catchUpWindowMs,
      queue: entry.queue ?? (job as JobDefinition).queue,
      priority: entry.priority ?? (job as JobDefinition).priority,
      overlap: entry.overlap ?? options.overlap ?? "allow_all",
    });
  });
  return { entries: resolved, problems };
}

type Report = (code: ScheduleProblem["code"], message: string) => void;

/** What `read` returns; undefined when it throws, the error reported under `code`. */
function checked<T>(report: Report, code: ScheduleProblem["code"], read: () => T): T | undefined {
  try {
    return read();
  } catch (error) {
    report(code, messageOf(error));
    return undefined;
  }
}

/** The entry's payload as the JSON stored with its jobs; undefined when it cannot be stored (too large, or fails its job's schema), reported. */
function storedPayload(job: JobDefinition, name: string, payload: unknown, maxPayloadBytes: number, report: Report): string | undefined {
  const stored = storablePayload(job, payload, maxPayloadBytes);
  if ("tooLarge" in stored) {
    report("invalid_payload", `payload ${describeTooLarge(stored.tooLarge, maxPayloadBytes)}.`);
    return undefined;
  }
  if (!stored.ok) {
    report("invalid_payload", `payload does not match job "${name}"'s schema: ${stored.issues.join("; ")}.`);
    return undefined;
  }
  return stored.json;
}

function jitterTooLong(jitterMs: number, shortestGapMs: number): string {
  return `jitter ${readableMs(jitterMs)} must be shorter than the shortest gap between this entry's slots (${readableMs(shortestGapMs)}), or a slot could fire after the next one; lower it.`;
}

function duplicateOf(first: { readonly index: number; readonly timezone: string }, timezone: string, identity: string): string {
  const sameZone = first.timezone === timezone ? "" : ` (${JSON.stringify(first.timezone)} and ${JSON.stringify(timezone)} are the same zone)`;
  return `same job and timing as schedule[${first.index}]${sameZone} (identity "${identity}"); give one of them a distinct \`key\`, or remove the duplicate.`;
}

function neverFires(cron: string, timezone: string, firstSlot: number | null): string {
  return `cron "${cron}" has no slot in the next 5 years in ${timezone}${firstSlot === null ? "" : ` (the first is ${new Date(firstSlot).toISOString()})`}, so it will never fire in practice; check its day fields against its months, or remove the entry.`;
}

/** "90s", "2m", "1d": durations as a user would write them in the entry. */
function readableMs(ms: number): string {
  const units: readonly [string, number][] = [["d", 86_400_000], ["h", 3_600_000], ["m", 60_000], ["s", 1_000]];
  const unit = units.find(([, size]) => ms >= size && ms % size === 0);
  return unit ? `${ms / unit[1]}${unit[0]}` : `${ms}ms`;
}

function messageOf(error: unknown): string {
  if (error instanceof CronledgerError) return error.message;
  return error instanceof Error ? error.message : String(error);
}

/** Every problem in the schedule, errors and warnings; never throws for a bad entry. */
export function validateSchedule(entries: readonly unknown[], jobs: readonly JobDefinition[], options: ResolveOptions = {}): ScheduleProblem[] {
  return resolveSchedule(entries, jobs, options).problems;
}

/** The resolved schedule, or one ScheduleValidationError listing every error. Warnings are returned alongside. */
export function loadSchedule(
  entries: readonly unknown[],
  jobs: readonly JobDefinition[],
  options: ResolveOptions = {},
): { entries: ResolvedEntry[]; warnings: ScheduleProblem[] } {
  const { entries: resolved, problems } = resolveSchedule(entries, jobs, options);
  if (problems.some((problem) => problem.severity === "error")) throw new ScheduleValidationError(problems);
  return { entries: resolved, warnings: problems };
}

import { CronExpressionParser } from "cron-parser";
import type { CronFieldCollection } from "cron-parser";
import { InvalidCronError } from "../errors.js";
import { readCronFields } from "./cron-grammar.js";

export interface ParsedCron {
  /** The expression as written. */
  readonly source: string;
  /** One spelling per schedule: equivalent expressions share it (identity, docs/architecture.md). */
  readonly canonical: string;
  /** The second field is anything but {0}, so the cron has second resolution. */
  readonly hasSeconds: boolean;
  /**
   * The hour field is written as a sweep of the day (`*`, `*\/n`, `0-23/n`):
   * DST folds fire twice and gaps are skipped (README, "Catch-up and DST").
   * A list of hours never is, whatever its set (`0,12` keeps fixed hours),
   * so this is read from the text, not from the canonical form; it is not
   * part of the identity (docs/decisions.md).
   */
  readonly wildcardHour: boolean;
  /** The day of month can never occur in the chosen months (`0 0 30 2 *`). */
  readonly neverMatches: boolean;
}

/**
 * The matching sets behind a ParsedCron, with cron-parser's day-of-month /
 * day-of-week combination already resolved into `days`.
 * @internal shared with slot-calendar.ts, not part of the package API.
 */
export interface CronFieldSets {
  readonly second: readonly number[];
  readonly minute: readonly number[];
  readonly hour: readonly number[];
  readonly dayOfMonth: readonly number[];
  readonly lastDayOfMonth: boolean;
  readonly month: readonly number[];
  readonly dayOfWeek: readonly number[];
  /** Weekdays written `5L`: only in the last seven days of the month. */
  readonly lastWeekdayOfMonth: readonly number[];
  /** `n` from `d#n`, 0 when absent; it restricts every `dayOfWeek` value. */
  readonly nthWeekday: number;
  /**
   * all: every day; dom / dow: only that field decides; either: a day matching
   * either field (cron's OR rule when both are restricted).
   */
  readonly days: "all" | "dom" | "dow" | "either";
}

const ALIASES: Readonly<Record<string, string>> = {
  "@yearly": "0 0 1 1 *",
  "@annually": "0 0 1 1 *",
  "@monthly": "0 0 1 * *",
  "@weekly": "0 0 * * 0",
  "@daily": "0 0 * * *",
  "@hourly": "0 * * * *",
};

const FIELD_NAMES = ["second", "minute", "hour", "day-of-month", "month", "day-of-week"] as const;
const NAME_TOKEN = /jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|sun|mon|tue|wed|thu|fri|sat/gi;
const DAYS_IN_MONTH = [0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31] as const;
const SYNTAX_HINT =
  "write 5 fields (minute hour day-of-month month day-of-week), 6 with a leading second field, or one of " +
  `${Object.keys(ALIASES).join(" ")}`;
const VALUES_HINT =
  "fields take numbers, ranges (1-5), lists (1,3), steps (*/15); ranges are second/minute 0-59, hour 0-23, " +
  "day-of-month 1-31 or L, month 1-12 or jan-dec, day-of-week 0-7 or sun-sat (5L = last Friday, 1#2 = second Monday)";

const fieldSets = new WeakMap<ParsedCron, CronFieldSets>();

export function parseCron(expression: string): ParsedCron {
  if (typeof expression !== "string" || expression.trim() === "") {
    throw new InvalidCronError(String(expression), `it is empty; ${SYNTAX_HINT}.`);
  }
  const trimmed = expression.trim();
  let body = trimmed;
  if (trimmed.startsWith("@")) {
    const alias = ALIASES[trimmed.toLowerCase()];
    if (alias === undefined) {
      throw new InvalidCronError(expression, `unknown alias ${JSON.stringify(trimmed)}; ${SYNTAX_HINT}.`);
    }
    body = alias;
  }
  const tokens = body.split(/\s+/);
  if (tokens.length !== 5 && tokens.length !== 6) {
    throw new InvalidCronError(expression, `it has ${tokens.length} fields; ${SYNTAX_HINT}.`);
  }
  const six = tokens.length === 6 ? tokens : ["0", ...tokens];
  six.forEach((token, index) => {
    if (/h/i.test(token.replace(NAME_TOKEN, ""))) {
      throw new InvalidCronError(
        expression,
        `the ${FIELD_NAMES[index]} field ${JSON.stringify(token)} uses H, whose value is random per parser; write the value you want instead.`,
      );
    }
  });

  const text = readCronFields(expression, six);
  const effective = withoutRepeats(text.fields);

  let sets: CronFieldSets;
  let neverMatches = false;
  try {
    sets = toSets(CronExpressionParser.parse(effective.join(" "), { tz: "UTC" }).fields);
  } catch (error) {
    if (!(error instanceof Error) || error.message !== "Invalid explicit day of month definition") {
      throw new InvalidCronError(expression, describeParseFailure(six, error));
    }
    // cron-parser refuses a day of month no chosen month has; such an entry
    // is valid but never fires, so keep its fields for the canonical form.
    const withAnyMonth = [...effective.slice(0, 4), "*", effective[5] ?? "*"].join(" ");
    const anyMonth = toSets(CronExpressionParser.parse(withAnyMonth, { tz: "UTC" }).fields);
    const months = CronExpressionParser.parse(`0 0 0 1 ${effective[4] ?? "*"} *`, { tz: "UTC" }).fields.month.values;
    sets = { ...anyMonth, month: [...months] };
    neverMatches = true;
  }

  const hasSeconds = !(sets.second.length === 1 && sets.second[0] === 0);
  const rendered = [
    renderField(sets.minute, 0, 59),
    renderField(sets.hour, 0, 23),
    sets.days === "all" || sets.days === "dow" ? "*" : renderDayOfMonth(sets),
    renderField(sets.month, 1, 12),
    sets.days === "all" || sets.days === "dom" ? "*" : renderDayOfWeek(sets),
  ];
  if (hasSeconds) rendered.unshift(renderField(sets.second, 0, 59));

  const parsed: ParsedCron = Object.freeze({
    source: expression,
    canonical: rendered.join(" "),
    hasSeconds,
    wildcardHour: text.hourSweep,
    neverMatches,
  });
  fieldSets.set(parsed, sets);
  return parsed;
}

/** @internal the matching sets of a parsed cron (re-derived from `canonical` for objects built elsewhere). */
export function cronFieldSets(cron: ParsedCron): CronFieldSets {
  const known = fieldSets.get(cron);
  if (known) return known;
  const reparsed = parseCron(cron.canonical);
  const sets = fieldSets.get(reparsed);
  if (!sets) throw new Error("parseCron did not record field sets");
  fieldSets.set(cron, sets);
  return sets;
}

function toSets(fields: CronFieldCollection): CronFieldSets {
  const numbers = (values: readonly (number | string)[]): number[] =>
    values.filter((value): value is number => typeof value === "number");
  const month = numbers(fields.month.values);
  const dayOfMonth = numbers(fields.dayOfMonth.values);
  const lastDayOfMonth = fields.dayOfMonth.values.some((value) => value === "L");
  const dayOfWeek = unique(numbers(fields.dayOfWeek.values).map((day) => day % 7));
  const lastWeekdayOfMonth = unique(
    fields.dayOfWeek.values
      .filter((value): value is Extract<typeof value, string> => typeof value === "string")
      .map((value) => Number.parseInt(value.charAt(0), 10) % 7),
  );
  const nthWeekday = fields.dayOfWeek.nthDay;

  // cron-parser decides the day rule from how the fields were written: a
  // written `*` (or `?`) drops that field, otherwise the two are ORed. A
  // restricted field that still covers every day therefore makes every day
  // match, which is what lets `1-31`, `*/1` and `0-6` canonicalise to `*`.
  const longestMonth = Math.max(...month.map((m) => DAYS_IN_MONTH[m] ?? 31));
  const domFull = covers(dayOfMonth, 1, longestMonth);
  const dowFull = nthWeekday === 0 && covers(dayOfWeek, 0, 6);
  const domWritten = !fields.dayOfMonth.isWildcard;
  const dowWritten = !fields.dayOfWeek.isWildcard;
  let days: CronFieldSets["days"];
  if (domWritten && dowWritten) days = domFull || dowFull ? "all" : "either";
  else if (domWritten) days = domFull ? "all" : "dom";
  else if (dowWritten) days = dowFull ? "all" : "dow";
  else days = "all";

  return {
    second: numbers(fields.second.values),
    minute: numbers(fields.minute.values),
    hour: numbers(fields.hour.values),
    dayOfMonth,
    lastDayOfMonth,
    month,
    dayOfWeek,
    lastWeekdayOfMonth,
    nthWeekday,
    days,
  };
}

function unique(values: number[]): number[] {
  return [...new Set(values)].sort((a, b) => a - b);
}

function covers(values: readonly number[], min: number, max: number): boolean {
  for (let value = min; value <= max; value++) if (!values.includes(value)) return false;
  return true;
}

/** Renders a sorted set of values; equal sets always render the same way. */
function renderField(values: readonly number[], min: number, max: number): string {
  if (covers(values, min, max)) return "*";
  const first = values[0];
  const second = values[1];
  const last = values[values.length - 1];
  if (first === undefined || second === undefined || last === undefined) return values.join(",");
  const step = second - first;
  const progression = values.every((value, index) => value === first + index * step);
  if (progression && step > 1 && first === min && last + step > max) return `*/${step}`;
  const parts: string[] = [];
  for (let start = 0; start < values.length; ) {
    let end = start;
    while (end + 1 < values.length && values[end + 1] === (values[end] ?? 0) + 1) end++;
    if (end - start >= 2) parts.push(`${values[start]}-${values[end]}`);
    else for (let index = start; index <= end; index++) parts.push(String(values[index]));
    start = end + 1;
  }
  return parts.join(",");
}

function renderDayOfMonth(sets: CronFieldSets): string {
  const rendered = sets.dayOfMonth.length > 0 ? renderField(sets.dayOfMonth, 1, 31) : "";
  if (!sets.lastDayOfMonth) return rendered;
  return rendered === "" ? "L" : `${rendered},L`;
}

function renderDayOfWeek(sets: CronFieldSets): string {
  if (sets.nthWeekday > 0) return `${sets.dayOfWeek[0]}#${sets.nthWeekday}`;
  const parts = sets.dayOfWeek.length > 0 ? [renderField(sets.dayOfWeek, 0, 6)] : [];
  for (const day of sets.lastWeekdayOfMonth) parts.push(`${day}L`);
  return parts.join(",");
}

/** Names the field cron-parser objects to, by parsing each one alone. */
const FIELD_KEYS = ["second", "minute", "hour", "dayOfMonth", "month", "dayOfWeek"] as const;

/**
 * cron-parser refuses a list that names a value twice, which classic cron
 * accepts: `0,7` (both Sunday), `1-5,3`, `L,L`, `5L,FRIL`. Only such a list
 * field is replaced by the union of what its parts match (numbers, then L
 * and dL); every other field reaches cron-parser as the grammar wrote it.
 */
function withoutRepeats(six: readonly string[]): string[] {
  return six.map((token, index) => {
    if (!token.includes(",")) return token;
    const values = new Set<number | string>();
    let matchedCount = 0;
    for (const part of token.split(",")) {
      const probe = six.map((_, at) => (at === index ? part : at === 0 ? "0" : "*"));
      let matched: readonly (number | string)[];
      try {
        matched = CronExpressionParser.parse(probe.join(" "), { tz: "UTC" }).fields[FIELD_KEYS[index] as (typeof FIELD_KEYS)[number]].values;
      } catch {
        return token;
      }
      const partValues = new Set<number | string>();
      for (const value of matched) {
        if (index !== 5) partValues.add(value);
        else partValues.add(typeof value === "number" ? value % 7 : value.replace(/^7/, "0"));
      }
      matchedCount += partValues.size;
      for (const value of partValues) values.add(value);
    }
    if (matchedCount === values.size) return token;
    const numbers = [...values].filter((value): value is number => typeof value === "number").sort((a, b) => a - b);
    return [...numbers, ...[...values].filter((value) => typeof value === "string").sort()].join(",");
  });
}

function describeParseFailure(six: readonly string[], error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  for (let index = 0; index < six.length; index++) {
    const alone = six.map((token, at) => (at === index ? token : "*"));
    try {
      CronExpressionParser.parse(alone.join(" "), { tz: "UTC" });
    } catch (fieldError) {
      const reason = fieldError instanceof Error ? fieldError.message : String(fieldError);
      return `the ${FIELD_NAMES[index]} field ${JSON.stringify(six[index])} is invalid (${reason}); ${VALUES_HINT}.`;
    }
  }
  return `${message}; ${VALUES_HINT}.`;
}

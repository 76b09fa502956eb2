/**
 * The cron grammar cronledger accepts (README, "The schedule format"), read
 * field by field before cron-parser sees the expression. cron-parser is
 * lenient in ways that read a value differently from what was written: it
 * replaces every three-letter name in a field, steps included (`*\/tue` is
 * `*\/2`, `1-5/jan` is `1-5/1`), and counts `*#2` as a weekday. Here every
 * item must match the grammar, or the expression is refused with a message
 * saying what to write; what passes reaches cron-parser in a numeric
 * dialect it reads exactly (names as numbers, `?` as `*`, a range ending in
 * `SUN` as ending in 7).
 */
import { InvalidCronError } from "../errors.js";

interface FieldSpec {
  readonly label: string;
  readonly min: number;
  readonly max: number;
  /** Three-letter names, the first standing for `min`. */
  readonly names?: readonly string[];
}

const MONTH_NAMES = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"] as const;
const DAY_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"] as const;

/** second, minute, hour, day-of-month, month, day-of-week. */
const FIELDS: readonly FieldSpec[] = [
  { label: "second", min: 0, max: 59 },
  { label: "minute", min: 0, max: 59 },
  { label: "hour", min: 0, max: 23 },
  { label: "day-of-month", min: 1, max: 31 },
  { label: "month", min: 1, max: 12, names: MONTH_NAMES },
  { label: "day-of-week", min: 0, max: 7, names: DAY_NAMES },
];
const HOUR = 2;
const DAY_OF_MONTH = 3;
const DAY_OF_WEEK = 5;

export interface CronText {
  /** The six fields in the numeric dialect cron-parser reads as written. */
  readonly fields: readonly string[];
  /**
   * The hour field is written as one sweep of the whole day, `*`, `*\/n`,
   * `0-23`, `0-23/n`, `0/n` (at least two hours): such an entry fires at
   * every real instant across DST. A list never is, whatever its hours.
   */
  readonly hourSweep: boolean;
}

/** Reads six fields (a 5-field expression with its second field added) by the grammar, or throws InvalidCronError. */
export function readCronFields(expression: string, six: readonly string[]): CronText {
  const fields = six.map((token, index) => readField(expression, FIELDS[index] as FieldSpec, index, token));
  return { fields, hourSweep: isHourSweep(six[HOUR] ?? "") };
}

class GrammarError extends Error {}

function readField(expression: string, spec: FieldSpec, index: number, token: string): string {
  const fail = (reason: string): never => {
    throw new InvalidCronError(expression, `the ${spec.label} field ${JSON.stringify(token)} ${reason}`);
  };
  const items = token.split(",");
  if (items.includes("")) {
    fail("has an empty list item (a doubled, leading or trailing comma); remove the extra comma or write the value you meant.");
  }
  if (index === DAY_OF_WEEK && token.includes("#")) {
    if (items.length > 1) {
      fail("puts d#n in a list; d#n (1#2 = second Monday) must stand alone, so write one schedule entry for each item of the list, each with its own key.");
    }
    return readNth(spec, token, fail);
  }
  try {
    return items.map((item) => readItem(spec, index, item)).join(",");
  } catch (error) {
    if (error instanceof GrammarError) return fail(error.message);
    throw error;
  }
}

/** `d#n`: the n-th weekday d of the month, alone in the day-of-week field. */
function readNth(spec: FieldSpec, token: string, fail: (reason: string) => never): string {
  const [day = "", nth = "", ...rest] = token.split("#");
  if (day === "*" || day === "?") {
    fail(`counts "${day}" with #, but # counts one weekday (1#2 = second Monday); write the weekday before #, or days 8-14 in the day-of-month field for "the second week".`);
  }
  // Leading zeros are fine here as in every other number of the expression (`1#02` is `1#2`).
  if (rest.length > 0 || !/^0*[1-5]$/.test(nth)) fail("needs d#n with n from 1 to 5 (1#2 = second Monday, 5#5 = fifth Friday when the month has one).");
  try {
    return `${readValue(spec, day, "a weekday before #")}#${Number(nth)}`;
  } catch (error) {
    if (error instanceof GrammarError) return fail(error.message);
    throw error;
  }
}

/** One list item: `*`, `?`, a value, a range, any of these with `/step`, `L` (day of month) or `dL` (day of week). */
function readItem(spec: FieldSpec, index: number, item: string): string {
  const slash = item.indexOf("/");
  const body = slash === -1 ? item : item.slice(0, slash);
  const step = slash === -1 ? undefined : item.slice(slash + 1);
  const stepText = step === undefined ? "" : `/${readStep(body, step)}`;

  if (body === "*" || body === "?") return `*${stepText}`;
  if (body === "") throw new GrammarError(`has "/${step ?? ""}" with nothing before it; write */${step ?? "n"} for every n-th value from the first.`);
  if (/^(?:\d+|l)w$/i.test(body)) {
    throw new GrammarError("uses W (nearest weekday), which cronledger does not support; write the days you want.");
  }
  if (/^l$/i.test(body)) {
    if (index !== DAY_OF_MONTH) {
      throw new GrammarError(
        index === DAY_OF_WEEK
          ? "uses L alone, which names no weekday; write 5L for the last Friday of the month, or L in the day-of-month field for the last day."
          : "uses L, which only the day-of-month (last day) and day-of-week (5L = last Friday) fields take.",
      );
    }
    if (step !== undefined) throw new GrammarError("puts a step after L; L (the last day of the month) takes no step.");
    return "L";
  }
  if (index === DAY_OF_MONTH && /^l-/i.test(body)) {
    throw new GrammarError("uses L-n (n days before the last), which cronledger does not support; write L for the last day, or the days you want.");
  }
  const last = /^(.+)l$/i.exec(body);
  if (last && index === DAY_OF_WEEK) {
    if (step !== undefined) throw new GrammarError("puts a step after dL; dL (5L = last Friday of the month) takes no step.");
    return `${readValue(spec, last[1] ?? "", "one weekday before L (5L = last Friday)")}L`;
  }

  const bounds = body.split("-");
  if (bounds.length > 2) throw new GrammarError(`has a range ${JSON.stringify(body)} with more than one "-"; write a range as a-b.`);
  const from = readValue(spec, bounds[0] ?? "", "a value");
  if (bounds.length === 1) return `${from}${stepText}`;
  const toText = bounds[1] ?? "";
  let to = readValue(spec, toText, "a value after -");
  // SUN is 0 and 7: ending a range it is 7, so MON-SUN is MON-7 (the README's SUN = 0 = 7).
  if (index === DAY_OF_WEEK && to === 0 && from > 0 && isName(spec, toText)) to = 7;
  if (from > to) {
    const across = index === DAY_OF_WEEK && to === 0 ? `${from}-7 (7 is Sunday too)` : `${from}-${spec.max},${spec.min}-${to} for one that crosses the end`;
    throw new GrammarError(`has a range ${JSON.stringify(body)} that runs backwards; ranges run upwards and do not wrap, so write ${across}.`);
  }
  return `${from}-${to}${stepText}`;
}

function readStep(body: string, step: string): number {
  if (step.includes("/")) throw new GrammarError("has more than one /; write a step once, as */n or a-b/n.");
  if (step === "") throw new GrammarError(`has nothing after "/"; write ${body}/n with n the step.`);
  if (/^\d+$/.test(step)) {
    const value = Number(step);
    if (value >= 1) return value;
    throw new GrammarError("has a step of 0; a step counts values (*/15 = every 15th from the first) and must be 1 or more.");
  }
  if (/^[a-z]+$/i.test(step)) {
    throw new GrammarError(
      `has a name after "/" (${JSON.stringify(`${body}/${step}`)}); a step counts values (*/2 = every second one) and is a number, so write */2 for every other, or the name alone for that one value.`,
    );
  }
  throw new GrammarError(`has a step ${JSON.stringify(step)} that is not a whole number; write */n or a-b/n with n a number.`);
}

function isName(spec: FieldSpec, text: string): boolean {
  return spec.names?.includes(text.toLowerCase()) === true;
}

/** A number within the field's bounds, or one of its names. */
function readValue(spec: FieldSpec, text: string, what: string): number {
  if (/^\d+$/.test(text)) {
    const value = Number(text);
    if (value < spec.min || value > spec.max) {
      throw new GrammarError(`has ${text}, outside ${spec.min}-${spec.max}${spec.names ? ` (or ${spec.names[0]}-${spec.names.at(-1)})` : ""}.`);
    }
    return value;
  }
  const named = spec.names?.indexOf(text.toLowerCase()) ?? -1;
  if (named >= 0) return spec.min + named;
  if (text === "") throw new GrammarError(`is missing ${what}.`);
  if (/^[a-z]+$/i.test(text)) {
    const names = spec.names ? `this field's names are ${spec.names.join(" ")} (any case)` : "this field takes numbers only";
    throw new GrammarError(`has ${JSON.stringify(text)}, which is not a name it knows; ${names}.`);
  }
  throw new GrammarError(`has ${JSON.stringify(text)} where it expects ${what}: a number from ${spec.min} to ${spec.max}.`);
}

/**
 * `*`, `?`, `0-b`, `0/n`, `*\/n`, `0-b/n`, alone, when they select every
 * n-th hour from 0 to the day's end, at least two of them. `1-23/2` and
 * `0-12` name fixed hours; `*\/24` is hour 0 alone, a fixed hour.
 */
function isHourSweep(token: string): boolean {
  const match = /^(?:([*?])|0+(?:-(\d+))?)(?:\/(\d+))?$/.exec(token);
  if (!match) return false;
  const [, star, rangeEnd, stepText] = match;
  if (star === undefined && rangeEnd === undefined && stepText === undefined) return false;
  const step = stepText === undefined ? 1 : Number(stepText);
  const end = rangeEnd === undefined ? 23 : Number(rangeEnd);
  return step >= 1 && step <= 23 && Math.floor(23 / step) * step <= end;
}

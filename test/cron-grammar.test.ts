// Over 350 lines: the reference evaluator, the generator and the checks are one argument and read best side by side.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InvalidCronError } from "../src/errors.js";
import { parseCron } from "../src/schedule/cron.js";
import { slotCalendar } from "../src/schedule/slot-calendar.js";

/**
 * Generated cron expressions, well-formed and malformed, checked against a
 * reference evaluator written here from the README's grammar ("The
 * schedule format") and DST rules ("Catch-up and DST"), not from
 * src/schedule: each expression is either refused as invalid_cron where the
 * reference refuses it, or fires exactly at the instants the reference
 * computes, in UTC and across DST transitions. Seeded, so a failure replays;
 * CRON_GRAMMAR_RUNS raises the number of runs.
 */
const SEED = 20_270_115;
const RUNS = Number(process.env.CRON_GRAMMAR_RUNS ?? 600);

// ---------------------------------------------------------------- the reference

interface Field {
  readonly min: number;
  readonly max: number;
  readonly names: readonly string[];
}
const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
const SPECS: readonly Field[] = [
  { min: 0, max: 59, names: [] },
  { min: 0, max: 59, names: [] },
  { min: 0, max: 23, names: [] },
  { min: 1, max: 31, names: [] },
  { min: 1, max: 12, names: MONTHS },
  { min: 0, max: 7, names: DAYS },
];
const ALIASES: Record<string, string> = {
  "@yearly": "0 0 1 1 *",
  "@annually": "0 0 1 1 *",
  "@monthly": "0 0 1 * *",
  "@weekly": "0 0 * * 0",
  "@daily": "0 0 * * *",
  "@hourly": "0 * * * *",
};

/** What an expression means by the grammar: sets per field, the day rule's pieces, and the hour reading. */
interface Meaning {
  readonly second: ReadonlySet<number>;
  readonly minute: ReadonlySet<number>;
  readonly hour: ReadonlySet<number>;
  readonly month: ReadonlySet<number>;
  readonly dates: ReadonlySet<number>;
  readonly lastDate: boolean;
  readonly weekdays: ReadonlySet<number>;
  readonly lastWeekdays: ReadonlySet<number>;
  /** 0 when the weekday field is not `d#n`. */
  readonly nth: number;
  readonly datesRestricted: boolean;
  readonly weekdaysRestricted: boolean;
  /** The hour field is written as a sweep of the day: every real instant fires across DST. */
  readonly sweep: boolean;
}

class Refused extends Error {}

function value(field: Field, text: string): number {
  let n: number;
  if (/^[0-9]+$/.test(text)) n = Number(text);
  else if (field.names.includes(text.toLowerCase())) n = field.min + field.names.indexOf(text.toLowerCase());
  else throw new Refused(`not a value: ${text}`);
  if (n < field.min || n > field.max) throw new Refused(`out of range: ${text}`);
  return n;
}

function stepped(from: number, to: number, step: number): number[] {
  const out: number[] = [];
  for (let n = from; n <= to; n += step) out.push(n);
  return out;
}

/** The values of one list item that is `*`, `?`, a value or a range, with an optional numeric step. */
function plainItem(field: Field, item: string, weekday: boolean): number[] {
  const parts = item.split("/");
  if (parts.length > 2) throw new Refused("two slashes");
  const [base = "", stepText] = parts;
  let step = 1;
  if (stepText !== undefined) {
    if (!/^[0-9]+$/.test(stepText)) throw new Refused("a step is a number");
    step = Number(stepText);
    if (step < 1) throw new Refused("step 0");
  }
  if (base === "*" || base === "?") return stepped(field.min, field.max, step);
  const ends = base.split("-");
  if (ends.length === 1) {
    const from = value(field, ends[0] ?? "");
    return stepText === undefined ? [from] : stepped(from, field.max, step);
  }
  if (ends.length !== 2) throw new Refused("bad range");
  const from = value(field, ends[0] ?? "");
  let to = value(field, ends[1] ?? "");
  if (weekday && from > 0 && (ends[1] ?? "").toLowerCase() === "sun") to = 7;
  if (from > to) throw new Refused("backwards range");
  return stepped(from, to, step);
}

function readReference(expression: string): Meaning {
  let text = expression.trim();
  if (text.startsWith("@")) {
    const alias = ALIASES[text.toLowerCase()];
    if (alias === undefined) throw new Refused("unknown alias");
    text = alias;
  }
  const fields = text.split(/\s+/);
  if (fields.length === 5) fields.unshift("0");
  if (fields.length !== 6 || text === "") throw new Refused("field count");
  const [second = "", minute = "", hour = "", dom = "", month = "", dow = ""] = fields;
  const list = (index: number, token: string) => {
    const items = token.split(",");
    if (items.includes("")) throw new Refused("empty item");
    return new Set(items.flatMap((item) => plainItem(SPECS[index] as Field, item, false)));
  };

  const dates = new Set<number>();
  let lastDate = false;
  for (const item of dom.split(",")) {
    if (item === "") throw new Refused("empty item");
    if (item.toUpperCase() === "L") lastDate = true;
    else for (const n of plainItem(SPECS[3] as Field, item, false)) dates.add(n);
  }

  const weekdays = new Set<number>();
  const lastWeekdays = new Set<number>();
  let nth = 0;
  const nthMatch = /^([a-z0-9]+)#(0*[1-5])$/i.exec(dow);
  if (nthMatch) {
    weekdays.add(value(SPECS[5] as Field, nthMatch[1] ?? "") % 7);
    nth = Number(nthMatch[2]);
  } else {
    for (const item of dow.split(",")) {
      if (item === "") throw new Refused("empty item");
      const last = /^([a-z0-9]+)L$/i.exec(item);
      if (last && !DAYS.includes(item.toLowerCase())) lastWeekdays.add(value(SPECS[5] as Field, last[1] ?? "") % 7);
      else for (const n of plainItem(SPECS[5] as Field, item, true)) weekdays.add(n % 7);
    }
  }

  const hours = list(2, hour);
  return {
    second: list(0, second),
    minute: list(1, minute),
    hour: hours,
    month: list(4, month),
    dates,
    lastDate,
    weekdays,
    lastWeekdays,
    nth,
    datesRestricted: dom !== "*" && dom !== "?",
    weekdaysRestricted: dow !== "*" && dow !== "?",
    sweep: isSweep(hour, hours),
  };
}

/**
 * The README: a wildcard hour is one item, `*`, `?` or starting at hour 0
 * with a range or a step, that selects 0, n, 2n, ... through the day's last
 * such hour, at least two hours. A list never is.
 */
function isSweep(token: string, hours: ReadonlySet<number>): boolean {
  if (token.includes(",")) return false;
  const base = token.split("/")[0] ?? "";
  const shaped = base === "*" || base === "?" || (/^0+(-[0-9]+)?$/.test(base) && (base.includes("-") || token.includes("/")));
  if (!shaped) return false;
  const step = token.includes("/") ? Number(token.split("/")[1]) : 1;
  const expected = stepped(0, 23, step);
  return expected.length >= 2 && expected.length === hours.size && expected.every((h) => hours.has(h));
}

const DAY_MS = 86_400_000;

function dayMatches(meaning: Meaning, year: number, month: number, date: number): boolean {
  if (!meaning.month.has(month)) return false;
  const length = new Date(Date.UTC(year, month, 0)).getUTCDate();
  const weekday = new Date(Date.UTC(year, month - 1, date)).getUTCDay();
  const byDate = meaning.dates.has(date) || (meaning.lastDate && date === length);
  const byWeekday =
    (meaning.weekdays.has(weekday) && (meaning.nth === 0 || Math.ceil(date / 7) === meaning.nth)) ||
    (meaning.lastWeekdays.has(weekday) && date > length - 7);
  if (meaning.datesRestricted && meaning.weekdaysRestricted) return byDate || byWeekday;
  if (meaning.datesRestricted) return byDate;
  if (meaning.weekdaysRestricted) return byWeekday;
  return true;
}

/** Wall-clock match of an instant encoded as UTC fields. */
function wallMatches(meaning: Meaning, wall: number): boolean {
  const at = new Date(wall);
  return (
    meaning.second.has(at.getUTCSeconds()) &&
    meaning.minute.has(at.getUTCMinutes()) &&
    meaning.hour.has(at.getUTCHours()) &&
    dayMatches(meaning, at.getUTCFullYear(), at.getUTCMonth() + 1, at.getUTCDate())
  );
}

const sorted = (values: ReadonlySet<number>) => [...values].sort((a, b) => a - b);

/** First UTC slot strictly after `after`, searching day by day for `years`. */
function referenceNext(meaning: Meaning, after: number, years: number): number | null {
  const times: number[] = [];
  for (const h of sorted(meaning.hour)) for (const m of sorted(meaning.minute)) for (const s of sorted(meaning.second)) times.push((h * 3600 + m * 60 + s) * 1000);
  const firstDay = Math.floor(after / DAY_MS) * DAY_MS;
  for (let day = firstDay; day < firstDay + years * 366 * DAY_MS; day += DAY_MS) {
    const at = new Date(day);
    if (!dayMatches(meaning, at.getUTCFullYear(), at.getUTCMonth() + 1, at.getUTCDate())) continue;
    const time = times.find((t) => day + t > after);
    if (time !== undefined) return day + time;
  }
  return null;
}

// DST: wall clocks read through Intl, once per minute of each transition window.
interface Transition {
  readonly zone: string;
  readonly at: number;
  /** The wall time (as UTC fields) of each minute from `at - 30h`. */
  readonly walls: readonly number[];
}
const WINDOW_MS = 30 * 3_600_000;

function transition(zone: string, at: string): Transition {
  const format = new Intl.DateTimeFormat("en-US", { timeZone: zone, hourCycle: "h23", year: "numeric", month: "numeric", day: "numeric", hour: "numeric", minute: "numeric" });
  const walls: number[] = [];
  const start = Date.parse(at) - WINDOW_MS;
  for (let instant = start; instant <= Date.parse(at) + WINDOW_MS; instant += 60_000) {
    const parts = Object.fromEntries(format.formatToParts(instant).map((part) => [part.type, Number(part.value)]));
    walls.push(Date.UTC(parts.year ?? 0, (parts.month ?? 1) - 1, parts.day, parts.hour, parts.minute));
  }
  return { zone, at: Date.parse(at), walls };
}

const TRANSITIONS: readonly Transition[] = [
  transition("America/Santiago", "2026-04-05T03:00:00Z"), // 24:00 -03 -> 23:00 -04: 23:xx repeats
  transition("America/Santiago", "2026-09-06T04:00:00Z"), // 00:00 -04 -> 01:00 -03: midnight is skipped
  transition("America/New_York", "2026-03-08T07:00:00Z"),
  transition("America/New_York", "2026-11-01T06:00:00Z"),
  transition("Australia/Lord_Howe", "2026-04-05T15:00:00Z"), // a 30-minute fold
  transition("Australia/Lord_Howe", "2026-10-03T15:30:00Z"), // a 30-minute gap
];

/**
 * Slots in [at - 24h, at + 24h) by the README's rules, scanning real minutes:
 * a wildcard hour fires at every real instant whose wall time matches; a
 * fixed hour fires at the first occurrence of a wall time, and a wall time
 * the clock jumps over fires once, shifted forward by the gap.
 */
function referenceDstSlots(meaning: Meaning, t: Transition): number[] {
  const start = t.at - WINDOW_MS;
  const seconds = sorted(meaning.second);
  const slots = new Set<number>();
  const seen = new Set<number>();
  const fire = (instant: number, wallMinute: number) => {
    if (!wallMatches({ ...meaning, second: new Set([0]) }, wallMinute)) return;
    for (const s of seconds) slots.add(instant + s * 1000);
  };
  for (let i = 0; i + 1 < t.walls.length; i++) {
    const instant = start + i * 60_000;
    const wall = t.walls[i] as number;
    if (meaning.sweep || !seen.has(wall)) fire(instant, wall);
    seen.add(wall);
    if (!meaning.sweep) {
      for (let skipped = wall + 60_000; skipped < (t.walls[i + 1] as number); skipped += 60_000) fire(skipped - (wall - instant), skipped);
    }
  }
  return [...slots].filter((slot) => slot >= t.at - DAY_MS && slot < t.at + DAY_MS).sort((a, b) => a - b);
}

// ---------------------------------------------------------------- the generator

interface GenField {
  readonly index: number;
  readonly spec: Field;
}
const G = SPECS.map((spec, index): GenField => ({ index, spec }));

const caseOf = (text: string) => fc.constantFrom(text, text.toUpperCase(), text.charAt(0).toUpperCase() + text.slice(1));

/** A value as it may be written: digits, digits with a leading zero, or its name in any case. */
function render(f: GenField, n: number): fc.Arbitrary<string> {
  const forms = [fc.constant(String(n)), fc.constant(`0${n}`)];
  const name = f.spec.names[n - f.spec.min] ?? (f.index === 5 && n === 7 ? "sun" : undefined);
  if (name !== undefined) forms.push(caseOf(name), caseOf(name));
  return fc.oneof(...forms);
}

function valueText(f: GenField): fc.Arbitrary<string> {
  return fc.integer({ min: f.spec.min, max: f.spec.max }).chain((n) => render(f, n));
}

function goodItem(f: GenField): fc.Arbitrary<string> {
  const v = valueText(f);
  const n = fc.integer({ min: f.spec.min, max: f.spec.max });
  // Ranges run upwards (a backwards one is among the bad items).
  const range = fc.tuple(n, n).chain(([a, b]) => fc.tuple(render(f, Math.min(a, b)), render(f, Math.max(a, b))).map(([x, y]) => `${x}-${y}`));
  const step = fc.integer({ min: 1, max: f.spec.max + 2 }).map(String);
  const forms: fc.Arbitrary<string>[] = [
    v,
    range,
    fc.tuple(range, step).map(([r, s]) => `${r}/${s}`),
    fc.tuple(fc.constantFrom("*", "?"), step).map(([b, s]) => `${b}/${s}`),
    fc.tuple(v, step).map(([a, s]) => `${a}/${s}`),
  ];
  if (f.index === 2) forms.push(fc.tuple(fc.integer({ min: 1, max: 25 }), fc.integer({ min: 0, max: 23 })).map(([s, b]) => `0-${b}/${s}`), fc.constantFrom("0-23", "00-23", "0/6", "0-22/2"));
  if (f.index === 3) forms.push(fc.constantFrom("L", "l"));
  if (f.index === 5) {
    forms.push(fc.tuple(v, fc.constantFrom("L", "l")).map(([d, l]) => `${d}${l}`));
    forms.push(fc.tuple(fc.constantFrom("mon", "tue", "fri", "sat", "sun", "1", "6", "0", "7"), caseOf("sun")).map(([a, b]) => `${a}-${b}`));
  }
  return fc.oneof(...forms);
}

function badItem(f: GenField): fc.Arbitrary<string> {
  const forms: fc.Arbitrary<string>[] = [
    fc.constant(""),
    fc.integer({ min: f.spec.max + 1, max: f.spec.max + 30 }).map(String),
    fc.constantFrom(`${f.spec.min}/0`, "*/0", `${f.spec.min + 1}-`, "-1", "/5", "*/", "1//2", "**", "1.5", "x", "H", "H/5", "1-2-3", "#1", "?x", "*-5", "5-*"),
    fc.tuple(fc.constantFrom("*", "?", "1-5", "2"), fc.constantFrom(...DAYS, ...MONTHS).chain(caseOf)).map(([b, n]) => `${b}/${n}`),
    fc.constantFrom(...(f.spec.names.length > 0 ? ["monday", "sept", "foo"] : ["mon", "jan", "L", "1L", "L1"])),
    fc.constantFrom("LW", "15W", "L-2", "W", "1#2", "L/2", "1-5L", "*L", "L#2"),
  ];
  if (f.spec.max > f.spec.min + 2) forms.push(fc.constant(`${f.spec.max}-${f.spec.min + 1}`));
  if (f.index === 4) forms.push(fc.constantFrom("sun", "mon-fri"));
  if (f.index === 5) forms.push(fc.constantFrom("jan", "L", "fri-mon", "5-1", "1-0", "sat-fri", "*#2", "?#2", "1#0", "1#6", "mon#2/2", "5L/2"));
  return fc.oneof(...forms);
}

function field(f: GenField, badWeight: number): fc.Arbitrary<string> {
  const item = fc.oneof({ weight: 24, arbitrary: goodItem(f) }, { weight: badWeight, arbitrary: badItem(f) });
  const list = fc.array(item, { minLength: 1, maxLength: 3 }).map((items) => items.join(","));
  const forms: fc.WeightedArbitrary<string>[] = [
    { weight: 3, arbitrary: fc.constantFrom("*", "?") },
    { weight: 6, arbitrary: list },
  ];
  if (f.index === 5) {
    const nth = fc.tuple(valueText(f), fc.integer({ min: 1, max: 5 }), fc.constantFrom("", "", "0", "00")).map(([d, n, zeros]) => `${d}#${zeros}${n}`);
    forms.push({ weight: 1, arbitrary: nth });
    forms.push({ weight: badWeight > 0 ? 1 : 0, arbitrary: fc.tuple(nth, goodItem(f)).map(([a, b]) => `${a},${b}`) });
  }
  return fc.oneof(...forms.filter((form) => form.weight > 0));
}

const spaces = fc.constantFrom(" ", "  ", "\t");

function expression(badWeight: number, days: "any" | "every"): fc.Arbitrary<string> {
  // Across DST the second field only multiplies the slots to compare: a few shapes keep the runs quick.
  const seconds = days === "any" ? field(G[0] as GenField, badWeight) : fc.constantFrom("0", "30", "0,30", "15-16", "*/20", "?/30");
  const fields = fc.tuple(
    fc.option(seconds, { freq: 3 }),
    field(G[1] as GenField, badWeight),
    field(G[2] as GenField, badWeight),
    days === "any" ? field(G[3] as GenField, badWeight) : fc.constant("*"),
    days === "any" ? field(G[4] as GenField, badWeight) : fc.constant("*"),
    days === "any" ? field(G[5] as GenField, badWeight) : fc.constantFrom("*", "?", "0-6", "mon-sun", "1,3,5,7"),
    fc.array(spaces, { minLength: 6, maxLength: 6 }),
  );
  const written = fields.map(([s, ...rest]) => {
    const parts = (s === null ? rest.slice(0, 5) : [s, ...rest.slice(0, 5)]) as string[];
    const gaps = rest[5] as string[];
    return parts.map((part, i) => (i === 0 ? part : `${gaps[i] ?? " "}${part}`)).join("");
  });
  if (badWeight === 0) return written;
  const aliases = fc.constantFrom(...Object.keys(ALIASES), "@reboot", "@every 5m", "@daily 5", "@").chain(caseOf);
  const counts = fc.constantFrom("* * * *", "* * * * * * *", "", " ");
  return fc.oneof({ weight: 20, arbitrary: written }, { weight: 1, arbitrary: aliases }, { weight: 1, arbitrary: counts });
}

// ---------------------------------------------------------------- the checks

type Verdict = { refused: string } | { meaning: Meaning };

function reference(source: string): Verdict {
  try {
    return { meaning: readReference(source) };
  } catch (error) {
    if (error instanceof Refused) return { refused: error.message };
    throw error;
  }
}

function refusedAsInvalidCron(source: string): string | null {
  try {
    parseCron(source);
    return null;
  } catch (error) {
    return error instanceof InvalidCronError && error.code === "invalid_cron" ? error.message : `threw ${String(error)}`;
  }
}

const STARTS = [Date.parse("2026-01-01T00:00:00Z"), Date.parse("2027-02-27T13:17:29Z"), Date.parse("2028-02-28T23:59:59Z")];
const SLOTS_COMPARED = 5;
const YEARS = 30;
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

function checkUtc(source: string, meaning: Meaning): void {
  const calendar = slotCalendar(source);
  for (const start of STARTS) {
    let after = start;
    for (let i = 0; i < SLOTS_COMPARED; i++) {
      const expected = referenceNext(meaning, after, YEARS);
      const actual = calendar.nextMs(after);
      if (expected === null) {
        // Nothing in 30 years: cronledger may still find a rarer slot (Feb with five Mondays) or none.
        if (actual !== null && actual < after + YEARS * 365 * DAY_MS) expect.fail(`${source}: fires at ${iso(actual)}, the reference not within ${YEARS} years`);
        break;
      }
      if (actual !== expected) expect.fail(`${JSON.stringify(source)} after ${iso(after)}: cronledger ${iso(actual)}, reference ${iso(expected)}`);
      // latest() is the mirror: the slot is its own latest, and the one before it precedes it.
      if (calendar.latestMs(expected) !== expected) expect.fail(`${source}: latest(${iso(expected)}) is ${iso(calendar.latestMs(expected))}`);
      after = expected;
    }
  }
}

function checkDst(source: string, meaning: Meaning, t: Transition): void {
  const calendar = slotCalendar(source, { timezone: t.zone });
  const actual: number[] = [];
  for (let slot = calendar.nextMs(t.at - DAY_MS - 1); slot !== null && slot < t.at + DAY_MS; slot = calendar.nextMs(slot)) {
    actual.push(slot);
    if (actual.length > 200_000) break;
  }
  const expected = referenceDstSlots(meaning, t);
  if (actual.length !== expected.length || actual.some((slot, i) => slot !== expected[i])) {
    const differ = [...new Set([...actual, ...expected])].filter((slot) => actual.includes(slot) !== expected.includes(slot)).slice(0, 6);
    expect.fail(
      `${JSON.stringify(source)} in ${t.zone} around ${iso(t.at)} (${meaning.sweep ? "wildcard" : "fixed"} hour): ${actual.length} slots, reference ${expected.length}; ` +
        `only in ${differ.map((slot) => `${iso(slot)} (${actual.includes(slot) ? "cronledger" : "reference"})`).join(", ")}`,
    );
  }
}

function check(source: string, withDst: boolean): "refused" | "fires" {
  const verdict = reference(source);
  const refusal = refusedAsInvalidCron(source);
  if ("refused" in verdict) {
    if (refusal === null) expect.fail(`${JSON.stringify(source)} is accepted, but the grammar refuses it (${verdict.refused})`);
    if (refusal.startsWith("threw")) expect.fail(`${JSON.stringify(source)} ${refusal}, not InvalidCronError`);
    return "refused";
  }
  if (refusal !== null) expect.fail(`${JSON.stringify(source)} is refused (${refusal}), but the grammar accepts it`);
  checkUtc(source, verdict.meaning);
  if (withDst) for (const t of TRANSITIONS) checkDst(source, verdict.meaning, t);
  return "fires";
}

describe("generated cron expressions against a reference written from the README's grammar", () => {
  it("refuses what the grammar refuses, as invalid_cron, and fires in UTC where the reference fires", { timeout: Math.max(60_000, RUNS * 40) }, () => {
    const seen = { refused: 0, fires: 0 };
    fc.assert(
      fc.property(expression(1, "any"), (source) => {
        seen[check(source, false)] += 1;
      }),
      { seed: SEED, numRuns: RUNS },
    );
    // The generator must exercise both branches, or the property proves little.
    expect(seen.refused, "refused cases").toBeGreaterThan(RUNS / 10);
    expect(seen.fires, "accepted cases").toBeGreaterThan(RUNS / 10);
  });

  it("reads time-of-day fields across DST transitions as the reference does (wildcard hours written, fixed hours listed)", { timeout: Math.max(60_000, RUNS * 40) }, () => {
    fc.assert(
      fc.property(expression(0, "every"), (source) => {
        check(source, true);
      }),
      { seed: SEED, numRuns: Math.ceil(RUNS / 3) },
    );
  });

  it("refuses the misreadings found by fuzzing, with a message saying what to write", () => {
    const cases: [string, RegExp][] = [
      ["0 0 * * */tue", /day-of-week field "\*\/tue" has a name after "\/".*is a number/],
      ["0 0 * 1-5/jan *", /month field "1-5\/jan" has a name after "\/"/],
      ["0 0 * * *#2", /day-of-week field "\*#2" counts "\*" with #/],
      ["0 0 * * ?#2", /day-of-week field "\?#2" counts "\?" with #/],
      ["0 0 * * fri-mon", /runs backwards; ranges run upwards and do not wrap, so write 5-7,0-1/],
      ["0 0 * * 1-0", /so write 1-7 \(7 is Sunday too\)/],
      ["0 0 L-2 * *", /L-n .* not support/],
      ["0 0 15W * *", /W \(nearest weekday\)/],
      ["0 0 * * L", /L alone, which names no weekday/],
      ["0 0 * * monday", /"monday", which is not a name it knows; this field's names are sun mon tue wed thu fri sat/],
    ];
    for (const [source, message] of cases) {
      expect(refusedAsInvalidCron(source), source).toMatch(message);
      expect("refused" in reference(source), `the reference refuses ${source}`).toBe(true);
    }
  });
});

import { CronExpressionParser } from "cron-parser";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InvalidCronError } from "../src/errors.js";
import { parseCron } from "../src/schedule/cron.js";
import { slotCalendar } from "../src/schedule/slot-calendar.js";

/**
 * Property tests over generated cron expressions, with cron-parser as the
 * oracle: what it refuses is `invalid_cron`, and what it accepts fires at the
 * same instants. Lists that repeat a value are the one deliberate difference
 * (cron-parser refuses them, classic cron takes the union, docs/decisions.md):
 * for those the test computes the union itself and asks cron-parser about that.
 * Seeded, so a failure replays; fast-check prints the shrunk counterexample.
 */
const SEED = 20_261_202;
const RUNS = Number(process.env.CRON_PROPERTY_RUNS ?? 400);

interface FieldSpec {
  readonly min: number;
  readonly max: number;
  readonly names?: readonly string[];
}

const SECOND: FieldSpec = { min: 0, max: 59 };
const MINUTE: FieldSpec = { min: 0, max: 59 };
const HOUR: FieldSpec = { min: 0, max: 23 };
const DAY_OF_MONTH: FieldSpec = { min: 1, max: 31 };
const MONTH: FieldSpec = { min: 1, max: 12, names: ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"] };
const DAY_OF_WEEK: FieldSpec = { min: 0, max: 7, names: ["sun", "mon", "tue", "wed", "thu", "fri", "sat"] };

/** One list item as written, and the values it stands for (null: a form the test does not expand, such as L, d#n or a malformed item). */
interface Atom {
  readonly text: string;
  readonly values: readonly number[] | null;
}

const range = (from: number, to: number, step = 1): number[] => {
  const values: number[] = [];
  for (let value = from; value <= to; value += step) values.push(value);
  return values;
};

function validAtom(spec: FieldSpec): fc.Arbitrary<Atom> {
  const value = fc.integer({ min: spec.min, max: spec.max });
  const ordered = fc.tuple(value, value).map(([a, b]): [number, number] => (a <= b ? [a, b] : [b, a]));
  const step = fc.integer({ min: 1, max: Math.max(2, Math.floor((spec.max - spec.min) / 2)) });
  const forms: fc.Arbitrary<Atom>[] = [
    value.map((n) => ({ text: String(n), values: [n] })),
    ordered.map(([a, b]) => ({ text: `${a}-${b}`, values: range(a, b) })),
    fc.tuple(ordered, step).map(([[a, b], s]) => ({ text: `${a}-${b}/${s}`, values: range(a, b, s) })),
    step.map((s) => ({ text: `*/${s}`, values: range(spec.min, spec.max, s) })),
    fc.tuple(value, step).map(([a, s]) => ({ text: `${a}/${s}`, values: range(a, spec.max, s) })),
  ];
  const names = spec.names;
  if (names) forms.push(fc.integer({ min: 0, max: names.length - 1 }).map((i) => ({ text: names[i] as string, values: [spec.min + i] })));
  return fc.oneof(...forms);
}

/** Items that cron-parser and classic cron refuse, or forms the test leaves to cron-parser whole. */
function oddAtom(spec: FieldSpec, field: "other" | "dayOfMonth" | "dayOfWeek"): fc.Arbitrary<Atom> {
  const forms: fc.Arbitrary<Atom>[] = [
    fc.constant({ text: "", values: null }),
    fc.integer({ min: spec.max + 1, max: spec.max + 40 }).map((n) => ({ text: String(n), values: null })),
    fc.constant({ text: `${spec.min}/0`, values: null }),
    fc.constant({ text: `${spec.min + 1}-`, values: null }),
    fc.constant({ text: `${spec.max}-${spec.min}`, values: null }),
    fc.constantFrom("x", "?x", "**", "1.5", "-").map((text) => ({ text, values: null })),
  ];
  if (field === "dayOfMonth") forms.push(fc.constant({ text: "L", values: null }));
  if (field === "dayOfWeek") {
    forms.push(fc.integer({ min: 0, max: 7 }).map((d) => ({ text: `${d}L`, values: null })));
    forms.push(fc.tuple(fc.integer({ min: 0, max: 7 }), fc.integer({ min: 1, max: 5 })).map(([d, n]) => ({ text: `${d}#${n}`, values: null })));
  }
  return fc.oneof(...forms);
}

/** A field: `*`, or a list of items, mostly valid, sometimes with an odd one, often with a repeat. */
function field(spec: FieldSpec, kind: "other" | "dayOfMonth" | "dayOfWeek"): fc.Arbitrary<readonly Atom[]> {
  const atom = fc.oneof({ weight: 6, arbitrary: validAtom(spec) }, { weight: 1, arbitrary: oddAtom(spec, kind) });
  // A field written as nothing would merge with its neighbours' spaces: field counts are tested elsewhere.
  const list = fc.array(atom, { minLength: 1, maxLength: 4 }).filter((atoms) => atoms.some((item) => item.text !== ""));
  const withRepeat = fc.tuple(list, fc.nat()).map(([atoms, pick]) => [...atoms, atoms[pick % atoms.length] as Atom]);
  return fc.oneof(
    { weight: 2, arbitrary: fc.constant([{ text: "*", values: range(spec.min, spec.max) }]) },
    { weight: 4, arbitrary: list },
    { weight: 2, arbitrary: withRepeat },
  );
}

const expression = fc.record({
  seconds: fc.option(field(SECOND, "other"), { freq: 4 }),
  minute: field(MINUTE, "other"),
  hour: field(HOUR, "other"),
  dayOfMonth: field(DAY_OF_MONTH, "dayOfMonth"),
  month: field(MONTH, "other"),
  dayOfWeek: field(DAY_OF_WEEK, "dayOfWeek"),
});

type Generated = typeof expression extends fc.Arbitrary<infer T> ? T : never;

function fieldsOf(generated: Generated): { atoms: readonly Atom[]; dayOfWeek: boolean }[] {
  return [
    ...(generated.seconds === null ? [] : [{ atoms: generated.seconds, dayOfWeek: false }]),
    { atoms: generated.minute, dayOfWeek: false },
    { atoms: generated.hour, dayOfWeek: false },
    { atoms: generated.dayOfMonth, dayOfWeek: false },
    { atoms: generated.month, dayOfWeek: false },
    { atoms: generated.dayOfWeek, dayOfWeek: true },
  ];
}

const written = (generated: Generated): string => fieldsOf(generated).map(({ atoms }) => atoms.map((atom) => atom.text).join(",")).join(" ");

/** What the test asks cron-parser about: a list that repeats a value (every item expandable) becomes the test's own union. */
function oracleExpression(generated: Generated): string {
  return fieldsOf(generated)
    .map(({ atoms, dayOfWeek }) => {
      const text = atoms.map((atom) => atom.text).join(",");
      if (atoms.length < 2) return text;
      const lastForms = atoms.filter((atom) => atom.values === null);
      // Beside L and dL (kept as written, a repeat dropped), only a malformed item stops the union.
      if (lastForms.some((atom) => !/^[0-7]?L$/.test(atom.text))) return text;
      const all = atoms.flatMap((atom) => (atom.values ?? []).map((value) => (dayOfWeek && value === 7 ? 0 : value)));
      const union = [...new Set(all)].sort((a, b) => a - b);
      const lasts = [...new Set(lastForms.map((atom) => atom.text))];
      if (union.length === all.length && lasts.length === lastForms.length) return text;
      return [...union, ...lasts].join(",");
    })
    .join(" ");
}

type Verdict = { kind: "fires"; slots: number[] } | { kind: "never" } | { kind: "refused"; reason: string };

const STARTS = [Date.parse("2026-01-01T00:00:00Z"), Date.parse("2027-02-27T13:17:29Z")];
const SLOTS_COMPARED = 6;

function cronParserVerdict(source: string): Verdict {
  const slots: number[] = [];
  try {
    for (const start of STARTS) {
      const iterator = CronExpressionParser.parse(source, { tz: "UTC", currentDate: new Date(start) });
      for (let i = 0; i < SLOTS_COMPARED; i++) slots.push(iterator.next().getTime());
    }
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    // cron-parser refuses a day of month no chosen month has; cronledger keeps such an entry as never firing.
    if (reason === "Invalid explicit day of month definition") return { kind: "never" };
    return { kind: "refused", reason };
  }
  return { kind: "fires", slots };
}

function cronledgerSlots(source: string): number[] {
  const calendar = slotCalendar(parseCron(source), { timezone: "UTC" });
  const slots: number[] = [];
  for (const start of STARTS) {
    let after = start;
    for (let i = 0; i < SLOTS_COMPARED; i++) {
      const next = calendar.nextMs(after);
      if (next === null) throw new Error(`no slot after ${new Date(after).toISOString()}`);
      slots.push(next);
      after = next;
    }
  }
  return slots;
}

function refusedAsInvalidCron(source: string): boolean {
  try {
    parseCron(source);
    return false;
  } catch (error) {
    return error instanceof InvalidCronError && error.code === "invalid_cron";
  }
}

describe("generated cron expressions (property test, cron-parser as the oracle)", () => {
  it("refuses what cron-parser refuses, as invalid_cron, and fires where cron-parser fires", () => {
    const seen = { fires: 0, never: 0, refused: 0, repeats: 0 };
    fc.assert(
      fc.property(expression, (generated) => {
        const source = written(generated);
        const oracle = oracleExpression(generated);
        if (oracle !== source) seen.repeats += 1;
        const verdict = cronParserVerdict(oracle);
        seen[verdict.kind] += 1;
        if (verdict.kind === "refused") {
          expect(refusedAsInvalidCron(source), `${JSON.stringify(source)}: cron-parser says ${verdict.reason}`).toBe(true);
        } else if (verdict.kind === "never") {
          expect(parseCron(source).neverMatches, source).toBe(true);
        } else {
          expect(cronledgerSlots(source).map((ms) => new Date(ms).toISOString()), `${source} (oracle: ${oracle})`).toEqual(
            verdict.slots.map((ms) => new Date(ms).toISOString()),
          );
        }
      }),
      { seed: SEED, numRuns: RUNS },
    );
    // The generator must exercise each branch, or the property proves little (day-of-month misses are rare: see the next test).
    for (const kind of ["fires", "refused", "repeats"] as const) expect(seen[kind], `${kind} cases generated`).toBeGreaterThan(RUNS / 10);
  });

  it("refuses malformed lists: empty items and d#n inside a weekday list", () => {
    const emptyItem = fc
      .tuple(fc.integer({ min: 0, max: 4 }), fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 3 }), fc.constantFrom("leading", "trailing", "double"))
      .map(([index, values, where]) => {
        const items = values.map(String);
        const list = where === "leading" ? `,${items.join(",")}` : where === "trailing" ? `${items.join(",")},` : [items[0], "", ...items.slice(1)].join(",");
        return ["0", "0", "1", "1", "1"].map((token, at) => (at === index ? list : token)).join(" ");
      });
    const nthInList = fc
      .tuple(fc.integer({ min: 0, max: 7 }), fc.integer({ min: 1, max: 5 }), fc.array(fc.oneof(fc.integer({ min: 0, max: 7 }).map(String), fc.constant("2#4")), { minLength: 1, maxLength: 3 }), fc.boolean())
      .map(([day, nth, others, first]) => {
        const items = first ? [`${day}#${nth}`, ...others] : [...others, `${day}#${nth}`];
        return `0 12 * * ${items.join(",")}`;
      });
    fc.assert(
      fc.property(fc.oneof(emptyItem, nthInList), (source) => {
        expect(cronParserVerdict(source).kind, `cron-parser on ${source}`).toBe("refused");
        expect(refusedAsInvalidCron(source), source).toBe(true);
      }),
      { seed: SEED, numRuns: 200 },
    );
  });

  it("refuses the examples from the issue that used to fire at minute 0, hourly, daily or every Monday", () => {
    for (const source of ["1,,3 * * * *", "1,3, * * * *", ",1 * * * *", "0 1,,3 * * *", "0 9 * * 1,,5", "0 12 * * 1#2,3", "0 12 * * 1#2,1#4"]) {
      expect(() => parseCron(source), source).toThrow(InvalidCronError);
    }
    expect(() => parseCron("0 9 * * 1,,5")).toThrow(/day-of-week field "1,,5" has an empty list item/);
    expect(() => parseCron("0 12 * * 1#2,3")).toThrow(/d#n .* must stand alone/);
  });

  it("keeps the union of a list that repeats a value, and d#n alone", () => {
    expect(parseCron("0 0 * * 0,7").canonical).toBe("0 0 * * 0");
    expect(parseCron("0 0 * * 1-5,3").canonical).toBe("0 0 * * 1-5");
    expect(parseCron("0 12 * * 1#2").canonical).toBe("0 12 * * 1#2");
    expect(slotCalendar("0 12 * * 1#2").next(new Date("2026-03-01T00:00:00Z"))?.toISOString()).toBe("2026-03-09T12:00:00.000Z");
  });
});

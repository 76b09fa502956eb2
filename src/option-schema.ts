import { z } from "zod";
import { parseDuration } from "./duration.js";
import { ConfigError } from "./errors.js";
import { OVERLAP_POLICIES } from "./schema.js";
import { describeShapeIssues } from "./suggest.js";

/**
 * The building blocks every option schema is made of, wherever its group
 * lives (the database setting in src/db/settings.ts, work() in
 * src/jobs/work-options.ts, start() and the chores in src/runtime/, the
 * whole createCronledger options and config file in src/options.ts), and the
 * one way they report a bad value: a ConfigError listing every problem,
 * unknown keys with a did-you-mean.
 */

/** A duration as written ("30s", "2m") or milliseconds, not yet resolved: its shape only (a schedule entry resolves it with its own messages). */
export const durationInput = () => z.union([z.number(), z.string()], { error: 'must be a duration such as "30s" or a number of milliseconds' });

/** A duration ("30s", "2m") or milliseconds, resolved to milliseconds; `what` names it in the message. */
export const duration = (what: string) =>
  durationInput().transform((value, context) => {
    try {
      return parseDuration(value, what);
    } catch (error) {
      // `continue`: the issue is the value's, not its type's, so a union around it (the database setting) reports it instead of
      // its own catch-all message. Without its final period: the issues are joined into one sentence.
      const message = (error instanceof Error ? error.message : String(error)).replace(/\.$/, "");
      context.addIssue({ code: "custom", message, continue: true });
      return z.NEVER;
    }
  });

/** An overlap policy (src/schema.ts); `label` starts the message (the entry's `overlap` field names itself). */
export const overlapPolicy = (label = "") =>
  z.enum(OVERLAP_POLICIES, { error: `${label}must be one of ${OVERLAP_POLICIES.map((policy) => `"${policy}"`).join(", ")}` });

export const positiveInteger = () =>
  z.number({ error: "must be a positive integer" }).int("must be a positive integer").min(1, "must be a positive integer");

export const fn = <T>() => z.custom<T>((value) => typeof value === "function", { error: "must be a function" });

/** An object the schema cannot look inside (a logger, a Registry, an open Database): `check` tells it apart. */
export const object = <T>(what: string, check: (value: object) => boolean) =>
  z.custom<T>((value) => typeof value === "object" && value !== null && check(value), { error: what });

/**
 * The schemas of an options interface's keys. The public option types are
 * interfaces, because a doc comment on a schema's property does not survive
 * into the emitted .d.ts (docs/decisions.md, "Option types"); a shape written
 * `satisfies OptionShape<T>` cannot have a key the interface lacks, or lack
 * one it has, and `Takes<T, typeof shape>` (asserted where the shape is
 * declared) that every value the interface allows is one the schema takes.
 */
export type OptionShape<T> = { readonly [K in keyof Required<T>]: z.ZodType };

/** `true` when each key's schema takes every value the interface allows for it; else the keys whose schema does not. */
export type Takes<T, S extends OptionShape<T>> = [{ [K in keyof T]-?: [Exclude<T[K], undefined>] extends [z.input<S[K]>] ? never : K }[keyof T]] extends [never]
  ? true
  : { [K in keyof T]-?: [Exclude<T[K], undefined>] extends [z.input<S[K]>] ? never : K }[keyof T];

/** Fails to compile unless `T` is `true`: `type _Checked = Check<Takes<WorkOptions, typeof shape>>`. */
export type Check<T extends true> = T;

/** Parses `value` with `schema`, or throws one ConfigError listing every problem, unknown keys with a did-you-mean. */
export function parseOptions<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const result = schema.safeParse(value ?? {});
  if (result.success) return result.data;
  throw new ConfigError(`Invalid ${what}: ${describeShapeIssues(result.error, schema, { noun: "option" })}.`);
}

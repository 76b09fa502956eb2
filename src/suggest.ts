import type { z } from "zod";

/** The closest candidate within a typo's distance, for "did you mean ...?" hints; undefined when none is close. */
export function closest(input: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(input.length / 3)) + 1;
  for (const candidate of candidates) {
    const distance =
      input.length >= 3 && candidate.toLowerCase().startsWith(input.toLowerCase()) ? 1 : editDistance(input.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/** The keys an object schema takes at `path` (through optional, default, pipe, preprocess and union wrappers); empty when it is not an object there. */
function keysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let current: unknown = schema;
  const unwrap = (value: unknown): unknown => {
    for (let depth = 0; depth < 8; depth += 1) {
      const def = (value as { def?: { type?: string; innerType?: unknown; in?: unknown; out?: unknown; options?: unknown[] } } | undefined)?.def;
      if (def?.innerType !== undefined) value = def.innerType;
      // A schema that resolves what it parsed (`.transform()`) takes the keys of its input; one that rewrites its input
      // first (`z.preprocess`), the keys of the schema after the rewrite.
      else if (def?.type === "pipe") value = (def.in as { def?: { type?: string } } | undefined)?.def?.type === "transform" ? def.out : def.in;
      else if (def?.type === "union") value = def.options?.find((option) => (option as { shape?: unknown }).shape !== undefined) ?? value;
      else break;
      if ((value as { shape?: unknown }).shape !== undefined) break;
    }
    return value;
  };
  for (const key of path) current = (unwrap(current) as { shape?: Record<string, unknown> }).shape?.[String(key)];
  const shape = (unwrap(current) as { shape?: Record<string, unknown> } | undefined)?.shape;
  return shape === undefined ? [] : Object.keys(shape);
}

/**
 * Zod issues of an object schema as "path: problem", joined by "; ". An
 * unknown key gets a did-you-mean among the keys the schema takes there, or,
 * when none is close and `list` is given, the list of them (`entries take
 * job, cron, ...`). Schedule entries, options and config files all report
 * through it.
 */
export function describeShapeIssues(error: z.ZodError, schema: z.ZodType, options: { readonly noun: "field" | "option" | "setting"; readonly list?: string }): string {
  return error.issues
    .map((issue) => {
      const path = issue.path.map(String).join(".");
      if (issue.code === "unrecognized_keys") {
        const known = keysAt(schema, issue.path);
        return issue.keys
          .map((key) => {
            const hint = closest(key, known);
            const help = hint ? ` (did you mean "${hint}"?)` : options.list !== undefined ? ` (${options.list} ${known.join(", ")})` : "";
            return `unknown ${options.noun} "${path === "" ? key : `${path}.${key}`}"${help}`;
          })
          .join("; ");
      }
      return path === "" ? issue.message : `${path}: ${issue.message}`;
    })
    .join("; ");
}

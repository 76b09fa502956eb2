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

/**
 * Zod issues of an object's shape as "field: problem", joined by "; ": an
 * unknown field gets a did-you-mean among `fields`, or, when none is close,
 * the list of them (`entries take job, cron, ...`).
 */
export function describeShapeIssues(error: z.ZodError, fields: readonly string[], owner: string): string {
  return error.issues
    .map((issue) => {
      if (issue.code === "unrecognized_keys") {
        return issue.keys
          .map((key) => {
            const hint = closest(key, fields);
            return `unknown field "${key}" (${hint ? `did you mean "${hint}"?` : `${owner} ${fields.join(", ")}`})`;
          })
          .join("; ");
      }
      return issue.path.length === 0 ? issue.message : `${issue.path.join(".")}: ${issue.message}`;
    })
    .join("; ");
}

import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * Each domain word has one home below the layers that use it: the overlap policies and an upsert's
 * outcomes beside the job statuses in src/schema.ts, the duration and overlap schemas in
 * src/option-schema.ts. A second declaration (a copied enum, a schema written again in a layer) fails here.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

function sources(folder: string): string[] {
  return readdirSync(folder).flatMap((name) => {
    const path = join(folder, name);
    return statSync(path).isDirectory() ? sources(path) : path.endsWith(".ts") ? [path] : [];
  });
}

const files = sources(join(root, "src")).map((path) => ({ path: relative(root, path), text: readFileSync(path, "utf8") }));
const declaring = (pattern: RegExp) => files.filter((file) => pattern.test(file.text)).map((file) => file.path);

describe("one home per domain word", () => {
  it("declares the overlap policies, the job statuses and an upsert's outcomes once, in src/schema.ts", () => {
    expect(declaring(/"allow_all",\s*"skip",\s*"buffer_one"/)).toEqual(["src/schema.ts"]);
    expect(declaring(/"created"\s*\|\s*"updated"|"created",\s*"updated",\s*"retimed"/)).toEqual(["src/schema.ts"]);
    expect(declaring(/export (const|type) (OVERLAP_POLICIES|OverlapPolicy|UPSERT_OUTCOMES|UpsertOutcome|JOB_STATUSES|JobStatus)\b/)).toEqual(["src/schema.ts"]);
  });

  it("builds the overlap enum and the duration schema once, in src/option-schema.ts", () => {
    expect(declaring(/z\.enum\(OVERLAP_POLICIES/)).toEqual(["src/option-schema.ts"]);
    expect(declaring(/z\.union\(\[z\.number\(\), z\.string\(\)\]/)).toEqual(["src/option-schema.ts"]);
  });

  it("takes no domain word from the SQL layer above it", () => {
    const above = files.filter((file) => !file.path.startsWith("src/db/"));
    const reaching = above.filter((file) => /import[^;]*\b(OverlapPolicy|OVERLAP_POLICIES|UpsertOutcome)\b[^;]*from "[./]*db\/sql\//.test(file.text)).map((file) => file.path);
    expect(reaching).toEqual([]);
  });
});

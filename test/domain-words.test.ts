import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * Each domain word has one home below the layers that use it: the overlap policies and an upsert's
 * outcomes beside the job statuses in src/schema.ts, the duration and overlap schemas in
 * src/option-schema.ts. A second declaration (a copied enum, a schema written again in a layer) fails here,
 * and so does a domain word a SQL file exports that a layer above imports.
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

/** The domain words a file exports: unions of string literals, and const lists of string literals. */
function domainWordsOf(text: string): string[] {
  const unions = [...text.matchAll(/export type (\w+) =\s*\|?\s*"[^"]*"(?:\s*\|\s*"[^"]*")*\s*;/g)].map((match) => match[1] as string);
  const lists = [...text.matchAll(/export const (\w+)(?::[^=]+)? = \[\s*"[^\]]*\](?: as const)/g)].map((match) => match[1] as string);
  return [...unions, ...lists];
}

/** Each union of two or more string literals and each const list of them a file declares, with its words sorted. */
function wordSetsOf(text: string): { name: string; words: string }[] {
  return [...text.matchAll(/type (\w+) =\s*\|?\s*((?:"[^"]*"\s*\|\s*)+"[^"]*")\s*;|const (\w+)(?::[^=]+)? = \[\s*((?:"[^"]*",?\s*){2,})\] as const/g)].map((match) => ({
    name: (match[1] ?? match[3]) as string,
    words: [...((match[2] ?? match[4]) as string).matchAll(/"([^"]*)"/g)]
      .map((word) => word[1] as string)
      .sort()
      .join(","),
  }));
}

/** The names a file imports from a module of src/db/sql/. */
function importedFromSql(text: string): string[] {
  return [...text.matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+"[./]*(?:db\/)?sql\/[^"]+"/g)].flatMap((match) =>
    (match[1] as string)
      .split(",")
      .map((name) => name.trim().replace(/^type\s+/, "").split(/\s+as\s+/)[0] as string)
      .filter((name) => name !== ""),
  );
}

describe("one home per domain word", () => {
  it("declares the overlap policies, the job statuses and an upsert's outcomes once, in src/schema.ts", () => {
    expect(declaring(/"allow_all",\s*"skip",\s*"buffer_one"/)).toEqual(["src/schema.ts"]);
    expect(declaring(/"created"\s*\|\s*"updated"|"created",\s*"updated",\s*"retimed"/)).toEqual(["src/schema.ts"]);
    expect(declaring(/export (const|type) (OVERLAP_POLICIES|OverlapPolicy|UPSERT_OUTCOMES|UpsertOutcome|JOB_STATUSES|JobStatus)\b/)).toEqual(["src/schema.ts"]);
  });

  it("declares each set of words once: no union of string literals or const list of them spells the same words as another", () => {
    const declarations = new Map<string, string[]>();
    for (const file of files) {
      for (const { name, words } of wordSetsOf(file.text)) declarations.set(words, [...(declarations.get(words) ?? []), `${file.path}: ${name}`]);
    }
    expect([...declarations.values()].filter((places) => places.length > 1)).toEqual([]);
  });

  it("finds a set of words declared twice where one is planted", () => {
    expect(wordSetsOf('export type Fate = "amended" | "superseded";\nconst FATES = ["superseded", "amended"] as const;')).toEqual([
      { name: "Fate", words: "amended,superseded" },
      { name: "FATES", words: "amended,superseded" },
    ]);
  });

  it("builds the overlap enum and the duration schema once, in src/option-schema.ts", () => {
    expect(declaring(/z\.enum\(OVERLAP_POLICIES/)).toEqual(["src/option-schema.ts"]);
    expect(declaring(/z\.union\(\[z\.number\(\), z\.string\(\)\]/)).toEqual(["src/option-schema.ts"]);
  });

  it("takes no domain word (a union of string literals, a const list of them) from any SQL file above the SQL layer", () => {
    const words = new Set(files.filter((file) => file.path.startsWith("src/db/sql/")).flatMap((file) => domainWordsOf(file.text)));
    const reaching = files
      .filter((file) => !file.path.startsWith("src/db/"))
      .flatMap((file) => importedFromSql(file.text).filter((name) => words.has(name)).map((name) => `${file.path}: ${name}`));
    expect(reaching).toEqual([]);
  });

  it("finds a domain word and its import where one is planted", () => {
    expect(domainWordsOf('export type Mode =\n  | "a"\n  | "b";\nexport const MODES = ["a", "b"] as const;\nexport interface Row { a: string }')).toEqual(["Mode", "MODES"]);
    expect(importedFromSql('import { runPass, type Mode as M } from "../db/sql/ledger.js";\nimport type { X } from "./y.js";')).toEqual(["runPass", "Mode"]);
  });

  it("takes no domain word from the SQL layer above it", () => {
    const above = files.filter((file) => !file.path.startsWith("src/db/"));
    const reaching = above.filter((file) => /import[^;]*\b(OverlapPolicy|OVERLAP_POLICIES|UpsertOutcome)\b[^;]*from "[./]*db\/sql\//.test(file.text)).map((file) => file.path);
    expect(reaching).toEqual([]);
  });
});

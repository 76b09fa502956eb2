import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * docs/decisions.md and docs/operations.md open with an index by question,
 * and docs/benchmarks.md with its current figures by question. A section
 * renamed or added without its line in the index fails here, so the index
 * stays the way in.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
function anchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\- _]/gu, "")
    .replace(/ /g, "-");
}

function read(document: string): { headings: string[]; anchors: Set<string>; index: string } {
  const text = readFileSync(join(root, document), "utf8");
  const headings = text.split("\n").filter((line) => /^#{2,3} /.test(line)).map((line) => line.replace(/^#+ /, ""));
  const start = text.search(/^## (Index by question|Current figures, by question)$/m);
  const rest = text.slice(start + 3);
  const next = rest.search(/^## /m);
  return { headings, anchors: new Set(headings.map(anchor)), index: next === -1 ? rest : rest.slice(0, next) };
}

function linkedAnchors(index: string): string[] {
  return [...index.matchAll(/\]\(#([^)]+)\)/g)].map((match) => match[1] ?? "");
}

describe("the docs' indexes by question", () => {
  for (const document of ["docs/decisions.md", "docs/operations.md", "docs/benchmarks.md"]) {
    it(`${document}: every link of its index reaches a section`, () => {
      const { anchors, index } = read(document);
      const links = linkedAnchors(index);
      expect(links.length).toBeGreaterThan(5);
      expect(links.filter((link) => !anchors.has(link))).toEqual([]);
    });
  }

  for (const document of ["docs/decisions.md", "docs/operations.md"]) {
    it(`${document}: every section is in its index`, () => {
      const text = readFileSync(join(root, document), "utf8");
      const sections = text.split("\n").filter((line) => line.startsWith("## ") && line !== "## Index by question").map((line) => anchor(line.slice(3)));
      const linked = new Set(linkedAnchors(read(document).index));
      expect(sections.filter((section) => !linked.has(section))).toEqual([]);
    });
  }

  it("computes GitHub's anchors", () => {
    expect(anchor("Startup refused: `migration_required`")).toBe("startup-refused-migration_required");
    expect(anchor("Traces (OpenTelemetry)")).toBe("traces-opentelemetry");
    expect(anchor("The code's layout")).toBe("the-codes-layout");
  });
});

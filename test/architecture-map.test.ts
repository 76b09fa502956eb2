import { readdirSync, readFileSync } from "node:fs";
import { basename, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// docs/architecture.md is the map a newcomer reads first; a file it does not name is a file nobody finds.
const ROOT = fileURLToPath(new URL("..", import.meta.url));

function sourceFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") ? [relative(join(ROOT, "src"), path)] : [];
  });
}

/** The first lines' words, comment markers and line breaks removed. */
function headerText(lines: readonly string[]): string {
  return lines.slice(0, 15).map((line) => line.replace(/^\s*(\/\/|\/\*\*|\*)\s?/, "")).join(" ");
}

describe("docs/architecture.md", () => {
  it("names every file of src/", () => {
    const map = readFileSync(join(ROOT, "docs", "architecture.md"), "utf8");
    const unnamed = sourceFiles(join(ROOT, "src")).filter((file) => !map.includes(file) && !map.includes(`\`${basename(file)}\``));
    expect(unnamed).toEqual([]);
  });

  it("has no file over 350 lines whose header does not say why it is long", () => {
    const unexplained = sourceFiles(join(ROOT, "src")).filter((file) => {
      const lines = readFileSync(join(ROOT, "src", file), "utf8").split("\n");
      return lines.length > 350 && !/longer than most|\b\d{3} lines\b|over 350 lines/i.test(headerText(lines));
    });
    expect(unexplained).toEqual([]);
  });
});

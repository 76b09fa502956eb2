import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type * as TS from "typescript";

export interface SourceLocation {
  readonly file: string;
  /** 1-based. */
  readonly line: number;
  /** 1-based. */
  readonly column: number;
}

/** Beyond this many files the schedule is not written out as a literal near the config. */
const MAX_FILES = 100;
const SOURCE_EXTENSIONS = [".ts", ".mts", ".cts", ".tsx", ".js", ".mjs", ".cjs"];

/**
 * TypeScript's parser, when the project has it: an optional peer
 * dependency, since preflight works without it (annotations then point at
 * the config file only).
 */
async function loadTypescript(): Promise<typeof TS | undefined> {
  try {
    const module = (await import("typescript")) as typeof TS & { default?: typeof TS };
    return module.default ?? module;
  } catch {
    return undefined;
  }
}

function resolveImport(from: string, specifier: string): string | undefined {
  if (!specifier.startsWith(".")) return undefined;
  const base = resolve(dirname(from), specifier);
  // ESM TypeScript imports name the emitted .js file; the source beside it is .ts.
  const stem = base.replace(/\.(?:[mc]?js)$/, "");
  const candidates = [base, ...SOURCE_EXTENSIONS.map((extension) => stem + extension), ...SOURCE_EXTENSIONS.map((extension) => resolve(base, `index${extension}`))];
  return candidates.find((candidate) => existsSync(candidate) && statSync(candidate).isFile());
}

function hasCronProperty(ts: typeof TS, element: TS.Expression): boolean {
  return (
    ts.isObjectLiteralExpression(element) &&
    element.properties.some((property) => ts.isPropertyAssignment(property) && property.name.getText() === "cron")
  );
}

/** Every array literal of object literals with a `cron` property, in source order, with each element's start. */
function scheduleArrays(ts: typeof TS, file: string, text: string): SourceLocation[][] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: SourceLocation[][] = [];
  const visit = (node: TS.Node): void => {
    if (
      ts.isArrayLiteralExpression(node) &&
      node.elements.length > 0 &&
      node.elements.every((element) => ts.isObjectLiteralExpression(element)) &&
      node.elements.some((element) => hasCronProperty(ts, element))
    ) {
      found.push(
        node.elements.map((element) => {
          const { line, character } = source.getLineAndCharacterOfPosition(element.getStart(source));
          return { file, line: line + 1, column: character + 1 };
        }),
      );
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/**
 * Where each schedule entry is written, for annotations and editors: the
 * first array literal of `cron` objects with exactly `count` elements, in
 * the config file or the files it imports (breadth first, relative imports
 * only). Undefined when TypeScript is not installed or no such literal
 * exists (a schedule built by spreading or mapping has no single literal).
 */
export async function locateEntries(configFile: string, count: number): Promise<readonly SourceLocation[] | undefined> {
  if (count === 0) return undefined;
  const ts = await loadTypescript();
  if (ts === undefined) return undefined;
  const queue = [resolve(configFile)];
  const seen = new Set(queue);
  while (queue.length > 0 && seen.size <= MAX_FILES) {
    const file = queue.shift() as string;
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    const match = scheduleArrays(ts, file, text).find((locations) => locations.length === count);
    if (match) return match;
    for (const imported of ts.preProcessFile(text, true, true).importedFiles) {
      const next = resolveImport(file, imported.fileName);
      if (next !== undefined && !seen.has(next)) {
        seen.add(next);
        queue.push(next);
      }
    }
  }
  return undefined;
}

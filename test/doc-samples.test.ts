import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

/**
 * The TypeScript blocks of the README and the docs compile against the
 * sources, so a renamed option or a changed signature breaks the suite, not a
 * reader's first try. Each block is a module of its own; the names a block
 * uses without declaring them (`ledger`, `token`, ...) come from the
 * samples' prelude below, or from an HTML comment right above the fence
 * (`<!-- prelude: declare const app: import("hono").Hono; -->`), invisible
 * on the rendered page. A block that is not TypeScript meant to compile
 * (a shape, a diff) is fenced as `text`, not `ts`.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** The documents whose samples are held to the sources. */
function documents(): string[] {
  const docs = readdirSync(join(root, "docs")).filter((name) => name.endsWith(".md")).map((name) => `docs/${name}`);
  return ["README.md", ...docs.sort(), "examples/drizzle-app/README.md"];
}

/** Names the samples use as a reader's own app would have them. */
const PRELUDE = `
declare const ledger: import("cronledger").Cronledger;
declare const token: string;
declare const port: number;
declare const jobs: import("cronledger").JobDefinition<any>[];
declare const schedule: import("cronledger").ScheduleEntry[];
declare const database: string;
declare const from: Date;
declare const to: Date;
declare const stats: { record(job: string, status: string, seconds: number): void };
declare function alert(message: string): void;
declare const health: { set(name: string, ok: boolean): void };
`;

interface Sample {
  readonly document: string;
  readonly line: number;
  readonly code: string;
  /** Where the sample says it lives (a first line `// src/jobs.ts`), so the next sample can import it. */
  readonly path?: string;
}

/** Every ```ts / ```typescript block, with the prelude comment above it if there is one. */
function extractSamples(document: string, text: string): Sample[] {
  const lines = text.split("\n");
  const samples: Sample[] = [];
  for (let index = 0; index < lines.length; index += 1) {
    if (!/^```(ts|typescript)\s*$/.test(lines[index] ?? "")) continue;
    let prelude = "";
    for (let above = index - 1; above >= 0 && (lines[above] ?? "").startsWith("<!--"); above -= 1) {
      prelude = /^<!-- prelude: (.*) -->$/.exec(lines[above] ?? "")?.[1] ?? prelude;
    }
    const start = index + 1;
    let end = start;
    while (end < lines.length && !/^```\s*$/.test(lines[end] ?? "")) end += 1;
    const path = /^\/\/ (src\/[\w/.-]+\.ts)\b/.exec(lines[start] ?? "")?.[1];
    const code = `${prelude}\n${lines.slice(start, end).join("\n")}\n`;
    samples.push(path === undefined ? { document, line: start, code } : { document, line: start, code, path });
    index = end;
  }
  return samples;
}

/** Compiles the samples as modules beside the sources, resolving `cronledger` to src/. */
function compile(samples: readonly Sample[]): string[] {
  const virtual = new Map<string, string>();
  const where = new Map<string, Sample>();
  samples.forEach((sample, index) => {
    const folder = join(root, "doc-samples", sample.document.replace(/[^a-z0-9]+/gi, "-"));
    const file = join(folder, sample.path ?? `src/sample-${index}.ts`);
    virtual.set(file, sample.code);
    where.set(file, sample);
  });
  const preludeFile = join(root, "doc-samples", "prelude.d.ts");
  virtual.set(preludeFile, PRELUDE);
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    moduleDetection: ts.ModuleDetectionKind.Force,
    lib: ["lib.es2023.d.ts", "lib.dom.d.ts"],
    types: ["node"],
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    esModuleInterop: true,
    baseUrl: root,
    paths: { cronledger: ["src/index.ts"], "cronledger/schema": ["src/schema.ts"] },
  };
  const host = ts.createCompilerHost(options);
  const readFile = host.readFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  const getSourceFile = host.getSourceFile.bind(host);
  const directoryExists = host.directoryExists?.bind(host);
  host.directoryExists = (directory) => [...virtual.keys()].some((file) => file.startsWith(`${directory}/`)) || (directoryExists?.(directory) ?? true);
  host.readFile = (file) => virtual.get(file) ?? readFile(file);
  host.fileExists = (file) => virtual.has(file) || fileExists(file);
  host.getSourceFile = (file, language, onError, create) => {
    const text = virtual.get(file);
    return text === undefined ? getSourceFile(file, language, onError, create) : ts.createSourceFile(file, text, language, true);
  };
  const program = ts.createProgram([...virtual.keys()], options, host);
  return ts
    .getPreEmitDiagnostics(program)
    .filter((diagnostic) => diagnostic.file !== undefined && virtual.has(diagnostic.file.fileName))
    .map((diagnostic) => {
      const file = diagnostic.file as ts.SourceFile;
      const sample = where.get(file.fileName);
      const { line } = file.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
      // Line 0 of a sample is its prelude; line 1 is the fence's next line.
      const at = sample === undefined ? file.fileName : `${sample.document}:${sample.line + line}`;
      return `${at}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")}`;
    });
}

describe("the TypeScript samples of the README and the docs", () => {
  it("finds the samples, prelude comments included", () => {
    const samples = extractSamples("x.md", ["<!-- prelude: declare const a: number; -->", "```ts", "a + 1;", "```", "```text", "b", "```"].join("\n"));
    expect(samples).toEqual([{ document: "x.md", line: 2, code: "declare const a: number;\na + 1;\n" }]);
  });

  it("every sample compiles against the sources, and one with a misspelt option does not", { timeout: 300_000 }, () => {
    const samples = documents().flatMap((document) => extractSamples(document, readFileSync(join(root, document), "utf8")));
    expect(samples.length).toBeGreaterThan(10);
    // One program for all (a compile of the sources costs seconds): the planted sample must be its only error.
    const planted: Sample = { document: "planted.md", line: 1, code: `\nimport { createCronledger } from "cronledger";\ncreateCronledger({ databse: "postgres://x" });\n` };
    const errors = compile([...samples, planted]);
    expect(errors.filter((error) => !error.startsWith("planted.md"))).toEqual([]);
    expect(errors).toEqual([expect.stringMatching(/^planted\.md:3: .*databse/)]);
  });
});

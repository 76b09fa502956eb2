import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { REPO_ROOT, watch } from "./support/child.js";

/**
 * What `npm install cronledger` downloads, as `npm pack` would publish it
 * from the build `npm test` made (pretest). The PGlite template (4.5 MB) is
 * built on first use of the embedded database, not shipped, and no source
 * maps ship: before both the tarball was 5.4 MB, now about 0.7 MB.
 */
const LIMIT_BYTES = 1_000_000;

interface Packed {
  readonly size: number;
  readonly unpackedSize: number;
  readonly files: readonly { readonly path: string; readonly size: number }[];
}

async function dryRunPack(): Promise<Packed> {
  // --ignore-scripts: prepack would rebuild dist/, which pretest has just built.
  const packed = await watch("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: REPO_ROOT }).exited;
  expect(packed.code, packed.stderr).toBe(0);
  const [result] = JSON.parse(packed.stdout) as [Packed];
  return result;
}

it("the tarball stays under 1 MB, holds no PGlite template nor source map, and ships the build, migrations, CLI and docs", async () => {
  const packed = await dryRunPack();
  console.info(`npm pack: ${packed.size} bytes packed, ${packed.unpackedSize} unpacked, ${packed.files.length} files`);
  expect(packed.size).toBeLessThan(LIMIT_BYTES);
  const paths = packed.files.map((file) => file.path);
  expect(paths.filter((path) => /\.tar\.gz$|\.map$|^dist\/pglite-template\//.test(path))).toEqual([]);
  for (const path of ["package.json", "bin/cronledger.js", "dist/index.js", "dist/index.d.ts", "dist/cli/main.js", "dist/cjs/index.cjs", "dist/cjs/schema.cjs", "dist/schema.js", "drizzle/meta/_journal.json", "docs/operations.md", "docs/wire-format.md", "README.md", "LICENSE", "CHANGELOG.md"]) {
    expect(paths, path).toContain(path);
  }
  expect(paths.some((path) => /^drizzle\/\d{4}_\w+\.sql$/.test(path))).toBe(true);
  // Nothing of the repository's own tooling.
  expect(paths.filter((path) => /^(src|test|bench|scripts|node_modules)\//.test(path))).toEqual([]);
});

it("runs no install script in the app that installs it", () => {
  const manifest = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
  // npm runs these in the installing app (prepare: for git dependencies and in a clone); npm 11 warns about each.
  expect(Object.keys(manifest.scripts).filter((name) => /^(pre|post)?install$|^prepare$/.test(name))).toEqual([]);
  expect(manifest.scripts.prepack).toBe("npm run build");
});

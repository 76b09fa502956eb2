import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

let root: string | undefined;

/**
 * The directory holding cronledger's own package.json, found by walking up
 * from this module. The sources (run by tsx), the ESM build (dist/) and the
 * CommonJS bundle (dist/cjs/, where the bundler stands in for
 * `import.meta.url`) sit at different depths, so a fixed `../..` would be
 * right for only some of them. dist/cjs/package.json has no name and is
 * passed over.
 */
export function packageRoot(): string {
  if (root !== undefined) return root;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, "utf8")) as { name?: unknown }).name === "cronledger") return (root = dir);
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`cronledger: cannot find its package.json above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}

/** A file shipped in the package (`drizzle/`, `package.json`, `dist/...`), whichever build is running. */
export function packagePath(...segments: string[]): string {
  return join(packageRoot(), ...segments);
}

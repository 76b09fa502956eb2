#!/usr/bin/env node
/* global console */
// Part of `npm run build`, after tsc has written the ESM build and its declarations to dist/.
//
// The CommonJS build that `require("cronledger")`, drizzle-kit's schema loader and other
// CommonJS loaders read: esbuild bundles the same sources (src/index.ts, src/schema.ts)
// into dist/cjs/*.cjs, dependencies left external. `import.meta.url` (src/package-root.ts,
// src/db/pglite.ts) becomes the bundle's own file URL. CommonJS consumers get
// the declarations tsc wrote, copied under dist/cjs/, whose package.json marks them
// CommonJS so TypeScript does not read them as ESM ones.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

const OUT = "dist/cjs";

rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
await build({
  entryPoints: { index: "src/index.ts", schema: "src/schema.ts" },
  outdir: OUT,
  outExtension: { ".js": ".cjs" },
  bundle: true,
  packages: "external",
  platform: "node",
  format: "cjs",
  target: "node20",
  // No source maps: they were most of the tarball, and the bundle is readable as it is.
  sourcemap: false,
  // esbuild's documented stand-in for import.meta.url in CommonJS output.
  inject: ["scripts/cjs-import-meta-url.mjs"],
  define: { "import.meta.url": "importMetaUrl" },
  logLevel: "warning",
});
for (const file of readdirSync("dist", { recursive: true, encoding: "utf8" })) {
  if (!file.endsWith(".d.ts") || file.startsWith("cjs/")) continue;
  mkdirSync(dirname(join(OUT, file)), { recursive: true });
  copyFileSync(join("dist", file), join(OUT, file));
}
writeFileSync(`${OUT}/package.json`, `${JSON.stringify({ type: "commonjs" }, null, 2)}\n`);
console.log(`cronledger: CommonJS build in ${OUT}/`);

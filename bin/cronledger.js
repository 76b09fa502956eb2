#!/usr/bin/env node
/* global process, console, URL */
// The CLI is compiled TypeScript in dist/, which the published package ships (`npm pack` builds it).
// A clone of the repository has no dist/ until `npm run build` (npm install runs no build script):
// the CLI then runs from src/ through tsx, a development dependency such a clone has installed.
import { existsSync } from "node:fs";

const built = new URL("../dist/cli/main.js", import.meta.url);

async function load() {
  if (existsSync(built)) return import(built.href);
  const tsx = await import("tsx/esm/api").catch(() => undefined);
  if (tsx === undefined) throw new Error("cronledger: dist/ is missing and tsx is not installed; run `npm install && npm run build` in the cronledger package first.");
  tsx.register();
  return import(new URL("../src/cli/main.ts", import.meta.url).href);
}

load().then(
  (cli) => cli.run(),
  (error) => {
    console.error(error instanceof Error && error.message.startsWith("cronledger:") ? error.message : error);
    process.exitCode = 1;
  },
);

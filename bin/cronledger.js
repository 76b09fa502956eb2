#!/usr/bin/env node
/* global process, console */
// The CLI is compiled TypeScript in dist/ (built by `npm run build`, which npm install/ci run through `prepare`).
import("../dist/cli/main.js").then(
  (cli) => cli.run(),
  (error) => {
    if (error && error.code === "ERR_MODULE_NOT_FOUND" && String(error.message).includes("dist/cli/main.js")) {
      console.error("cronledger: dist/ is missing; run `npm run build` in the cronledger package first.");
    } else {
      console.error(error);
    }
    process.exitCode = 1;
  },
);

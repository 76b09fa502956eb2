#!/usr/bin/env node
/* global console, process */
// Part of `npm run build`: see dist/db/pglite-template.js. A missing template
// only makes the first embedded start slower, so failing here never fails the build.
import { buildTemplate } from "../dist/db/pglite-template.js";

try {
  await buildTemplate();
} catch (error) {
  console.warn(`cronledger: could not prepare the embedded database template (${error instanceof Error ? error.message : String(error)}); embedded databases will run initdb on first start instead.`);
  process.exitCode = 0;
}

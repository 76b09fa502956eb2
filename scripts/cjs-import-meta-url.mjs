/* global require, __filename */
// Injected by scripts/build-cjs.mjs into the CommonJS bundle, where it stands in for `import.meta.url`.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- this runs inside the CommonJS bundle, where require is the loader
export const importMetaUrl = require("node:url").pathToFileURL(__filename).href;

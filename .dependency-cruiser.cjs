/**
 * The import rules docs/architecture.md describes, checked by `npm run check`
 * (`npm run deps`): no import cycle anywhere in src/ (type-only imports
 * count: a cycle of types is still a knot a reader has to untie), and no
 * import from a lower layer to a higher one. The layers, bottom to top:
 *
 *   base modules (src/*.ts but the four on top, and src/errors/, the error
 *   families src/errors.ts re-exports) < db/ < jobs/ < operators/
 *   < schedule/ < runtime/, status/ < wire/ < admin/ < options.ts,
 *   config.ts, cronledger.ts, index.ts < cli/
 *
 * test/dependency-rules.test.ts plants a cycle and a climbing import in a
 * copy of src/ and expects this check to fail on each.
 */
const TOP = "^src/(options|config|cronledger|index)\\.ts$";
const BASE = "^src/(?!(options|config|cronledger|index)\\.ts$)[^/]+\\.ts$|^src/errors/";
const layer = (name, from, forbidden, why) => ({
  name,
  severity: "error",
  comment: `${why} (docs/architecture.md, "Folders")`,
  from: { path: from },
  to: { path: forbidden },
});

module.exports = {
  forbidden: [
    {
      name: "no-cycle",
      severity: "error",
      comment: "An import cycle: move the shared words down to a module both can import (docs/architecture.md, \"Folders\")",
      from: { path: "^src/" },
      to: { circular: true },
    },
    layer("base-imports-no-layer", BASE, "^src/(?!errors/)[^/]+/", "Base modules import no layer folder: what they need lives beside them"),
    layer("base-imports-no-top", BASE, TOP, "Base modules never import the top modules"),
    layer("db-knows-nothing-above", "^src/db/", `^src/(jobs|operators|schedule|runtime|status|wire|admin|cli)/|${TOP}`, "db/ knows nothing above it"),
    layer("jobs-below-operators", "^src/jobs/", `^src/(operators|schedule|runtime|status|wire|admin|cli)/|${TOP}`, "jobs/ builds on db/ and the base modules only"),
    layer(
      "operators-below-schedule",
      "^src/operators/",
      `^src/(schedule|runtime|status|wire|admin|cli)/|${TOP}`,
      "operators/ (what operators read and do to jobs) builds on jobs/, db/ and the base modules",
    ),
    layer("schedule-below-runtime", "^src/schedule/", `^src/(runtime|status|wire|admin|cli)/|${TOP}`, "schedule/ builds on operators/, jobs/, db/ and the base modules"),
    layer("runtime-below-admin", "^src/runtime/", `^src/(status|wire|admin|cli)/|${TOP}`, "runtime/ never imports status/, wire/, admin/, cli/ or the top modules"),
    layer("status-below-wire", "^src/status/", `^src/(runtime|wire|admin|cli)/|${TOP}`, "status/ never imports runtime/, wire/, admin/, cli/ or the top modules"),
    layer("wire-below-admin", "^src/wire/", `^src/(runtime|admin|cli)/|${TOP}`, "wire/ (the JSON documents admin/ serves and cli/ prints) never imports runtime/, admin/, cli/ or the top modules"),
    layer("admin-below-top", "^src/admin/", `^src/cli/|${TOP}`, "admin/ never imports cli/ or the top modules"),
    layer("top-below-cli", TOP, "^src/cli/", "The top modules never import cli/"),
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    exclude: { path: "\\.d\\.ts$" },
  },
};

import js from "@eslint/js";
import tseslint from "typescript-eslint";

/** Imports that would break the layering docs/architecture.md describes, by the folder that may not make them. */
const LAYER_MESSAGE =
  "Layering (docs/architecture.md): db/ knows nothing above it; jobs/ and operators/ build on db/ alone (operators/ on jobs/ too); schedule/, runtime/ and status/ never import wire/, admin/ or cli/; wire/ never imports admin/ or cli/.";
const upwards = (folders) => [{ regex: `(^|/)(${folders.join("|")})/`, message: LAYER_MESSAGE }];
const restrict = (files, patterns) => ({ files, rules: { "no-restricted-imports": ["error", { patterns }] } });

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "drizzle/", "coverage/", ".cronledger/", ".scratch-*/", "test-results/", "**/*.d.ts"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
    },
  },
  restrict(["src/schedule/**", "src/runtime/**", "src/status/**"], upwards(["wire", "admin", "cli"])),
  // The JSON documents (src/wire/) are what admin/ serves and cli/ prints: below both, above the model they render.
  restrict(["src/wire/**"], upwards(["admin", "cli"])),
  // jobs/ does not reach into schedule/, runtime/ or status/ either: they build on jobs/ (entries name jobs), never the reverse.
  restrict(["src/jobs/**"], upwards(["operators", "wire", "admin", "cli", "schedule", "runtime", "status"])),
  // The operator service (src/operators/) knows jobs (a retry takes its job's current policy), never what is built on it.
  restrict(["src/operators/**"], upwards(["wire", "admin", "cli", "schedule", "runtime", "status"])),
  restrict(["src/db/**"], [
    ...upwards(["wire", "admin", "cli", "schedule", "jobs", "operators", "runtime", "status"]),
    { regex: "(^|/)(cronledger|options|config|index)\\.js$", message: LAYER_MESSAGE },
  ]),
);

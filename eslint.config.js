import js from "@eslint/js";
import tseslint from "typescript-eslint";

// The layering (docs/architecture.md) and the ban on import cycles are checked by dependency-cruiser
// (.dependency-cruiser.cjs, `npm run deps`, part of `npm run check`): it sees type-only imports and root modules.

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
  // A file a newcomer can read: at most 400 lines of code (comments and blank lines not counted) per file of src/.
  // And at most 100 lines of code per function: a longer one is two things a reader has to tell apart.
  {
    files: ["src/**/*.ts"],
    rules: {
      "max-lines": ["error", { max: 400, skipBlankLines: true, skipComments: true }],
      "max-lines-per-function": ["error", { max: 100, skipBlankLines: true, skipComments: true }],
    },
  },
  { files: ["**/*.cjs"], languageOptions: { sourceType: "commonjs", globals: { module: "writable", require: "readonly" } } },
);

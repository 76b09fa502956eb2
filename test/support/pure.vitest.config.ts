import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// For tests that need no database: vitest.config.ts minus its global setup,
// which starts PostgreSQL.
export default defineConfig({
  test: {
    root: fileURLToPath(new URL("../..", import.meta.url)),
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    pool: "forks",
  },
});

import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Test files wait on PostgreSQL far more than on the CPU: run more of them than there are cores.
    maxWorkers: 3,
    globalSetup: ["test/support/global-setup.ts"],
  },
});

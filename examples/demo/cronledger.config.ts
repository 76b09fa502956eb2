// `npx cronledger preflight --config examples/demo/cronledger.config.ts` checks this schedule without a database.
import { defineConfig } from "../../src/index.js";
import { DEMO_JOBS, DEMO_SCHEDULE } from "./jobs.js";

export default defineConfig({
  jobs: DEMO_JOBS,
  schedule: DEMO_SCHEDULE,
  worker: { concurrency: 4 },
});

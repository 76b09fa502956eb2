// `npx cronledger preflight --config examples/demo/cronledger.config.ts` checks this schedule without a database.
import { defineConfig } from "../../src/index.js";
import { DEMO_JOBS, DEMO_SCHEDULE } from "./jobs.js";

export default defineConfig({
  jobs: DEMO_JOBS,
  schedule: DEMO_SCHEDULE,
  // "gpu" is left out on purpose: demo.thumbnail-render shows what a job no worker serves looks like.
  worker: { concurrency: 4, queues: ["default"] },
});

import { defineConfig } from "cronledger";
import { BILLING_JOBS, BILLING_SCHEDULE } from "./src/jobs.js";

// Read by `cronledger preflight | migrate | worker --config examples/drizzle-app/cronledger.config.ts`.
export default defineConfig({
  jobs: BILLING_JOBS,
  schedule: BILLING_SCHEDULE,
  namespace: "billing",
  worker: { concurrency: 10 },
});

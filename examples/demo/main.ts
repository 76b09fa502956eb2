// `npm start`: cronledger on the embedded PGlite database in ./.cronledger, or
// on PostgreSQL with `DATABASE_URL=postgres://... npm start`. Ctrl-C stops it gracefully.
import { createCronledger } from "../../src/index.js";
import config from "./cronledger.config.js";
import { demoLogger, printEvents } from "./events.js";
import { flakySync } from "./jobs.js";

const ledger = createCronledger({ ...config, logger: demoLogger(), hooks: printEvents() });
await ledger.migrate();

// A one-off job next to the scheduled ones, so the retries show right away.
await ledger.enqueue(flakySync, { account: "globex" });

const status = await ledger.status();
for (const entry of status.entries) {
  console.log(`  ${entry.jobName.padEnd(18)} ${entry.cron.padEnd(14)} ${entry.timezone.padEnd(11)} next ${entry.nextRunAt?.toISOString() ?? "never"}`);
}

await ledger.start(config.worker);
console.log("cronledger demo running: one line per event. Ctrl-C stops it gracefully.");

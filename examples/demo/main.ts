// `npm start`: cronledger on the embedded PGlite database in ./.cronledger, or
// on PostgreSQL with `DATABASE_URL=postgres://... npm start`, and its Schedule
// page on http://127.0.0.1:4400 (CRONLEDGER_DEMO_PORT; 0 picks a free port).
// Ctrl-C stops it gracefully.
import { createCronledger, startAdminServer } from "../../src/index.js";
import config from "./cronledger.config.js";
import { demoLogger, printEvents } from "./events.js";
import { flakySync } from "./jobs.js";

const ledger = createCronledger({ ...config, logger: demoLogger(), hooks: printEvents() });
await ledger.migrate();

// A one-off job next to the scheduled ones, so the retries show right away.
await ledger.enqueue(flakySync, { account: "globex" });

const status = await ledger.status();
const [nameWidth, cronWidth] = [Math.max(...status.entries.map((entry) => entry.jobName.length)), Math.max(...status.entries.map((entry) => entry.cron.length))];
for (const entry of status.entries) {
  console.log(`  ${entry.jobName.padEnd(nameWidth)} ${entry.cron.padEnd(cronWidth)} ${entry.timezone.padEnd(11)} next ${entry.nextRunAt?.toISOString() ?? "never"}`);
}

await ledger.start(config.worker);
const page = await servePage();
console.log(`\nSchedule page: ${page.url}/admin/scheduler   (no token needed: it is served on 127.0.0.1 only)\n`);
console.log("cronledger demo running: one line per event. Ctrl-C stops it gracefully.");

/** The page on the demo's port, or on a free one when that is taken (another demo running). */
async function servePage() {
  const wanted = Number(process.env.CRONLEDGER_DEMO_PORT ?? 4400);
  const options = { allowUnauthenticatedLocalhost: true, host: "127.0.0.1" };
  try {
    return await startAdminServer(ledger, { ...options, port: wanted });
  } catch (error) {
    if ((error as { code?: unknown }).code !== "EADDRINUSE") throw error;
    return startAdminServer(ledger, { ...options, port: 0 });
  }
}

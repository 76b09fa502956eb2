import { CONFIG_OPTION, type Command } from "../command.js";
import { withLedger } from "../open-ledger.js";

export const migrate: Command = {
  name: "migrate",
  summary: "apply cronledger's migrations (idempotent, safe from several replicas at once)",
  details:
    "The database is the config's `database`, else DATABASE_URL, else the embedded PGlite database in ./.cronledger.\n" +
    "Runs under an advisory lock with cronledger's own migration journal; the schedule is not needed.\n" +
    "Tables your own drizzle-kit migrations created from cronledger/schema are adopted: recorded as applied, not created again.",
  options: [CONFIG_OPTION],
  run: (args, io) =>
    withLedger(args, io, "database", async (ledger) => {
      const { applied, adopted } = await ledger.migrate();
      if (adopted > 0) {
        io.stdout(`Adopted cronledger's tables created by your own drizzle-kit migrations: recorded ${adopted} migration${adopted === 1 ? "" : "s"} as applied.`);
      }
      io.stdout(applied === 0 ? `Database is up to date (${ledger.database.label}).` : `Applied ${applied} migration${applied === 1 ? "" : "s"} to ${ledger.database.label}.`);
      return 0;
    }),
};

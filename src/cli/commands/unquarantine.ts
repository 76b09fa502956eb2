import { unquarantinedDocument } from "../../wire/commands.js";
import { UsageError } from "../args.js";
import { CONFIG_OPTION, JSON_OPTION, type Command } from "../command.js";
import { assertMigrated, withLedger } from "../open-ledger.js";

export const unquarantine: Command = {
  name: "unquarantine",
  summary: "clear a schedule entry's quarantine once its cause is fixed: every replica's next pass fires its due slot",
  details:
    "Find the key in `cronledger status` (the quarantined entry's line) or the status JSON's `key`.\n" +
    "Clearing an entry that is not quarantined changes nothing; if its cause is not fixed, the next pass quarantines it again.",
  argument: { name: "<key>", description: "the entry's ledger key (or its identity)" },
  options: [CONFIG_OPTION, JSON_OPTION],
  run: async (args, io) => {
    const key = args.argument;
    if (key === undefined || key.trim() === "") throw new UsageError("`cronledger unquarantine` needs the entry's ledger key, as `cronledger status` shows it.");
    return withLedger(args, io, "database", async (ledger) => {
      await assertMigrated(ledger);
      const cleared = await ledger.clearQuarantine(key);
      if (args.boolean("json")) io.stdout(JSON.stringify(unquarantinedDocument(key, cleared), null, 2));
      else if (cleared === null) io.stderr(`No ledger row has the key ${JSON.stringify(key)} in this namespace; see \`cronledger status\`.`);
      else if (!cleared.wasQuarantined) io.stdout(`${cleared.jobName} (${cleared.key}) was not quarantined; nothing changed.`);
      else io.stdout(`Cleared the quarantine of ${cleared.jobName} (${cleared.key}): every replica's next pass fires its due slot.`);
      return cleared === null ? 1 : 0;
    });
  },
};

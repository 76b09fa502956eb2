import { cancelledDocument } from "../../wire/jobs.js";
import { UsageError } from "../args.js";
import { CONFIG_OPTION, JSON_OPTION, type Command } from "../command.js";
import { assertMigrated, withLedger } from "../open-ledger.js";

export const cancel: Command = {
  name: "cancel",
  summary: "cancel a job that waits to run (queued, or waiting for a retry): it ends cancelled and never runs",
  details:
    "A running job cannot be cancelled (its worker owns it), nor a finished one; cancelling a cancelled job changes nothing.\n" +
    "Find ids with `cronledger failures`, on the Schedule page (\"Waiting for a retry\") or in the status's latest runs.",
  argument: { name: "<id>", description: "the job's id" },
  options: [CONFIG_OPTION, JSON_OPTION],
  run: async (args, io) => {
    const id = args.argument;
    if (id === undefined || !/^\d{1,15}$/.test(id)) {
      throw new UsageError(`\`cronledger cancel\` needs the job's id, a positive integer: cronledger cancel 42${id === undefined ? "" : ` (got ${JSON.stringify(id)})`}.`);
    }
    return withLedger(args, io, "database", async (ledger) => {
      await assertMigrated(ledger);
      const result = await ledger.cancelJob(Number(id));
      if (args.boolean("json")) io.stdout(JSON.stringify(cancelledDocument(result), null, 2));
      else if (!result.cancelled) io.stdout(`Job ${result.id} (${result.jobName}) was already cancelled; nothing changed.`);
      else {
        const was = result.was === "retrying" ? `waiting for a retry after ${result.attempts}/${result.maxAttempts} attempts` : "queued, never run";
        io.stdout(`Cancelled job ${result.id} (${result.jobName}), which was ${was}: it will not run.`);
      }
      return 0;
    });
  },
};

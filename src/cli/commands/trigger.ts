import { triggeredDocument } from "../../wire/entries.js";
import { CONFIG_OPTION, JSON_OPTION, type Command } from "../command.js";
import { assertMigrated, withLedger } from "../open-ledger.js";
import { byOption, ENTRY_ARGUMENT, entryArgument, operator } from "./pause.js";

export const trigger: Command = {
  name: "trigger",
  summary: "run a schedule entry now, outside its schedule, with its payload (its overlap policy applies)",
  details:
    "The handler sees ctx.schedule.trigger: who (--by, default cli:$USER) and the request id.\n" +
    "--request-id makes the request idempotent: running the command again with the same id returns the first run's job.",
  argument: ENTRY_ARGUMENT,
  options: [
    CONFIG_OPTION,
    JSON_OPTION,
    { name: "request-id", type: "string", value: "<id>", description: "idempotency key of this request (letters, digits, . _ : -); default a fresh one" },
    byOption("kept with the job: its handler reads it as ctx.schedule.trigger.by"),
  ],
  run: async (args, io) => {
    const entry = entryArgument(args, "trigger");
    return withLedger(args, io, "schedule", async (ledger) => {
      await assertMigrated(ledger);
      const requestId = args.string("request-id");
      const run = await ledger.trigger(entry, { by: operator(args, io), ...(requestId === undefined ? {} : { requestId }) });
      if (args.boolean("json")) io.stdout(JSON.stringify(triggeredDocument(run), null, 2));
      else if (run.skipped !== null) io.stdout(`Run now of ${run.identity} was skipped by its overlap policy: ${run.skipped.detail}.`);
      else if (!run.created) io.stdout(`Request ${run.requestId} had already run ${run.identity}: job ${run.jobId ?? "?"}; nothing new was queued.`);
      else io.stdout(`Queued job ${run.jobId ?? "?"} to run ${run.identity} now (request ${run.requestId}, by ${run.by}).`);
      return run.skipped === null ? 0 : 1;
    });
  },
};

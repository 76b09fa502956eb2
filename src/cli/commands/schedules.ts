import { dynamicEntryResultDocument, dynamicSchedulesDocument } from "../../wire/schedules.js";
import { UsageError } from "../args.js";
import { CONFIG_OPTION, JSON_OPTION, type Command } from "../command.js";
import { assertMigrated, withLedger } from "../open-ledger.js";
import { dynamicEntryState } from "../../schedule/schedules.js";

const ACTIONS = ["list", "get", "remove"] as const;

/** `cronledger schedules list|get|remove`: the entries an application created at runtime (`ledger.schedules`), paged by key. */
export const schedules: Command = {
  name: "schedules",
  summary: "list, show or remove the schedule entries your application created at runtime (ledger.schedules)",
  details:
    "`cronledger schedules list [--prefix tenant:42:] [--after <key>] [--limit 100]` lists one page in key order, with the counts by state;\n" +
    "the page's last line names the `--after` of the next. `cronledger schedules get <key>` shows one entry; `cronledger schedules remove <key>`\n" +
    "removes it (no pass fires it after; a job of it already queued or running is left to finish).",
  argument: { name: "<list|get|remove> [KEY]", description: "what to do, and the entry's key for get and remove", many: true },
  options: [
    CONFIG_OPTION,
    JSON_OPTION,
    { name: "prefix", type: "string", value: "<prefix>", description: "list: only keys that start with it" },
    { name: "after", type: "string", value: "<key>", description: "list: the page after this key (the previous page's next)" },
    { name: "limit", type: "string", value: "<n>", description: "list: entries per page, 1-1000 (default 100)" },
  ],
  run: async (args, io) => {
    const [action, key, ...extra] = args.arguments ?? [];
    if (!ACTIONS.includes(action as (typeof ACTIONS)[number]) || extra.length > 0 || ((action === "get" || action === "remove") && key === undefined) || (action === "list" && key !== undefined)) {
      throw new UsageError("usage: cronledger schedules list [--prefix P] [--after KEY] [--limit N] | get KEY | remove KEY");
    }
    const json = args.boolean("json");
    return withLedger(args, io, "schedule", async (ledger) => {
      await assertMigrated(ledger);
      if (action === "list") {
        const prefix = args.string("prefix") ?? "";
        const limit = args.string("limit");
        const after = args.string("after");
        const page = await ledger.schedules.list({ prefix, ...(after === undefined ? {} : { after }), ...(limit === undefined ? {} : { limit: Number(limit) }) });
        const counts = await ledger.schedules.counts();
        if (json) io.stdout(JSON.stringify(dynamicSchedulesDocument(prefix, page, counts), null, 2));
        else {
          io.stdout(`${counts.total} stored: ${counts.due} due, ${counts.paused} paused, ${counts.quarantined} quarantined, ${counts.never} never firing again`);
          for (const entry of page.entries) {
            const state = dynamicEntryState(entry);
            io.stdout(`${entry.key}  ${entry.jobName}  ${entry.cron}  ${entry.timezone}  next ${entry.nextFireAt?.toISOString() ?? "never"}  ${state}`);
          }
          if (page.next !== null) io.stdout(`next page: --after ${page.next}`);
        }
        return 0;
      }
      if (action === "get") {
        const entry = await ledger.schedules.get(key!);
        if (json) io.stdout(JSON.stringify(dynamicEntryResultDocument(key!, entry), null, 2));
        else io.stdout(entry === null ? `No entry has key ${key}.` : JSON.stringify(entry, null, 2));
        return entry === null ? 1 : 0;
      }
      const removed = await ledger.schedules.remove(key!);
      if (json) io.stdout(JSON.stringify(dynamicEntryResultDocument(key!, null, removed), null, 2));
      else io.stdout(removed ? `Removed ${key}: no pass fires it from now on.` : `No entry has key ${key}; nothing removed.`);
      return removed ? 0 : 1;
    });
  },
};

import { userInfo } from "node:os";
import type { EntryPauseResult } from "../../operators/operations.js";
import { entryPauseDocument } from "../../wire/entries.js";
import { UsageError } from "../args.js";
import { CONFIG_OPTION, JSON_OPTION, type CliIO, type Command } from "../command.js";
import type { OptionSpec, ParsedArgs } from "../args.js";
import { assertMigrated, withLedger } from "../open-ledger.js";

export const ENTRY_ARGUMENT = { name: "<entry>", description: "the entry's key, its job name (when one entry runs it) or its identity, as `cronledger status` lists them" };
/** --by, described for what the command does with it. */
export function byOption(keptAs: string): OptionSpec {
  return { name: "by", type: "string", value: "<who>", description: `who asks, ${keptAs} (default: cli:<your user name>)` };
}

/** Who a CLI invocation is: --by, else the OS user. */
export function operator(args: ParsedArgs, io: CliIO): string {
  const given = args.string("by")?.trim();
  if (given) return given;
  try {
    return `cli:${io.env.USER ?? userInfo().username}`;
  } catch {
    return "cli";
  }
}

export function entryArgument(args: ParsedArgs, command: string): string {
  const entry = args.argument;
  if (entry === undefined || entry.trim() === "") throw new UsageError(`\`cronledger ${command}\` needs the entry: cronledger ${command} reports.rollup${command === "pause" ? ' --note "why"' : ""}.`);
  return entry;
}

function print(io: CliIO, json: boolean, result: EntryPauseResult): void {
  if (json) io.stdout(JSON.stringify(entryPauseDocument(result), null, 2));
  else if (result.paused) {
    const note = result.note === null ? "" : ` (note: ${result.note})`;
    io.stdout(
      result.changed
        ? `Paused ${result.identity} by ${result.pausedBy ?? "?"}${note}: every replica records its slots as skipped until \`cronledger resume\`.`
        : `${result.identity} was already paused since ${result.pausedAt?.toISOString() ?? "?"}; who and the note are now ${result.pausedBy ?? "?"}${note}.`,
    );
  } else {
    io.stdout(result.changed ? `Resumed ${result.identity}: its next slot fires as usual (the paused ones stay skipped).` : `${result.identity} was not paused; nothing changed.`);
  }
}

export const pause: Command = {
  name: "pause",
  summary: "pause a schedule entry: every replica records its slots as skipped (paused) until it is resumed",
  details:
    "The pause lives in the entry's ledger row: it holds on every replica within one pass, and across restarts and deploys that keep the entry's timing.\n" +
    "Pausing a paused entry keeps it paused and replaces who and the note. `cronledger resume <entry>` ends it; the next slot fires, never the paused ones.",
  argument: ENTRY_ARGUMENT,
  options: [CONFIG_OPTION, JSON_OPTION, { name: "note", type: "string", value: "<text>", description: "why, shown with the pause on the page and in the status" }, byOption("kept with the pause")],
  run: async (args, io) => {
    const entry = entryArgument(args, "pause");
    return withLedger(args, io, "schedule", async (ledger) => {
      await assertMigrated(ledger);
      print(io, args.boolean("json"), await ledger.pause(entry, { note: args.string("note") ?? null, by: operator(args, io) }));
      return 0;
    });
  },
};

export const resume: Command = {
  name: "resume",
  summary: "resume a paused schedule entry: its next slot fires as usual",
  argument: ENTRY_ARGUMENT,
  options: [CONFIG_OPTION, JSON_OPTION, byOption("in the log line of the resume")],
  run: async (args, io) => {
    const entry = entryArgument(args, "resume");
    return withLedger(args, io, "schedule", async (ledger) => {
      await assertMigrated(ledger);
      print(io, args.boolean("json"), await ledger.resume(entry, { by: operator(args, io) }));
      return 0;
    });
  },
};

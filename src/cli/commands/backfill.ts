import { BackfillTooLargeError } from "../../errors.js";
import type { BackfillResult } from "../../schedule/backfill.js";
import { backfillDocument } from "../../wire/backfill.js";
import { UsageError } from "../args.js";
import { CONFIG_OPTION, JSON_OPTION, type Command } from "../command.js";
import { plural } from "../format.js";
import { assertMigrated, withLedger } from "../open-ledger.js";

const OUTCOME_TEXT: Readonly<Record<BackfillResult["slots"][number]["outcome"], string>> = {
  enqueued: "enqueued",
  would_enqueue: "would enqueue",
  exists: "has a job",
  ahead: "ahead (ticker's)",
};

function describe(result: BackfillResult): string[] {
  const verb = result.dryRun ? "would enqueue" : "enqueued";
  const lines = [
    `${result.dryRun ? "Dry run: " : ""}backfill of ${result.entryKey ?? result.jobName} from ${result.from.toISOString()} to ${result.to.toISOString()}: ` +
      `${plural(result.slots.length, "slot")}, ${result.enqueued} ${verb}, ${result.existing} already with a job, ${result.ahead} after the ledger (left to the ticker)` +
      `${result.omitted > 0 ? `, ${result.omitted} more in the range left out by --max/--latest` : ""}.`,
  ];
  if (result.ledgerAt === null) lines.push("  The entry has no ledger row yet (no scheduler pass has seen it): start its ticker first; nothing before it can be backfilled.");
  for (const slot of result.slots) {
    lines.push(
      `  ${slot.slot.toISOString()}  ${slot.wallTime.padEnd(26)} ${OUTCOME_TEXT[slot.outcome]}${slot.jobId === null ? "" : ` (job ${slot.jobId})`}` +
        (slot.dstNote === null ? "" : `  [DST: ${slot.dstNote}]`),
    );
  }
  return lines;
}

function positiveInteger(value: string | undefined, option: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,9}$/.test(value) || Number(value) < 1) throw new UsageError(`--${option} must be a positive integer (got ${JSON.stringify(value)}).`);
  return Number(value);
}

export const backfill: Command = {
  name: "backfill",
  summary: "enqueue one job per missed slot of an entry in a range (after an outage longer than its catch-up window)",
  details:
    "Each slot of the range that has no job of the entry yet gets one, with that slot as its scheduledFor and ctx.schedule.backfilled.\n" +
    "Slots after the entry's ledger are the live ticker's and are left to it; a slot is never run twice, whoever else backfills.\n" +
    "Run it with --dry-run first: it lists the slots (wall times, DST notes) and what would become of each.\n" +
    "Instants need their offset or Z: cronledger backfill nightly-report --from 2026-05-01T00:00:00Z --to 2026-05-03T00:00:00Z",
  argument: { name: "<entry>", description: "the entry: its key, its job name (when one entry runs it), its identity or its ledger key" },
  options: [
    CONFIG_OPTION,
    { name: "from", type: "string", value: "<instant>", description: "first instant of the range, inclusive (ISO 8601 with offset or Z)" },
    { name: "to", type: "string", value: "<instant>", description: "last instant of the range, inclusive" },
    { name: "dry-run", type: "boolean", description: "list the slots and what would become of each; enqueue nothing" },
    { name: "max", type: "string", value: "<n>", description: "at most n slots: the earliest of the range, or the latest with --latest" },
    { name: "latest", type: "boolean", description: "take the latest slots of the range (--max of them, else 1)" },
    { name: "force", type: "boolean", description: "allow more than 1,000 slots (up to 100,000)" },
    JSON_OPTION,
  ],
  run: async (args, io) => {
    const entry = args.argument;
    const from = args.string("from");
    const to = args.string("to");
    if (entry === undefined) throw new UsageError("`cronledger backfill` needs the entry: cronledger backfill <entry> --from <instant> --to <instant>.");
    if (from === undefined || to === undefined) throw new UsageError("`cronledger backfill` needs --from and --to (ISO 8601 instants with offset or Z).");
    const max = positiveInteger(args.string("max"), "max");
    return withLedger(args, io, "schedule", async (ledger) => {
      await assertMigrated(ledger);
      const result = await ledger.backfill(entry, {
        from,
        to,
        dryRun: args.boolean("dry-run"),
        latest: args.boolean("latest"),
        force: args.boolean("force"),
        ...(max === undefined ? {} : { max }),
      }).catch((error: unknown) => {
        // The refusal names the switch to use here: --force, not the API's force: true.
        throw error instanceof BackfillTooLargeError ? error.on("cli") : error;
      });
      if (args.boolean("json")) io.stdout(JSON.stringify(backfillDocument(result), null, 2));
      else for (const line of describe(result)) io.stdout(line);
      return 0;
    });
  },
};

import { parseConfig } from "../../options.js";
import { loadEntries, type InvalidScheduleEntry } from "../../schedule/scheduler.js";
import { upcomingSlots, type UpcomingEntry } from "../../schedule/upcoming.js";
import type { ResolvedEntry } from "../../schedule/validate.js";
import { closest } from "../../suggest.js";
import { nextDocument } from "../../wire/upcoming.js";
import { instantOption, integerOption, UsageError, type ParsedArgs } from "../args.js";
import { CONFIG_OPTION, JSON_OPTION, type CliIO, type Command } from "../command.js";
import { plural } from "../format.js";
import { loadConfig, requireConfigFile } from "../load-config.js";
import { assertMigrated, withLedger } from "../open-ledger.js";

export const DEFAULT_NEXT_COUNT = 10;

export const next: Command = {
  name: "next",
  summary: "list each schedule entry's next fire times, in its zone and UTC, with notes on DST changes, jitter and catch-up",
  details:
    "Reads the config (the database only for a dynamic entry): the same calendar the ticker fires by. Name entries by their `key`, job name or\n" +
    "identity; none names every entry. A name no entry of the config has is looked up as a dynamic entry's key\n" +
    "(ledger.schedules) in the config's database. Notes: a wall time a DST change skips (the slot shifted, and to when), a repeated\n" +
    "hour (fires once or twice, and which), the jitter range, a catch-up window shorter than the gap between slots.\n" +
    "Invalid entries are reported on stderr and left out, and the command then exits 1 after printing the valid ones\n" +
    "(`cronledger preflight` checks them).",
  argument: { name: "[KEY...]", description: "entries to show, by key, job name or identity, or a dynamic entry's key (default: all)", many: true },
  options: [
    CONFIG_OPTION,
    JSON_OPTION,
    { name: "count", short: "n", type: "string", value: "<n>", description: `how many fire times per entry (default ${DEFAULT_NEXT_COUNT})` },
    { name: "from", type: "string", value: "<instant>", description: "list fire times after this ISO 8601 instant (default: now)" },
  ],
  async run(args, io) {
    const count = integerOption(args, "count", 1, 1_000) ?? DEFAULT_NEXT_COUNT;
    const fromMs = instantOption(args, "from") ?? Date.now();
    const { entries, invalid, databaseNamed } = await configEntries(args, io);
    const chosen = databaseNamed ? await withDynamic(entries, args, io) : selectEntries(entries, args.arguments);
    const upcoming = chosen.map((entry) => upcomingSlots(entry, fromMs, count));
    if (args.boolean("json")) io.stdout(JSON.stringify(nextDocument(fromMs, upcoming, invalid), null, 2));
    else for (const line of describeUpcoming(upcoming)) io.stdout(line);
    if (invalid.length === 0) return 0;
    // A list that silently misses entries reads as the whole schedule: exit 1, as preflight does for the same config.
    io.stderr(`${plural(invalid.length, "invalid schedule entry", "invalid schedule entries")} left out of this list: fix ${invalid.length === 1 ? "it" : "them"} (\`cronledger preflight\`).`);
    return 1;
  },
};

/** The config's valid entries, as createCronledger loads them, and the invalid ones left out, each problem reported on stderr. */
export async function configEntries(
  args: ParsedArgs,
  io: CliIO,
): Promise<{ entries: readonly ResolvedEntry[]; invalid: readonly InvalidScheduleEntry[]; databaseNamed: boolean }> {
  const file = requireConfigFile(args, io);
  const config = parseConfig(await loadConfig(file), file);
  const loaded = loadEntries(config.schedule ?? [], [], config.jobs, {
    namespace: config.namespace,
    maxPayloadBytes: config.maxPayloadBytes,
    mode: "quarantine",
    catchUpWindowMs: config.catchUpWindow,
  });
  for (const entry of loaded.invalid) {
    for (const problem of entry.problems) io.stderr(`error [${problem.code}] ${problem.message} (left out; run \`cronledger preflight\`)`);
  }
  // Only a database the config or DATABASE_URL names is looked in for dynamic keys: never an embedded one made here.
  const databaseNamed = config.database !== undefined || (io.env.DATABASE_URL ?? "") !== "";
  return { entries: loaded.entries, invalid: loaded.invalid, databaseNamed };
}

/**
 * The entries the names pick: those of the config, and for a name none of
 * them has, the dynamic entry with that key (`ledger.schedules`), read from
 * the config's database (the only case `next` opens it, and only when the
 * config or DATABASE_URL names one). An unknown name is
 * refused with the config's did-you-mean.
 */
async function withDynamic(entries: readonly ResolvedEntry[], args: ParsedArgs, io: CliIO): Promise<readonly ResolvedEntry[]> {
  const known = new Set(entries.flatMap((entry) => [entry.entryKey, entry.jobName, entry.identity]));
  const others = args.arguments.filter((name) => !known.has(name));
  if (others.length === 0) return selectEntries(entries, args.arguments);
  const dynamic = new Map<string, ResolvedEntry>();
  await withLedger(args, io, "schedule", async (ledger) => {
    await assertMigrated(ledger);
    for (const name of others) {
      const entry = await ledger.schedules.resolved(name);
      if (entry !== undefined) dynamic.set(name, entry);
    }
    return 0;
  });
  const missing = others.filter((name) => !dynamic.has(name));
  if (missing.length > 0) selectEntries(entries, missing);
  return args.arguments.flatMap((name) => dynamic.get(name) ?? selectEntries(entries, [name]));
}

/** The entries a list of names picks (key, job name or identity), in schedule order; every entry for none. */
export function selectEntries(entries: readonly ResolvedEntry[], names: readonly string[]): readonly ResolvedEntry[] {
  if (names.length === 0) return entries;
  const known = entries.flatMap((entry) => [entry.entryKey, entry.jobName, entry.identity].filter((name): name is string => name !== undefined));
  for (const name of names) {
    if (known.includes(name)) continue;
    const hint = closest(name, known);
    throw new UsageError(`No schedule entry has the key, job name or identity ${JSON.stringify(name)}.${hint ? ` Did you mean ${JSON.stringify(hint)}?` : ""}`);
  }
  return entries.filter((entry) => names.some((name) => name === entry.entryKey || name === entry.jobName || name === entry.identity));
}

function describeUpcoming(upcoming: readonly UpcomingEntry[]): string[] {
  const lines: string[] = [];
  for (const { entry, slots, notes } of upcoming) {
    if (lines.length > 0) lines.push("");
    const key = entry.entryKey === undefined ? "" : ` [${entry.entryKey}]`;
    lines.push(`${entry.jobName}${key}  ${entry.cron.source}  ${entry.timezone}`);
    for (const note of notes) lines.push(`  note: ${note.message}`);
    if (slots.length === 0) lines.push("  no upcoming slot");
    for (const slot of slots) {
      const fires = slot.fireMs === slot.slotMs ? "" : `  fires ${new Date(slot.fireMs).toISOString()}`;
      lines.push(`  ${slot.local}  ${new Date(slot.slotMs).toISOString()}${fires}`);
      for (const note of slot.notes) lines.push(`    ${note.message}`);
    }
  }
  return lines;
}

import { relative } from "node:path";
import type { SchedulerStatus } from "../../cronledger.js";
import { statusDocument } from "../../wire/status.js";
import { CONFIG_OPTION, JSON_OPTION, type Command } from "../command.js";
import { locateEntries, type SourceLocation } from "../entry-locations.js";
import { findConfigFile } from "../load-config.js";
import { assertMigrated, withLedger } from "../open-ledger.js";
import { isoOrDash, plural, table } from "../format.js";
import { dynamicEntryState } from "../../schedule/schedules.js";

export const status: Command = {
  name: "status",
  summary: "show every schedule entry's state (ok, late, failing...), last slot and next run, invalid entries, and job counts per queue",
  details:
    "Without a config file only the queue counts are shown, since the entries come from the schedule.\n" +
    "Exit status 0 whatever the entries' states: alert on cronledger_schedule_entries in Prometheus, or on the JSON.",
  options: [CONFIG_OPTION, JSON_OPTION],
  run: (args, io) =>
    withLedger(args, io, "optional schedule", async (ledger) => {
      await assertMigrated(ledger);
      const report = await ledger.status({ dynamic: { limit: STATUS_DYNAMIC } });
      if (args.boolean("json")) {
        io.stdout(JSON.stringify(statusDocument(report), null, 2));
        return 0;
      }
      // Where each invalid entry is written, when the config's schedule is a literal TypeScript can find.
      const file = report.invalid.length > 0 ? findConfigFile(args, io) : undefined;
      const locations = file === undefined ? undefined : await locateEntries(file, ledger.scheduler.entries.length + ledger.scheduler.invalid.length);
      const where = (index: number | null) => {
        const location: SourceLocation | undefined = index === null ? undefined : locations?.[index];
        return location === undefined ? "" : ` (${relative(io.cwd, location.file) || location.file}:${location.line}:${location.column})`;
      };
      for (const line of describeStatus(report, where)) io.stdout(line);
      return 0;
    }),
};

/** Dynamic entries `cronledger status` lists; `cronledger schedules list` pages through the rest. */
const STATUS_DYNAMIC = 20;

/** The dynamic entries (`ledger.schedules`): their counts, the first page and how to read the next; nothing when none is stored. */
function describeDynamic(report: SchedulerStatus): string[] {
  const { counts, page } = report.dynamic;
  if (counts.total === 0 && (page === null || page.entries.length === 0)) return [];
  const lines = [
    "",
    `Dynamic entries (ledger.schedules): ${counts.total} stored: ${counts.due} due, ${counts.paused} paused, ${counts.quarantined} quarantined, ${counts.never} never firing again.`,
  ];
  if (page === null || page.entries.length === 0) return lines;
  lines.push(
    ...table([
      ["KEY", "JOB", "CRON", "TIMEZONE", "STATE", "NEXT FIRE"],
      ...page.entries.map((entry) => [entry.key, entry.jobName, entry.cron, entry.timezone, dynamicEntryState(entry), isoOrDash(entry.nextFireAt)]),
    ]),
  );
  if (page.next !== null) lines.push(`More: \`cronledger schedules list --after ${page.next}\` (or --prefix to search by key).`);
  return lines;
}

function describeStatus(report: SchedulerStatus, where: (index: number | null) => string): string[] {
  const chores = report.entries.filter((entry) => entry.chore).length;
  const counted = `${plural(report.entries.length - chores, "schedule entry", "schedule entries")}${chores > 0 ? ` + ${plural(chores, "chore")}` : ""}`;
  const invalid = report.invalid.length > 0 ? `, ${report.invalid.length} invalid (not running)` : "";
  const lines = [`Database clock ${report.databaseNow.toISOString()}, namespace "${report.namespace}", ${counted}${invalid}.`];
  if (report.entries.length > 0) {
    const states = new Map<string, number>();
    for (const entry of report.entries) states.set(entry.state, (states.get(entry.state) ?? 0) + 1);
    lines.push(`States: ${[...states].map(([state, count]) => `${state} ${count}`).join(", ")}.`);
    lines.push(
      "",
      ...table([
        ["JOB", "STATE", "CRON", "TIMEZONE", "LAST SLOT", "NEXT RUN"],
        ...report.entries.map((entry) => [
          entry.chore ? `${entry.jobName} (chore)` : entry.jobName,
          entry.state,
          entry.cron,
          entry.timezone,
          entry.lastEnqueuedSlot ? entry.lastEnqueuedSlot.toISOString() : entry.createdAt ? `never (created ${entry.createdAt.toISOString()})` : "-",
          isoOrDash(entry.nextRunAt),
        ]),
      ]),
    );
    const unwell = report.entries.filter((entry) => entry.state !== "ok");
    if (unwell.length > 0) lines.push("", "Why:");
    for (const entry of unwell) lines.push(`  ${entry.jobName} [${entry.state}] ${entry.reason}`);
  }
  if (report.invalid.length > 0) lines.push("", "Invalid entries (not running; `cronledger preflight` checks a schedule before a deploy):");
  for (const entry of report.invalid) {
    for (const problem of entry.problems) lines.push(`  error [${problem.code}] ${problem.message}${where(entry.invalidIndex)}`);
  }
  for (const warning of report.warnings) lines.push(`warning [${warning.code}] ${warning.message}`);
  for (const entry of report.entries) {
    if (entry.quarantine === null) continue;
    lines.push(
      `quarantined ${entry.jobName} (${entry.identity}) until ${entry.quarantine.until.toISOString()}, ${plural(entry.quarantine.count, "failure")}: ${entry.quarantine.reason}` +
        ` (ledger key ${entry.key}; \`cronledger unquarantine ${entry.key}\` once fixed)`,
    );
  }
  if (report.waitingForWorker.length > 0) {
    lines.push("", "Waiting for a worker that knows them (no running worker serving their queue has registered them):");
    for (const row of report.waitingForWorker) lines.push(`  ${row.jobName}: ${plural(row.count, "job")}, oldest ready since ${row.oldestSince.toISOString()}`);
  }
  lines.push(...describeDynamic(report));
  const queues = Object.entries(report.queues);
  lines.push("", queues.length === 0 ? "No jobs yet." : "Jobs by queue and status:");
  for (const [queue, counts] of queues) {
    lines.push(`  ${queue}: ${Object.entries(counts).map(([state, count]) => `${state} ${count}`).join(", ")}`);
  }
  return lines;
}

import type { SchedulerStatus } from "../../cronledger.js";
import { CONFIG_OPTION, JSON_OPTION, type Command } from "../command.js";
import { assertMigrated, withLedger } from "../open-ledger.js";
import { isoOrDash, plural, table } from "../format.js";

export const status: Command = {
  name: "status",
  summary: "show every schedule entry's last slot and next run, and job counts per queue",
  details: "Without a config file only the queue counts are shown, since the entries come from the schedule.",
  options: [CONFIG_OPTION, JSON_OPTION],
  run: (args, io) =>
    withLedger(args, io, "optional schedule", async (ledger) => {
      await assertMigrated(ledger);
      const report = await ledger.status();
      if (args.boolean("json")) io.stdout(JSON.stringify(report, null, 2));
      else for (const line of describeStatus(report)) io.stdout(line);
      return 0;
    }),
};

function describeStatus(report: SchedulerStatus): string[] {
  const chores = report.entries.filter((entry) => entry.chore).length;
  const counted = `${plural(report.entries.length - chores, "schedule entry", "schedule entries")}${chores > 0 ? ` + ${plural(chores, "chore")}` : ""}`;
  const lines = [`Database clock ${report.databaseNow.toISOString()}, namespace "${report.namespace}", ${counted}.`];
  if (report.entries.length > 0) {
    lines.push(
      "",
      ...table([
        ["JOB", "CRON", "TIMEZONE", "LAST SLOT", "NEXT RUN"],
        ...report.entries.map((entry) => [
          entry.chore ? `${entry.jobName} (chore)` : entry.jobName,
          entry.cron,
          entry.timezone,
          isoOrDash(entry.lastEnqueuedSlot),
          isoOrDash(entry.nextRunAt),
        ]),
      ]),
    );
  }
  for (const warning of report.warnings) lines.push(`warning [${warning.code}] ${warning.message}`);
  for (const entry of report.entries) {
    if (entry.quarantine === null) continue;
    lines.push(`quarantined ${entry.jobName} (${entry.identity}) until ${entry.quarantine.until.toISOString()}, ${plural(entry.quarantine.count, "failure")}: ${entry.quarantine.reason}`);
  }
  if (report.waitingForWorker.length > 0) {
    lines.push("", "Waiting for a worker that knows them (no running worker serving their queue has registered them):");
    for (const row of report.waitingForWorker) lines.push(`  ${row.jobName}: ${plural(row.count, "job")}, oldest ready since ${row.oldestSince.toISOString()}`);
  }
  const queues = Object.entries(report.queues);
  lines.push("", queues.length === 0 ? "No jobs yet." : "Jobs by queue and status:");
  for (const [queue, counts] of queues) {
    lines.push(`  ${queue}: ${Object.entries(counts).map(([state, count]) => `${state} ${count}`).join(", ")}`);
  }
  return lines;
}

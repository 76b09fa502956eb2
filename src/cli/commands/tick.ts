import type { TickReport } from "../../events.js";
import { tickDocument } from "../../wire/commands.js";
import { UsageError } from "../args.js";
import { CONFIG_OPTION, JSON_OPTION, type Command } from "../command.js";
import { plural } from "../format.js";
import { assertMigrated, withLedger } from "../open-ledger.js";

export const tick: Command = {
  name: "tick",
  summary: "run one scheduler pass now and print what it enqueued",
  details:
    "Evaluates every entry at the database clock, enqueues the due slots (exactly once across replicas) and exits.\n" +
    "The continuous ticker runs inside `cronledger worker`.",
  options: [
    CONFIG_OPTION,
    { name: "once", type: "boolean", description: "run a single pass and exit (required: the continuous ticker is `cronledger worker`)" },
    JSON_OPTION,
  ],
  async run(args, io) {
    if (!args.boolean("once")) {
      throw new UsageError("`cronledger tick` runs one pass: pass --once. To tick continuously, run `cronledger worker`.");
    }
    return withLedger(args, io, "schedule", async (ledger) => {
      await assertMigrated(ledger);
      const report = await ledger.tick();
      const invalid = ledger.scheduler.invalid;
      if (args.boolean("json")) io.stdout(JSON.stringify(tickDocument(report, invalid), null, 2));
      else {
        for (const line of describeReport(report)) io.stdout(line);
        for (const entry of invalid) for (const problem of entry.problems) io.stdout(`  invalid      [${problem.code}] ${problem.message} (not ticked)`);
      }
      // An entry that could not be enqueued (quarantined or set aside), or one that is invalid and left out, fails the command.
      return report.quarantined.length > 0 || report.setAside.length > 0 || invalid.length > 0 ? 1 : 0;
    });
  },
};

function describeReport(report: TickReport): string[] {
  const lines = [
    `Tick at ${report.now.toISOString()}: ${report.enqueued.length} enqueued, ${report.lostRace.length} lost to another replica, ` +
      `${report.skippedStale.length} skipped as stale, ${report.skipped.length} skipped (paused or overlap), ${report.quarantined.length} quarantined, ${report.setAside.length} set aside, ${report.locked.length} locked, ${report.repaired.length} repaired, ` +
      `${plural(report.created, "new ledger row")}.`,
  ];
  for (const slot of report.enqueued) lines.push(`  enqueued     ${slot.jobName} for ${slot.slot.toISOString()} (job ${slot.jobId ?? "already queued"})`);
  for (const slot of report.skippedStale) lines.push(`  stale        ${slot.jobName} slot ${slot.slot.toISOString()} is older than its catch-up window`);
  for (const slot of report.skipped) lines.push(`  skipped      ${slot.jobName} for ${slot.slot.toISOString()} (${slot.reason}): ${slot.detail}`);
  for (const slot of report.quarantined) {
    lines.push(`  quarantined  ${slot.jobName} for ${slot.slot.toISOString()} in phase ${slot.phase} until ${slot.until.toISOString()} (${plural(slot.count, "failure")}): ${slot.error}`);
  }
  for (const slot of report.setAside) {
    lines.push(`  set aside    ${slot.jobName} for ${slot.slot.toISOString()}, retried alone at ${slot.retryAt.toISOString()} (${plural(slot.failures, "failure")}): ${slot.error}`);
  }
  for (const slot of report.locked) lines.push(`  locked       ${slot.jobName}: its ledger row is held by another session; skipped, still due`);
  for (const fix of report.repaired) lines.push(`  repaired     ${fix.jobName}: ledger value ${fix.from.toISOString()} was in the future, reset to ${fix.to.toISOString()}`);
  lines.push(`Next fire: ${report.nextFireAt?.toISOString() ?? "none"}.`);
  return lines;
}

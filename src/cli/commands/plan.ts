import { relative } from "node:path";
import { createCronledger } from "../../cronledger.js";
import { preflightProblemDocuments } from "../../wire/commands.js";
import { planDocument } from "../../wire/plan.js";
import { instantOption, UsageError, type ParsedArgs } from "../args.js";
import { CONFIG_OPTION, JSON_OPTION, stderrLogger, type Command } from "../command.js";
import { requireConfigFile } from "../load-config.js";
import { planLines, type PlanStyle } from "../plan-format.js";
import { checkConfigFile, printGithub, printText, problemLines, verdict } from "./preflight.js";

type Format = "text" | "json" | "markdown" | "github";
const FORMATS: readonly Format[] = ["text", "json", "markdown", "github"];

/** Exit status of a plan that retires ledger rows, drops job names or orphans dynamic entries: CI can ask a person to approve it. */
export const PLAN_NEEDS_APPROVAL = 3;

export const plan: Command = {
  name: "plan",
  summary: "plan a deploy: the new config against the live ledger, workers and jobs (read-only)",
  details:
    "Runs every preflight check on the new config first (reported as `preflight` does), then reads the live ledger, the\n" +
    "live workers and the queued jobs of the config's database and lists, per entry of the new config and per ledger row\n" +
    "not in it: added (first slot), removed (row retires after the prune grace, its jobs, who still runs them), retimed\n" +
    "or re-keyed (a run skipped or doubled across the switch), overdue on start (fired or skipped as stale), carried state\n" +
    "(paused, quarantined, waiting for a worker), and job names no live worker registers yet. Writes nothing.\n" +
    "It also counts the stored dynamic entries (ledger.schedules) whose job the new config no longer defines.\n" +
    `Exit status: 0 nothing retires, no job name is dropped and no dynamic entry is orphaned; ${PLAN_NEEDS_APPROVAL} the plan retires rows,\n` +
    "drops job names or orphans dynamic entries;\n" +
    "1 the config has errors or the database cannot be read; 2 a usage error.",
  options: [
    CONFIG_OPTION,
    JSON_OPTION,
    { name: "format", type: "string", value: "<text|json|markdown|github>", description: "output format; markdown for a pull-request comment, github adds ::error / ::warning annotations" },
    { name: "at", type: "string", value: "<instant>", description: "the switch: when the new version first ticks (ISO 8601; default the database clock)" },
  ],
  async run(args, io) {
    const format = formatOf(args);
    const atMs = instantOption(args, "at");
    const file = requireConfigFile(args, io);
    const shownFile = relative(io.cwd, file) || file;
    const { config, located, summary } = await checkConfigFile(file, io);
    if (format === "github") printGithub(io, shownFile, located, summary);
    else if (format === "text") printText(io, located, summary);
    // The plan covers the valid entries, as a deploy with invalid entries runs them (invalidEntries: "quarantine").
    const ledger = createCronledger({ ...config, invalidEntries: "quarantine", logger: config.logger ?? stderrLogger(io) });
    let result;
    try {
      result = await ledger.plan(atMs === undefined ? {} : { at: new Date(atMs) });
    } finally {
      await ledger.close();
    }
    if (format === "json") io.stdout(JSON.stringify(planDocument(result, shownFile, preflightProblemDocuments(located)), null, 2));
    else {
      const style: PlanStyle = format === "markdown" ? "markdown" : "text";
      if (style === "text") io.stdout("");
      const preflight = style === "markdown" ? { verdict: verdict(summary), problems: problemLines(located) } : undefined;
      for (const line of planLines(result, shownFile, style, preflight)) io.stdout(line);
      if (format === "github" && (result.retiresRows || result.dropsJobNames || result.orphansDynamicEntries)) {
        io.stdout(`::warning title=cronledger plan::${planLines(result, shownFile, "text").at(-1) ?? ""}`);
      }
    }
    if (summary.errors > 0) return 1;
    return result.retiresRows || result.dropsJobNames || result.orphansDynamicEntries ? PLAN_NEEDS_APPROVAL : 0;
  },
};

function formatOf(args: ParsedArgs): Format {
  const format = args.string("format");
  if (args.boolean("json") && format !== undefined && format !== "json") throw new UsageError(`--json and --format ${format} disagree; pass one of them.`);
  if (args.boolean("json")) return "json";
  if (format === undefined) return "text";
  const known = FORMATS.find((candidate) => candidate === format);
  if (known === undefined) throw new UsageError(`--format must be one of ${FORMATS.join(", ")} (got ${JSON.stringify(format)}).`);
  return known;
}

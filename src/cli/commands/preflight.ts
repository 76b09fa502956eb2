import { relative } from "node:path";
import type { CronledgerConfig } from "../../config.js";
import type { ScheduleProblem } from "../../errors.js";
import { CronledgerError } from "../../errors.js";
import { validateSchedule } from "../../schedule/validate.js";
import { preflightDocument, preflightFailureDocument } from "../../wire/commands.js";
import { UsageError, type ParsedArgs } from "../args.js";
import { CONFIG_OPTION, JSON_OPTION, type CliIO, type Command } from "../command.js";
import { locateEntries, type SourceLocation } from "../entry-locations.js";
import { plural } from "../format.js";
import { loadConfig, requireConfigFile } from "../load-config.js";

type Format = "text" | "json" | "github";
const FORMATS: readonly Format[] = ["text", "json", "github"];

export const preflight: Command = {
  name: "preflight",
  summary: "check the config and schedule without touching any database (for CI)",
  details:
    "Loads the config file, validates every schedule entry and reports every problem at once, each with its code and\n" +
    "position. Exit status 1 when there are errors, 0 when there are none (warnings such as never_matches do not fail).",
  options: [
    CONFIG_OPTION,
    JSON_OPTION,
    { name: "format", type: "string", value: "<text|json|github>", description: "output format; github prints ::error / ::warning annotations" },
  ],
  async run(args, io) {
    const format = formatOf(args);
    const file = requireConfigFile(args, io);
    const shownFile = relative(io.cwd, file) || file;
    let checked: CheckedConfig;
    try {
      checked = await checkConfigFile(file, io);
    } catch (error) {
      // CI reads the annotation or the JSON, so a config that does not load is reported there too.
      if (format === "text" || !(error instanceof CronledgerError)) throw error;
      if (format === "json") io.stdout(JSON.stringify(preflightFailureDocument(shownFile, error), null, 2));
      else io.stdout(annotation("error", { file: shownFile }, `cronledger ${error.code}`, error.message));
      return 1;
    }
    const { located, summary } = checked;
    if (format === "json") io.stdout(JSON.stringify(preflightDocument(shownFile, summary.entries, located), null, 2));
    else if (format === "github") printGithub(io, shownFile, located, summary);
    else printText(io, located, summary);
    return summary.errors > 0 ? 1 : 0;
  },
};

/** A config file loaded and checked as `cronledger preflight` checks it: its problems with where each entry is written. */
export interface CheckedConfig {
  readonly config: CronledgerConfig;
  readonly located: readonly LocatedProblem[];
  readonly summary: Summary;
}

/** Loads `file` and runs every preflight check on its schedule; throws when the config does not load. */
export async function checkConfigFile(file: string, io: CliIO): Promise<CheckedConfig> {
  const shownFile = relative(io.cwd, file) || file;
  const config = await loadConfig(file);
  const entries = config.schedule?.length ?? 0;
  const problems = validateSchedule(config.schedule ?? [], config.jobs, { namespace: config.namespace, maxPayloadBytes: config.maxPayloadBytes });
  const errors = problems.filter((problem) => problem.severity === "error").length;
  const summary = { config: shownFile, entries, errors, warnings: problems.length - errors };
  const locations = problems.length > 0 ? await locateEntries(file, entries) : undefined;
  const located: LocatedProblem[] = problems.map((problem) => {
    const location = locations?.[problem.index];
    return location === undefined ? problem : { ...problem, location: { ...location, file: relative(io.cwd, location.file) || location.file } };
  });
  return { config, located, summary };
}

function formatOf(args: ParsedArgs): Format {
  const format = args.string("format");
  if (args.boolean("json") && format !== undefined && format !== "json") {
    throw new UsageError(`--json and --format ${format} disagree; pass one of them.`);
  }
  if (args.boolean("json")) return "json";
  if (format === undefined) return "text";
  const known = FORMATS.find((candidate) => candidate === format);
  if (known === undefined) throw new UsageError(`--format must be one of ${FORMATS.join(", ")} (got ${JSON.stringify(format)}).`);
  return known;
}

/** A problem with where its entry is written, when the source could be read. */
export type LocatedProblem = ScheduleProblem & { readonly location?: SourceLocation };

export interface Summary {
  readonly config: string;
  readonly entries: number;
  readonly errors: number;
  readonly warnings: number;
}

export function verdict(summary: Summary): string {
  const counts = `${plural(summary.errors, "error")}, ${plural(summary.warnings, "warning")}`;
  if (summary.errors > 0) return `cronledger preflight failed: ${counts} in ${plural(summary.entries, "schedule entry", "schedule entries")} of ${summary.config}.`;
  return `cronledger preflight passed: ${plural(summary.entries, "schedule entry", "schedule entries")} in ${summary.config}, ${counts}.`;
}

export function printText(io: CliIO, problems: readonly LocatedProblem[], summary: Summary): void {
  for (const line of problemLines(problems)) io.stdout(line);
  io.stdout(verdict(summary));
}

/** Each problem on a line: severity, code, message and where its entry is written. */
export function problemLines(problems: readonly LocatedProblem[]): string[] {
  return problems.map((problem) => {
    const where = problem.location === undefined ? "" : ` (${problem.location.file}:${problem.location.line}:${problem.location.column})`;
    return `${problem.severity} [${problem.code}] ${problem.message}${where}`;
  });
}

export function printGithub(io: CliIO, configFile: string, problems: readonly LocatedProblem[], summary: Summary): void {
  for (const problem of problems) {
    io.stdout(annotation(problem.severity, problem.location ?? { file: configFile }, `cronledger ${problem.code} in schedule[${problem.index}]`, problem.message));
  }
  io.stdout(verdict(summary));
}

/** A GitHub Actions workflow command; its properties and message use the runner's own escaping. */
export function annotation(severity: "error" | "warning", where: Partial<SourceLocation> & { file: string }, title: string, message: string): string {
  const escapeData = (text: string) => text.replace(/%/g, "%25").replace(/\r/g, "%0D").replace(/\n/g, "%0A");
  const escapeProperty = (text: string) => escapeData(text).replace(/:/g, "%3A").replace(/,/g, "%2C");
  const position = where.line === undefined ? "" : `,line=${where.line},col=${where.column ?? 1}`;
  return `::${severity} file=${escapeProperty(where.file)}${position},title=${escapeProperty(title)}::${escapeData(message)}`;
}

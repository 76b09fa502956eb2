import type { Command } from "./command.js";

export function commandHelp(command: Command): string {
  const options = [
    ...command.options,
    { name: "verbose", type: "boolean" as const, value: undefined, description: "on failure, also print the full error and its stack; print debug log lines (or set DEBUG=cronledger)" },
    { name: "help", type: "boolean" as const, value: undefined, description: "show this help" },
  ];
  const flags = options.map((option) => `${"short" in option && option.short ? `-${option.short}, ` : ""}--${option.name}${option.type === "string" ? ` ${option.value ?? "<value>"}` : ""}`);
  const width = Math.max(...flags.map((flag) => flag.length));
  return [
    `Usage: cronledger ${command.name}${command.argument ? ` ${command.argument.name}` : ""} [options]`,
    "",
    `${command.summary[0]?.toUpperCase() ?? ""}${command.summary.slice(1)}.`,
    ...(command.details ? ["", command.details] : []),
    "",
    ...(command.argument ? ["Arguments:", `  ${command.argument.name.padEnd(width)}  ${command.argument.description}`, ""] : []),
    "Options:",
    ...options.map((option, index) => `  ${(flags[index] ?? "").padEnd(width)}  ${option.description}`),
  ].join("\n");
}

export function mainHelp(commands: readonly Command[], version: string): string {
  const width = Math.max(...commands.map((command) => command.name.length));
  return [
    `cronledger ${version}: durable PostgreSQL-backed jobs and cron schedules that fire exactly once per slot.`,
    "",
    "Usage: cronledger <command> [options]",
    "",
    "Commands:",
    ...commands.map((command) => `  ${command.name.padEnd(width)}  ${command.summary}`),
    "",
    "Run `cronledger <command> --help` for a command's options. The database is the config's `database`,",
    "else DATABASE_URL, else the embedded PGlite database in ./.cronledger (one process only).",
    "",
    "Deploy flow: `cronledger preflight` in CI (no database needed) and `cronledger plan` against the live database (read-only),\n" +
      "`cronledger migrate` at deploy, then `cronledger worker`.",
  ].join("\n");
}

import { readFileSync } from "node:fs";
import { redact, redactError } from "../redact.js";
import { describeDatabaseError, diagnoseDatabaseError } from "../db/diagnose.js";
import { CronledgerError } from "../errors.js";
import { closest } from "../suggest.js";
import { cliErrorDocument, type CliFailure } from "../wire/commands.js";
import { parseArgs, UsageError } from "./args.js";
import type { CliIO, Command } from "./command.js";
import { backfill } from "./commands/backfill.js";
import { cancel } from "./commands/cancel.js";
import { unquarantine } from "./commands/unquarantine.js";
import { failures } from "./commands/failures.js";
import { migrate } from "./commands/migrate.js";
import { pause, resume } from "./commands/pause.js";
import { schedules } from "./commands/schedules.js";
import { next } from "./commands/next.js";
import { plan } from "./commands/plan.js";
import { trigger } from "./commands/trigger.js";
import { preflight } from "./commands/preflight.js";
import { status } from "./commands/status.js";
import { tick } from "./commands/tick.js";
import { worker } from "./commands/worker.js";
import { commandHelp, mainHelp } from "./help.js";

export const COMMANDS: readonly Command[] = [preflight, migrate, worker, status, failures, cancel, unquarantine, pause, resume, trigger, backfill, tick, next, plan, schedules];

/** How long the process may linger after a command finished, e.g. on a pool a config file opened, before it is ended. */
const EXIT_GRACE_MS = 2_000;

/** Shows the stack trace and the full error of a failure, and debug log lines. */
const VERBOSE_FLAG = "--verbose";

/** DEBUG=1, DEBUG=true, DEBUG=* or a DEBUG list naming cronledger, as the `debug` package reads it. */
function debugRequested(env: NodeJS.ProcessEnv): boolean {
  const value = env.DEBUG?.trim() ?? "";
  return value === "1" || value === "true" || value.split(/[\s,]+/).some((name) => name === "*" || name.startsWith("cronledger"));
}

function version(): string {
  const manifest = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version?: string };
  return manifest.version ?? "unknown";
}

/**
 * Runs one CLI invocation and resolves to its exit status: 0 success, 1 the
 * command found problems or failed, 2 the command line itself is wrong.
 */
export async function main(argv: readonly string[], io: CliIO): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    const topic = name === "help" ? COMMANDS.find((command) => command.name === rest[0]) : undefined;
    const text = topic ? commandHelp(topic) : mainHelp(COMMANDS, version());
    if (name !== undefined) {
      io.stdout(text);
      return 0;
    }
    io.stderr(text);
    return 2;
  }
  if (name === "--version" || name === "-v") {
    io.stdout(version());
    return 0;
  }
  const verbose = rest.includes(VERBOSE_FLAG) || debugRequested(io.env);
  try {
    const command = COMMANDS.find((candidate) => candidate.name === name);
    if (command === undefined) {
      const hint = closest(name, COMMANDS.map((candidate) => candidate.name));
      throw new UsageError(`Unknown command ${JSON.stringify(name)}.${hint ? ` Did you mean \`cronledger ${hint}\`?` : ""} Run \`cronledger --help\` for the list.`);
    }
    const args = parseArgs(rest.filter((arg) => arg !== VERBOSE_FLAG), command.options, command.name, command.argument?.name, command.argument?.many);
    if (args.help) {
      io.stdout(commandHelp(command));
      return 0;
    }
    return await command.run(args, { ...io, verbose });
  } catch (error) {
    const failure = describeFailure(error);
    // A script that asked for JSON reads stdout: it gets the error as a document there, the person watching the line on stderr.
    if (jsonRequested(rest)) io.stdout(JSON.stringify(cliErrorDocument(failure), null, 2));
    if (error instanceof UsageError) {
      io.stderr(`error: ${failure.message}`);
      return 2;
    }
    io.stderr(failure.line);
    // The stack and the statement drizzle wrapped the cause in are for whoever asks: --verbose or DEBUG.
    if (verbose && error instanceof Error) io.stderr(redactError(error) + (error.stack ? `\n${error.stack.split("\n").slice(1).join("\n")}` : ""));
    return 1;
  }
}

/** `--json`, `--format json` or `--format=json` among a command's arguments. */
function jsonRequested(args: readonly string[]): boolean {
  return args.some((arg, index) => arg === "--json" || arg === "--format=json" || (arg === "--format" && args[index + 1] === "json"));
}

/** A failed command's code, message and one line, redacted. */
function describeFailure(error: unknown): CliFailure {
  if (error instanceof UsageError) return { code: error.code, message: redact(error.message), line: redact(`error: ${error.message}`), exitCode: 2 };
  const diagnosis = diagnoseDatabaseError(error);
  if (diagnosis) return { code: diagnosis.problem, message: redact(diagnosis.message), line: redact(errorLine(error)), exitCode: 1 };
  if (error instanceof CronledgerError) return { code: error.code, message: redact(error.message), line: redact(errorLine(error)), exitCode: 1 };
  return { code: "internal_error", message: redact(describeDatabaseError(error)), line: redact(errorLine(error)), exitCode: 1 };
}

/**
 * The one line a failed command prints: a database problem by its cause and
 * fix (connection refused at host:port, authentication failed for user X,
 * database "Y" does not exist, ...), cronledger's own errors by code and
 * message, anything else without the SQL statement drizzle wraps around it.
 */
function errorLine(error: unknown): string {
  const diagnosis = diagnoseDatabaseError(error);
  if (diagnosis) return `error [${diagnosis.problem}]: ${diagnosis.message}`;
  if (error instanceof CronledgerError) return `error [${error.code}]: ${error.message}`;
  return `error: ${describeDatabaseError(error)}`;
}

/** The `cronledger` binary: process arguments and streams, and an exit that does not wait on stray handles. */
export async function run(): Promise<void> {
  // A reader that stops early (`| head`) closes the pipe: stop writing, as other Unix tools do, instead of crashing.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(process.exitCode ?? 0);
    throw error;
  });
  const code = await main(process.argv.slice(2), {
    cwd: process.cwd(),
    env: process.env,
    stdout: (text) => process.stdout.write(`${text}\n`),
    stderr: (text) => process.stderr.write(`${text}\n`),
  });
  process.exitCode = code;
  // Unref'd: a clean run exits at once; only a handle left open by user code makes this fire.
  setTimeout(() => process.exit(code), EXIT_GRACE_MS).unref();
}

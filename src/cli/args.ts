import type { z } from "zod";
import { UsageError } from "../errors.js";

export { UsageError };
import { closest } from "../suggest.js";

export interface OptionSpec {
  /** Long name without the dashes. */
  readonly name: string;
  readonly type: "string" | "boolean";
  /** Placeholder shown in help for string options, e.g. "<file>". */
  readonly value?: string;
  readonly description: string;
  /** A one-letter alias, e.g. "n" for `-n 10`. */
  readonly short?: string;
}

export interface ParsedArgs {
  readonly help: boolean;
  string(name: string): string | undefined;
  boolean(name: string): boolean;
  /** The command's one argument (`cronledger cancel <id>`), when it takes one. */
  readonly argument?: string | undefined;
  /** Every argument, for a command that takes several (`cronledger next [KEY...]`). */
  readonly arguments: readonly string[];
}

/**
 * Parses `--name value`, `--name=value`, boolean `--name`, and `-h`/`--help`.
 * Anything else (an unknown flag, a stray argument, a missing value) is a
 * UsageError naming the command, so the user never gets a silently ignored typo.
 */
export function parseArgs(argv: readonly string[], specs: readonly OptionSpec[], command: string, argumentName?: string, many = false): ParsedArgs {
  const strings = new Map<string, string>();
  const booleans = new Set<string>();
  let help = false;
  const positional: string[] = [];
  for (let index = 0; index < argv.length; index++) {
    let arg = argv[index] ?? "";
    if (arg === "-h" || arg === "--help") {
      help = true;
      continue;
    }
    const short = /^-[a-z]$/i.test(arg) ? specs.find((candidate) => candidate.short === arg.slice(1)) : undefined;
    if (short !== undefined) arg = `--${short.name}`;
    if (!arg.startsWith("--") && argumentName !== undefined && (many || positional.length === 0)) {
      positional.push(arg);
      continue;
    }
    if (!arg.startsWith("--")) {
      throw new UsageError(`\`cronledger ${command}\` takes no argument ${JSON.stringify(arg)}; options start with --.`);
    }
    const equals = arg.indexOf("=");
    const name = arg.slice(2, equals === -1 ? undefined : equals);
    const spec = specs.find((candidate) => candidate.name === name);
    if (spec === undefined) {
      const hint = closest(name, [...specs.map((candidate) => candidate.name), "help", "verbose"]);
      throw new UsageError(
        `Unknown option --${name} for \`cronledger ${command}\`.${hint ? ` Did you mean --${hint}?` : ""} See \`cronledger ${command} --help\`.`,
      );
    }
    if (spec.type === "boolean") {
      if (equals !== -1) throw new UsageError(`--${name} is a switch and takes no value; write just --${name}.`);
      booleans.add(name);
      continue;
    }
    const value = equals === -1 ? argv[++index] : arg.slice(equals + 1);
    if (value === undefined || value === "" || (equals === -1 && value.startsWith("--"))) {
      throw new UsageError(`--${name} needs a value: --${name} ${spec.value ?? "<value>"}.`);
    }
    strings.set(name, value);
  }
  return {
    help,
    argument: positional[0],
    arguments: positional,
    string: (name) => strings.get(name),
    boolean: (name) => booleans.has(name),
  };
}

/** An ISO 8601 instant option as epoch ms (`now` for the host clock), or undefined when absent. */
export function instantOption(args: ParsedArgs, name: string): number | undefined {
  const raw = args.string(name);
  if (raw === undefined) return undefined;
  if (raw === "now") return Date.now();
  const ms = /^\d{4}-\d{2}-\d{2}/.test(raw) ? Date.parse(raw) : Number.NaN;
  if (!Number.isFinite(ms)) throw new UsageError(`--${name} must be an ISO 8601 instant such as 2026-03-29T00:00:00Z, or now (got ${JSON.stringify(raw)}).`);
  return ms;
}

/** A positive integer option, or undefined when absent. */
export function integerOption(args: ParsedArgs, name: string, min: number, max: number): number | undefined {
  const raw = args.string(name);
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new UsageError(`--${name} must be a whole number from ${min} to ${max} (got ${JSON.stringify(raw)}).`);
  }
  return value;
}

/**
 * A flag that sets an option (`--concurrency` sets the config's
 * `worker.concurrency`), checked by that option's own schema. `read` turns
 * the flag's text into the option's value (default: a number); `example`
 * ends the message of a bad value. Undefined when the flag is absent.
 */
export function optionFlag<T>(
  args: ParsedArgs,
  name: string,
  schema: z.ZodType<T | undefined>,
  how: { readonly read?: (raw: string) => unknown; readonly example?: string } = {},
): T | undefined {
  const raw = args.string(name);
  if (raw === undefined) return undefined;
  const read = how.read ?? ((text: string) => (text.trim() === "" ? Number.NaN : Number(text)));
  const parsed = schema.safeParse(read(raw));
  if (!parsed.success || parsed.data === undefined) {
    const problem = parsed.error?.issues[0]?.message ?? "needs a value";
    throw new UsageError(`--${name} ${problem} (got ${JSON.stringify(raw)})${how.example === undefined ? "" : `, e.g. ${how.example}`}.`);
  }
  return parsed.data;
}

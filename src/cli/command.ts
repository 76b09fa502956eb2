import { formatLogLine, type Logger } from "../log.js";
import type { OptionSpec, ParsedArgs } from "./args.js";

/** Where a command reads its environment and writes its output; tests and the binary pass different ones. */
export interface CliIO {
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
  stdout(text: string): void;
  stderr(text: string): void;
  /** --verbose or DEBUG: debug log lines, and a failure's stack and full error. */
  readonly verbose?: boolean;
}

export interface Command {
  readonly name: string;
  /** One line for the command list. */
  readonly summary: string;
  /** Further paragraphs for `cronledger <name> --help`. */
  readonly details?: string;
  readonly options: readonly OptionSpec[];
  /** The one argument it takes besides options, e.g. `<id>`; none when unset. */
  readonly argument?: { readonly name: string; readonly description: string; /** Takes any number of them. */ readonly many?: boolean };
  /** Resolves to the exit status. */
  run(args: ParsedArgs, io: CliIO): Promise<number>;
}

export const CONFIG_OPTION: OptionSpec = {
  name: "config",
  type: "string",
  value: "<file>",
  description: "config file default-exporting defineConfig(...) (default: cronledger.config.ts in the current directory)",
};

export const JSON_OPTION: OptionSpec = { name: "json", type: "boolean", description: "print machine-readable JSON on stdout" };

/**
 * cronledger's log lines go to stderr under the CLI, so that stdout carries
 * only the command's result (and stays parseable with --json).
 */
export function stderrLogger(io: CliIO): Logger {
  const line = (message: string, fields?: Record<string, unknown>) => io.stderr(formatLogLine(message, fields));
  return { debug: io.verbose ? line : () => {}, info: line, warn: line, error: line };
}

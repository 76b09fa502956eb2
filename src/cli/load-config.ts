import { existsSync } from "node:fs";
import { extname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { createJiti } from "jiti";
import type { CronledgerConfig } from "../config.js";
import { ConfigError } from "../errors.js";
import { jobRegistry } from "../jobs/registry.js";
import { parseConfig } from "../options.js";
import type { ParsedArgs } from "./args.js";
import type { CliIO } from "./command.js";

export const DEFAULT_CONFIG_FILES = ["cronledger.config.ts", "cronledger.config.mts", "cronledger.config.js", "cronledger.config.mjs"] as const;
const TYPESCRIPT = new Set([".ts", ".mts", ".cts"]);
const JAVASCRIPT = new Set([".js", ".mjs", ".cjs"]);

/**
 * The config file a command should read: --config if given (it must exist),
 * else the first default name present in the working directory, else
 * undefined (the caller decides whether that is an error).
 */
export function findConfigFile(args: ParsedArgs, io: CliIO): string | undefined {
  const explicit = args.string("config");
  if (explicit !== undefined) {
    const file = resolve(io.cwd, explicit);
    if (!existsSync(file)) throw new ConfigError(`Config file ${explicit} does not exist (looked at ${file}); fix the --config path.`);
    return file;
  }
  return DEFAULT_CONFIG_FILES.map((name) => resolve(io.cwd, name)).find((file) => existsSync(file));
}

export function requireConfigFile(args: ParsedArgs, io: CliIO): string {
  const file = findConfigFile(args, io);
  if (file === undefined) {
    throw new ConfigError(
      `No config file: create cronledger.config.ts in ${io.cwd} with \`export default defineConfig({ jobs, schedule })\` ` +
        "(defineConfig comes from \"cronledger\"), or pass --config <file>.",
    );
  }
  return file;
}

/**
 * Imports a config file and checks its shape. JavaScript is imported
 * natively. TypeScript goes through jiti, in-process: Node 20 cannot strip
 * types itself, and jiti needs no loader flag or global hook (tsx's API
 * registers a process-wide loader), is a runtime dependency rather than a
 * dev tool, and with `tryNative` transforms only the TypeScript files, so the
 * config's `import ... from "cronledger"` gets the very module instance the
 * CLI runs instead of a transpiled copy.
 */
export async function loadConfig(file: string): Promise<CronledgerConfig> {
  const extension = extname(file);
  let loaded: unknown;
  try {
    if (TYPESCRIPT.has(extension)) {
      const jiti = createJiti(import.meta.url, { tryNative: true, interopDefault: true });
      loaded = await jiti.import(file, { default: true });
    } else if (JAVASCRIPT.has(extension)) {
      const module = (await import(pathToFileURL(file).href)) as { default?: unknown };
      loaded = module.default;
    } else {
      throw new ConfigError(`Config file ${file} has extension "${extension}": use .ts, .mts, .js or .mjs.`);
    }
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    const reason = error instanceof Error ? error.message : String(error);
    throw new ConfigError(`Could not load config file ${file}: ${reason}`);
  }
  return checkConfig(loaded, file);
}

/** The config's shape, checked whole by the config file's schema (src/options.ts); the jobs' registry rules by jobRegistry. */
function checkConfig(value: unknown, file: string): CronledgerConfig {
  const config = parseConfig(value, file);
  try {
    jobRegistry(config.jobs, []);
  } catch (error) {
    throw new ConfigError(`Config file ${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return value as CronledgerConfig;
}

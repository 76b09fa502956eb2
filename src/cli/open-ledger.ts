import type { CronledgerConfig } from "../config.js";
import { createCronledger, type Cronledger } from "../cronledger.js";
import { ensureSchema } from "../db/schema-check.js";
import type { ParsedArgs } from "./args.js";
import { stderrLogger, type CliIO } from "./command.js";
import { findConfigFile, loadConfig, requireConfigFile } from "./load-config.js";

/**
 * What a command needs from the config: `schedule` loads and validates jobs
 * and entries (a broken schedule refuses to start); `database` only picks the
 * database and namespace, so migrations and failure listings still work while
 * the schedule is being fixed. Without a config file, DATABASE_URL (else the
 * embedded database) is used.
 */
export type LedgerNeeds = "schedule" | "optional schedule" | "database";

export async function openLedger(args: ParsedArgs, io: CliIO, needs: LedgerNeeds): Promise<{ ledger: Cronledger; config: CronledgerConfig | undefined }> {
  const file = needs === "schedule" ? requireConfigFile(args, io) : findConfigFile(args, io);
  const config = file === undefined ? undefined : await loadConfig(file);
  const logger = config?.logger ?? stderrLogger(io);
  const ledger =
    config === undefined || needs === "database"
      ? createCronledger({ database: config?.database, namespace: config?.namespace, logger })
      : createCronledger({ ...config, logger });
  return { ledger, config };
}

/** Runs `body` with an open ledger and always closes it, so the process can exit on its own. */
export async function withLedger(
  args: ParsedArgs,
  io: CliIO,
  needs: LedgerNeeds,
  body: (ledger: Cronledger, config: CronledgerConfig | undefined) => Promise<number>,
): Promise<number> {
  const { ledger, config } = await openLedger(args, io, needs);
  try {
    return await body(ledger, config);
  } finally {
    await ledger.close();
  }
}

/**
 * Commands other than migrate and preflight need the tables: the schema
 * check (src/db/schema-check.ts) throws a MigrationRequiredError naming the
 * command to run, before the command reads or writes anything.
 */
export async function assertMigrated(ledger: Cronledger): Promise<void> {
  await ensureSchema(ledger.database);
}

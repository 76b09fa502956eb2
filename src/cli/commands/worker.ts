import { startAdminServer } from "../../admin/server.js";
import type { CronledgerConfig } from "../../config.js";
import type { Cronledger } from "../../cronledger.js";
import { integerOption, UsageError, type ParsedArgs } from "../args.js";
import { CONFIG_OPTION, type CliIO, type Command } from "../command.js";
import { plural } from "../format.js";
import { assertMigrated, openLedger } from "../open-ledger.js";

export const worker: Command = {
  name: "worker",
  summary: "run the scheduler ticker, workers, reaper and chores until SIGTERM/SIGINT",
  details:
    "Refuses to start on a broken schedule (run `cronledger preflight` to see why) or before `cronledger migrate`.\n" +
    "SIGTERM or Ctrl-C stops claiming, lets running jobs finish within the grace period and exits; a second signal\n" +
    "aborts the running jobs at once and returns them to the queue.",
  options: [
    CONFIG_OPTION,
    { name: "queues", type: "string", value: "<a,b>", description: "claim jobs only from these queues (default: the config's worker.queues, else every queue it knows)" },
    { name: "concurrency", type: "string", value: "<n>", description: "jobs run at once (default: the config's worker.concurrency, else 10)" },
    {
      name: "admin-port",
      type: "string",
      value: "<port>",
      description: "serve the admin API, Schedule page and /metrics on this port (token: CRONLEDGER_ADMIN_TOKEN or the config's admin.token)",
    },
  ],
  async run(args, io) {
    const concurrency = integerOption(args, "concurrency", 1, 10_000);
    const queues = queueList(args);
    const adminPort = integerOption(args, "admin-port", 0, 65_535);
    const { ledger, config } = await openLedger(args, io, "schedule");
    try {
      await assertMigrated(ledger);
      const settings = { concurrency: concurrency ?? config?.worker?.concurrency, queues: queues ?? config?.worker?.queues };
      await ledger.start({
        ...(settings.concurrency === undefined ? {} : { concurrency: settings.concurrency }),
        ...(settings.queues === undefined ? {} : { queues: settings.queues }),
      });
      await startAdmin(ledger, config, adminPort, io);
      io.stderr(
        `cronledger worker started: ${plural(ledger.entries.length, "schedule entry", "schedule entries")}, ${plural(ledger.jobs.size, "job")}` +
          `${settings.queues ? `, queues ${settings.queues.join(",")}` : ""}${settings.concurrency ? `, concurrency ${settings.concurrency}` : ""}. ` +
          "Ctrl-C or SIGTERM stops it gracefully.",
      );
    } catch (error) {
      await ledger.close();
      throw error;
    }
    // start() owns SIGTERM/SIGINT: it stops gracefully, closes the database and
    // then lets the signal end the process, so this command never returns.
    return new Promise<number>(() => {});
  },
};

/** The server lives as long as the process: the runtime's signal handling ends both. */
async function startAdmin(ledger: Cronledger, config: CronledgerConfig | undefined, portFlag: number | undefined, io: CliIO): Promise<void> {
  const port = portFlag ?? config?.admin?.port;
  if (port === undefined) return;
  const token = config?.admin?.token ?? (io.env.CRONLEDGER_ADMIN_TOKEN || undefined);
  const server = await startAdminServer(ledger, {
    port,
    ...(config?.admin?.host === undefined ? {} : { host: config.admin.host }),
    ...(token === undefined ? { allowUnauthenticatedLocalhost: true } : { token }),
  });
  io.stderr(`cronledger admin at ${server.url}/admin/scheduler${token === undefined ? " (no token: loopback only; set CRONLEDGER_ADMIN_TOKEN to require one)" : ""}`);
}

function queueList(args: ParsedArgs): string[] | undefined {
  const raw = args.string("queues");
  if (raw === undefined) return undefined;
  const queues = raw.split(",").map((queue) => queue.trim()).filter((queue) => queue !== "");
  if (queues.length === 0) throw new UsageError("--queues needs at least one queue name, e.g. --queues default,mail.");
  return queues;
}

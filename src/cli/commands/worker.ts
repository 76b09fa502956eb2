import { MIN_TOKEN_LENGTH } from "../../admin/handler.js";
import { startAdminServer, type AdminServer } from "../../admin/server.js";
import type { CronledgerConfig } from "../../config.js";
import type { Cronledger } from "../../cronledger.js";
import { ConfigError } from "../../errors.js";
import { adminBlockSchema, workerBlockSchema } from "../../options.js";
import { optionFlag } from "../args.js";
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
    {
      name: "admin-without-token",
      type: "boolean",
      description: "serve the admin API with no token, on 127.0.0.1 only (development)",
    },
  ],
  async run(args, io) {
    const concurrency = optionFlag(args, "concurrency", workerBlockSchema.shape.concurrency);
    const queues = optionFlag(args, "queues", workerBlockSchema.shape.queues, { read: queueList, example: "--queues default,mail" });
    const adminPort = optionFlag(args, "admin-port", adminBlockSchema.shape.port);
    const { ledger, config } = await openLedger(args, io, "schedule");
    let server: AdminServer | undefined;
    try {
      // Every setting is checked before the first write: a mistake stops the worker before it ticks, enqueues or claims.
      // The config's worker and admin sections were checked whole when it was loaded (src/options.ts).
      const workerSection = config?.worker;
      const admin = adminSettings(config, adminPort, args.boolean("admin-without-token"), io);
      await assertMigrated(ledger);
      const settings = { concurrency: concurrency ?? workerSection?.concurrency, queues: queues ?? workerSection?.queues };
      // Bound before the runtime starts, so a port in use stops the worker before it does anything.
      if (admin) server = await startAdmin(ledger, admin, io);
      await ledger.start({
        ...(settings.concurrency === undefined ? {} : { concurrency: settings.concurrency }),
        ...(settings.queues === undefined ? {} : { queues: settings.queues }),
      });
      io.stderr(
        `cronledger worker started: ${plural(ledger.entries.length, "schedule entry", "schedule entries")}, ${plural(ledger.jobs.size, "job")}` +
          `${settings.queues ? `, queues ${settings.queues.join(",")}` : ""}${settings.concurrency ? `, concurrency ${settings.concurrency}` : ""}. ` +
          "Ctrl-C or SIGTERM stops it gracefully.",
      );
      if (startedByNpm(io.env)) stopWhenOrphaned(io);
    } catch (error) {
      await server?.close();
      await ledger.close();
      throw error;
    }
    // start() owns SIGTERM/SIGINT: it stops gracefully, closes the database and
    // then lets the signal end the process, so this command never returns.
    return new Promise<number>(() => {});
  },
};

interface AdminSettings {
  readonly port: number;
  readonly host: string | undefined;
  readonly token: string | undefined;
}

/** Checked before the worker starts: an admin API without a token is served only when asked for explicitly, and a short token not at all. */
function adminSettings(config: CronledgerConfig | undefined, portFlag: number | undefined, withoutToken: boolean, io: CliIO): AdminSettings | undefined {
  const section = config?.admin;
  const port = portFlag ?? section?.port;
  if (port === undefined) return undefined;
  const fromConfig = section?.token;
  const token = fromConfig ?? (io.env.CRONLEDGER_ADMIN_TOKEN || undefined);
  if (token === undefined && !withoutToken) {
    throw new ConfigError(
      "The admin API needs a bearer token: set CRONLEDGER_ADMIN_TOKEN or the config's admin.token, " +
        "or pass --admin-without-token to serve it on 127.0.0.1 only, without one.",
    );
  }
  if (token !== undefined && token.length < MIN_TOKEN_LENGTH) {
    throw new ConfigError(
      `The admin token (${fromConfig === undefined ? "CRONLEDGER_ADMIN_TOKEN" : "the config's admin.token"}) is ${token.length} characters; ` +
        `it must be at least ${MIN_TOKEN_LENGTH}: generate one with \`openssl rand -hex 32\`.`,
    );
  }
  return { port, host: section?.host, token };
}

/** The server lives as long as the process: the runtime's signal handling ends both. */
async function startAdmin(ledger: Cronledger, admin: AdminSettings, io: CliIO): Promise<AdminServer> {
  const server = await startAdminServer(ledger, {
    port: admin.port,
    ...(admin.host === undefined ? {} : { host: admin.host }),
    ...(admin.token === undefined ? { allowUnauthenticatedLocalhost: true } : { token: admin.token }),
  });
  io.stderr(`cronledger admin at ${server.url}/admin/scheduler${admin.token === undefined ? " (no token: loopback only)" : ""}`);
  return server;
}

/** How often a worker started by npm looks for its parent: a stop is noticed within this much of npm's exit. */
const ORPHAN_POLL_MS = 500;

/** `npx cronledger worker`, `npm exec` and `npm run` set these in the command's environment. */
function startedByNpm(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env.npm_command || env.npm_execpath);
}

/**
 * npm 11 answers SIGTERM by passing it to the `sh -c` it runs the command in
 * and exiting; that shell (dash) dies without passing it on, so the worker
 * would run on as an orphan and, in a container, be SIGKILLed with its jobs
 * at the end of the grace period. A changed parent process means npm is gone:
 * the worker stops as on SIGTERM, by sending it to itself, so the runtime's
 * one graceful stop runs. Containers should run node_modules/.bin/cronledger
 * directly, which gets the signal itself (docs/operations.md).
 */
function stopWhenOrphaned(io: CliIO): void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    io.stderr(`cronledger worker: npm (its parent process ${parent}) exited without passing a signal on; stopping as on SIGTERM.`);
    process.kill(process.pid, "SIGTERM");
  }, ORPHAN_POLL_MS);
  timer.unref();
}

/** "a, b" as the queues it names; the schema says when there is none. */
function queueList(raw: string): string[] {
  return raw
    .split(",")
    .map((queue) => queue.trim())
    .filter((queue) => queue !== "");
}

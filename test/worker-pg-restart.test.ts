import { execFile, execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger, type Logger } from "../src/log.js";
import { freePort } from "./support/ports.js";
import { until } from "./support/worker-processes.js";

/**
 * A private, throwaway PostgreSQL cluster: restarting the shared server
 * would break every other test file running against it.
 */
function findBinDir(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).sort((a, b) => Number(b) - Number(a));
  return versions.map((version) => join(root, version, "bin")).find((dir) => existsSync(join(dir, "initdb")));
}

const BIN = findBinDir();
const canRunAsPostgres = (() => {
  try {
    execFileSync("id", ["-u", "postgres"], { stdio: "ignore" });
    return process.getuid?.() === 0;
  } catch {
    return false;
  }
})();

// Asynchronous, so the workers in this process keep running (and failing, and recovering) while the server restarts.
async function asPostgres(binary: string, args: readonly string[]): Promise<void> {
  await promisify(execFile)("runuser", ["-u", "postgres", "--", join(BIN ?? "", binary), ...args], { timeout: 60_000 });
}

describe("PostgreSQL restarted under load", () => {
  let dir: string;
  let dataDir: string;
  let url: string;
  let ledger: Cronledger | undefined;
  let probe: postgres.Sql;

  // The server log goes to a file: a server holding our stdout pipe open would hang pg_ctl's caller.
  const pgCtl = (...args: string[]) => asPostgres("pg_ctl", ["-D", dataDir, "-w", "-l", join(dir, "server.log"), ...args]);

  beforeAll(async () => {
    if (!BIN || !canRunAsPostgres) {
      throw new Error(
        "The restart test runs its own throwaway cluster: it needs PostgreSQL's initdb and pg_ctl " +
          "(/usr/lib/postgresql/<version>/bin, from Debian's postgresql package) and root, to run them as the postgres user.",
      );
    }
    dir = mkdtempSync(join(tmpdir(), "cronledger-pg-"));
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    chownSync(dir, uid, gid);
    dataDir = join(dir, "data");
    const port = await freePort();
    await asPostgres("initdb", ["-D", dataDir, "-A", "trust", "-U", "postgres", "--no-sync"]);
    await pgCtl("-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`, "start");
    url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    probe = postgres(url, { max: 1, onnotice: () => {} });
  });

  afterAll(async () => {
    await ledger?.close().catch(() => undefined);
    await probe?.end({ timeout: 1 }).catch(() => undefined);
    if (dataDir) {
      await pgCtl("-m", "immediate", "stop").catch(() => undefined);
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A count through a connection that rides out the restart: -1 while the server is away. */
  async function probeCount(strings: TemplateStringsArray, ...values: postgres.ParameterOrFragment<never>[]): Promise<number> {
    try {
      const [row] = await probe<{ n: number }[]>(strings, ...values);
      return row?.n ?? 0;
    } catch {
      return -1;
    }
  }

  it("completes every job and keeps the ticker firing after `pg_ctl restart`, with no operator action", async () => {
    const work = defineJob({ name: "load.work", run: () => new Promise<void>((resolve) => setTimeout(resolve, 5)) });
    const heartbeat = defineJob({ name: "load.every-second", run: () => {} });
    const problems: string[] = [];
    const logger: Logger = { ...silentLogger, warn: (message) => problems.push(message), error: (message) => problems.push(message) };
    ledger = createCronledger({
      database: { url, poolSize: 4 },
      jobs: [work, heartbeat],
      schedule: [{ job: heartbeat, cron: "* * * * * *" }],
      logger,
      metrics: false,
      lease: 3_000,
      // A claim whose reply was lost in the restart sits as running until reaped: reap often here.
      chores: { reapCron: "*/2 * * * * *" },
    });
    await ledger.migrate();
    const total = 4_000;
    await ledger.enqueueMany(Array.from({ length: total }, () => ({ job: work })));
    await ledger.start({ concurrency: 10, handleSignals: false, pollInterval: 200 });

    await until("some jobs are done", async () => (await probeCount`select count(*)::int as n from cronledger.jobs where job_name = 'load.work' and status = 'succeeded'`) >= 300);
    const before = await probeCount`select count(*)::int as n from cronledger.jobs where job_name = 'load.work' and status = 'succeeded'`;
    expect(before).toBeLessThan(total);
    await pgCtl("-m", "fast", "restart");
    const restartedAt = Date.now();

    await until(
      "every job succeeded",
      async () => (await probeCount`select count(*)::int as n from cronledger.jobs where job_name = 'load.work' and status = 'succeeded'`) === total,
      40_000,
    );
    await until(
      "the ticker fired a slot after the restart",
      async () =>
        (await probeCount`select count(*)::int as n from cronledger.jobs where job_name = 'load.every-second' and status = 'succeeded'
           and scheduled_for > ${new Date(restartedAt)}`) >= 2,
      20_000,
    );
    expect(await probeCount`select count(*)::int as n from cronledger.jobs where job_name = 'load.work' and status <> 'succeeded'`).toBe(0);
    // The restart was felt (failed statements were logged and retried), not slipped through between statements.
    expect(problems.length).toBeGreaterThan(0);
    await ledger.stop();
  });
});

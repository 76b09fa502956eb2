import { execFile, execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort } from "./ports.js";

/**
 * A private, throwaway PostgreSQL cluster, for tests that stop or restart
 * the server: doing that to the shared server would break every other test
 * file running against it.
 */
export interface PrivateCluster {
  readonly url: string;
  /** Runs `pg_ctl <args>` on the cluster, waiting for it (`-w`). */
  pgCtl(...args: string[]): Promise<void>;
  /** `pg_ctl stop` in the given mode (fast: connections are terminated). */
  stop(mode?: "fast" | "immediate"): Promise<void>;
  /** Starts it again on its own port (pg_ctl start forgets the options of the first start). */
  start(): Promise<void>;
  /** Stops the server at once and deletes its files. */
  destroy(): Promise<void>;
}

function findBinDir(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).sort((a, b) => Number(b) - Number(a));
  return versions.map((version) => join(root, version, "bin")).find((dir) => existsSync(join(dir, "initdb")));
}

function canRunAsPostgres(): boolean {
  try {
    execFileSync("id", ["-u", "postgres"], { stdio: "ignore" });
    return process.getuid?.() === 0;
  } catch {
    return false;
  }
}

/** initdb + start on a free port, as the postgres user; fails with what to install when that cannot be done. */
export async function startPrivateCluster(): Promise<PrivateCluster> {
  const bin = findBinDir();
  if (!bin || !canRunAsPostgres()) {
    throw new Error(
      "This test runs its own throwaway cluster: it needs PostgreSQL's initdb and pg_ctl " +
        "(/usr/lib/postgresql/<version>/bin, from Debian's postgresql package) and root, to run them as the postgres user.",
    );
  }
  // Asynchronous, so the code under test in this process keeps running (and failing, and recovering) meanwhile.
  const asPostgres = async (binary: string, args: readonly string[]) => {
    await promisify(execFile)("runuser", ["-u", "postgres", "--", join(bin, binary), ...args], { timeout: 60_000 });
  };
  const dir = mkdtempSync(join(tmpdir(), "cronledger-pg-"));
  const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
  chownSync(dir, uid, gid);
  const dataDir = join(dir, "data");
  const port = await freePort();
  // The server log goes to a file: a server holding our stdout pipe open would hang pg_ctl's caller.
  const pgCtl = (...args: string[]) => asPostgres("pg_ctl", ["-D", dataDir, "-w", "-l", join(dir, "server.log"), ...args]);
  await asPostgres("initdb", ["-D", dataDir, "-A", "trust", "-U", "postgres", "--no-sync"]);
  // Its own port and socket directory, always: a start without them would go for the shared server's 5432.
  const start = () => pgCtl("-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`, "start");
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    pgCtl,
    start,
    stop: (mode = "fast") => pgCtl("-m", mode, "stop"),
    async destroy() {
      await pgCtl("-m", "immediate", "stop").catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

import { execFile, execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort } from "./ports.js";

/**
 * A private, throwaway PostgreSQL cluster, for tests that stop or restart
 * the server, or need a standby or TLS: doing that to the shared server
 * would break every other test file running against it.
 */
export interface PrivateCluster {
  readonly url: string;
  readonly port: number;
  /** Runs `pg_ctl <args>` on the cluster, waiting for it (`-w`). */
  pgCtl(...args: string[]): Promise<void>;
  /** `pg_ctl stop` in the given mode (fast: connections are terminated). */
  stop(mode?: "fast" | "immediate"): Promise<void>;
  /** Starts it again on its own port (pg_ctl start forgets the options of the first start). */
  start(): Promise<void>;
  /** Stops the server at once and deletes its files. */
  destroy(): Promise<void>;
}

export interface ClusterOptions {
  /** A self-signed certificate and `ssl = on`: clients may connect with sslmode=require. */
  readonly tls?: boolean;
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

/** Runs a PostgreSQL binary as the postgres user; asynchronous, so the code under test in this process keeps running meanwhile. */
function asPostgres(bin: string) {
  return async (binary: string, args: readonly string[]) => {
    await promisify(execFile)("runuser", ["-u", "postgres", "--", join(bin, binary), ...args], { timeout: 60_000 });
  };
}

function requireBinaries(): string {
  const bin = findBinDir();
  if (!bin || !canRunAsPostgres()) {
    throw new Error(
      "This test runs its own throwaway cluster: it needs PostgreSQL's initdb and pg_ctl " +
        "(/usr/lib/postgresql/<version>/bin, from Debian's postgresql package) and root, to run them as the postgres user.",
    );
  }
  return bin;
}

/** A directory owned by the postgres user, for one cluster's data, socket and log. */
function clusterDirectory(): string {
  const dir = mkdtempSync(join(tmpdir(), "cronledger-pg-"));
  const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
  chownSync(dir, uid, gid);
  return dir;
}

/** Starts the data directory in `dir` on `port`, and hands back the cluster. */
async function run(bin: string, dir: string, port: number, settings: readonly string[]): Promise<PrivateCluster> {
  const dataDir = join(dir, "data");
  // The server log goes to a file: a server holding our stdout pipe open would hang pg_ctl's caller.
  const pgCtl = (...args: string[]) => asPostgres(bin)("pg_ctl", ["-D", dataDir, "-w", "-l", join(dir, "server.log"), ...args]);
  // Its own port and socket directory, always: a start without them would go for the shared server's 5432.
  const options = [`-p ${port}`, `-k ${dir}`, "-c listen_addresses=127.0.0.1", "-c fsync=off", ...settings.map((setting) => `-c ${setting}`)].join(" ");
  const start = () => pgCtl("-o", options, "start");
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    pgCtl,
    start,
    stop: (mode = "fast") => pgCtl("-m", mode, "stop"),
    async destroy() {
      await pgCtl("-m", "immediate", "stop").catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** initdb + start on a free port, as the postgres user; fails with what to install when that cannot be done. */
export async function startPrivateCluster(options: ClusterOptions = {}): Promise<PrivateCluster> {
  const bin = requireBinaries();
  const dir = clusterDirectory();
  await asPostgres(bin)("initdb", ["-D", join(dir, "data"), "-A", "trust", "-U", "postgres", "--no-sync"]);
  const settings: string[] = [];
  if (options.tls) {
    const [cert, key] = [join(dir, "server.crt"), join(dir, "server.key")];
    execFileSync("runuser", ["-u", "postgres", "--", "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout", key, "-out", cert], {
      stdio: "ignore",
    });
    settings.push("ssl=on", `ssl_cert_file=${cert}`, `ssl_key_file=${key}`);
  }
  return run(bin, dir, await freePort(), settings);
}

/**
 * A hot standby of `primary`, streaming from it (pg_basebackup -R), on a port
 * of its own; `through`: the port of a proxy in front of the primary, which
 * the standby then streams through. `promote()` makes it a primary (pg_ctl
 * promote, waiting for it).
 */
export async function startStandby(primary: PrivateCluster, through = primary.port): Promise<PrivateCluster & { promote(): Promise<void> }> {
  const bin = requireBinaries();
  const dir = clusterDirectory();
  await asPostgres(bin)("pg_basebackup", ["-h", "127.0.0.1", "-p", String(through), "-U", "postgres", "-D", join(dir, "data"), "-R", "-X", "stream", "--no-sync"]);
  const standby = await run(bin, dir, await freePort(), ["hot_standby=on"]);
  return { ...standby, promote: () => standby.pgCtl("promote") };
}

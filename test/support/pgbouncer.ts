// A private PgBouncer in transaction mode in front of the test (or bench) PostgreSQL.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { accessSync, chmodSync, constants, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { canConnect } from "./postgres-url.js";
import { freePort } from "./ports.js";

const SEARCH_PATH = ["/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin"];

function findBinary(): string | undefined {
  const dirs = [...(process.env.PATH ?? "").split(":").filter(Boolean), ...SEARCH_PATH];
  for (const dir of dirs) {
    try {
      accessSync(join(dir, "pgbouncer"), constants.X_OK);
      return join(dir, "pgbouncer");
    } catch {
      // not here
    }
  }
  return undefined;
}

const isRoot = () => process.getuid?.() === 0;

/**
 * The pgbouncer binary; on a Debian-like machine where this runs as root, installs
 * Debian's package when it is missing (one log line), else says what to install.
 */
export function pgbouncerBinary(log: (line: string) => void = (line) => console.log(line)): string {
  const found = findBinary();
  if (found !== undefined) return found;
  const hasApt = spawnSync("apt-get", ["--version"], { stdio: "ignore" }).status === 0;
  if (!isRoot() || !hasApt) {
    throw new Error(
      "The tests through PgBouncer need Debian's pgbouncer package and it is not installed: run `sudo apt-get install -y pgbouncer` " +
        "(or install PgBouncer 1.18+ so that `pgbouncer` is on PATH), then run the tests again.",
    );
  }
  log("pgbouncer is missing: installing Debian's pgbouncer package with apt-get (the tests through PgBouncer need it)");
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const lock = ["-o", "DPkg::Lock::Timeout=300"];
  execFileSync("apt-get", [...lock, "update", "-qq"], { env, stdio: "ignore" });
  execFileSync("apt-get", [...lock, "install", "-y", "-qq", "pgbouncer"], { env, stdio: "ignore" });
  const installed = findBinary();
  if (installed === undefined) throw new Error("apt-get installed pgbouncer but no pgbouncer binary was found in /usr/sbin or on PATH.");
  return installed;
}

export interface PgBouncer {
  /** The bouncer's URL for the server URL's user and database; swap the database name as for the server. */
  readonly url: string;
  /** Server connections per database and user (PgBouncer's default_pool_size). */
  readonly poolSize: number;
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  /** default_pool_size; default 6, small because the test server's max_connections is shared. */
  readonly poolSize?: number;
  readonly log?: (line: string) => void;
}

/**
 * Starts PgBouncer on a free port of 127.0.0.1 in front of `serverUrl`
 * (any database name, same user), `pool_mode = transaction`, trust auth
 * toward its clients and the server URL's credentials toward the server.
 * Its config lives in a temporary directory removed by stop().
 */
export async function startPgBouncer(serverUrl: string, options: PgBouncerOptions = {}): Promise<PgBouncer> {
  const binary = pgbouncerBinary(options.log);
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username || "postgres");
  const password = decodeURIComponent(server.password);
  const poolSize = options.poolSize ?? 6;
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "cronledger-pgbouncer-"));
  // PgBouncer refuses to run as root; as root it is started as `nobody`, who must read its config.
  chmodSync(dir, 0o755);
  const quote = (value: string) => value.replace(/'/g, "''");
  const target = [
    `host=${server.hostname.replace(/^\[|\]$/g, "")}`,
    `port=${server.port || "5432"}`,
    `user='${quote(user)}'`,
    ...(password ? [`password='${quote(password)}'`] : []),
  ].join(" ");
  writeFileSync(join(dir, "users.txt"), `"${user.replace(/"/g, '""')}" ""\n`, { mode: 0o644 });
  writeFileSync(
    join(dir, "pgbouncer.ini"),
    [
      "[databases]",
      `* = ${target}`,
      "[pgbouncer]",
      "listen_addr = 127.0.0.1",
      `listen_port = ${port}`,
      "unix_socket_dir =",
      "auth_type = trust",
      `auth_file = ${join(dir, "users.txt")}`,
      "pool_mode = transaction",
      `default_pool_size = ${poolSize}`,
      "max_client_conn = 1000",
      "server_idle_timeout = 30",
      // Hand out server connections in turn rather than the last one freed, so state a client leaves
      // on one session (a lock, a prepared statement, a LISTEN) is seldom found again by luck.
      "server_round_robin = 1",
      "log_connections = 0",
      "log_disconnections = 0",
      "",
    ].join("\n"),
    { mode: 0o644 },
  );
  const child = spawn(binary, [...(isRoot() ? ["-u", "nobody"] : []), join(dir, "pgbouncer.ini")], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
  const exited = once(child, "exit");
  const url = new URL(serverUrl);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 15_000;
  while (!(await canConnect(url.toString()))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`pgbouncer did not start on port ${port}: ${stderr.trim() || "no output"}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { url: url.toString(), poolSize, stop };
}

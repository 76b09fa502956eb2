import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { REPO_ROOT } from "./child.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/slot-replica.ts", import.meta.url));

/** One replica process of test/fixtures/slot-replica.ts: send it a command, read its one-line JSON answer. */
export interface SlotReplica {
  readonly child: ChildProcess;
  /** The admin API's base URL, when started with `admin: true`. */
  readonly adminUrl: string | undefined;
  send<T>(command: string, timeoutMs?: number): Promise<T>;
  /** Asks it to exit and waits for it. */
  exit(): Promise<void>;
}

export async function startSlotReplica(options: { databaseUrl: string; version?: number; admin?: boolean; env?: NodeJS.ProcessEnv; fixture?: string }): Promise<SlotReplica> {
  const child = spawn(process.execPath, ["--import", "tsx", options.fixture ?? FIXTURE], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...options.env, DATABASE_URL: options.databaseUrl, VERSION: String(options.version ?? 1), ADMIN: options.admin ? "1" : "0" },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  createInterface({ input: child.stdout! }).on("line", (line) => {
    const next = waiting.shift();
    if (next) next(line);
    else lines.push(line);
  });
  const exited = new Promise<void>((resolve) => child.on("close", () => resolve()));
  const nextLine = (timeoutMs: number) =>
    new Promise<string>((resolve, reject) => {
      const ready = lines.shift();
      if (ready !== undefined) return resolve(ready);
      const timer = setTimeout(() => reject(new Error(`replica answered nothing within ${timeoutMs} ms; stderr:\n${stderr}`)), timeoutMs);
      waiting.push((line) => {
        clearTimeout(timer);
        resolve(line);
      });
      void exited.then(() => reject(new Error(`replica exited; stderr:\n${stderr}`)));
    });
  let adminUrl: string | undefined;
  for (;;) {
    const line = await nextLine(60_000);
    if (line.startsWith("admin ")) adminUrl = line.slice("admin ".length);
    if (line === "ready") break;
  }
  return {
    child,
    adminUrl,
    async send<T>(command: string, timeoutMs = 60_000) {
      child.stdin?.write(`${command}\n`);
      return JSON.parse(await nextLine(timeoutMs)) as T;
    },
    async exit() {
      child.stdin?.write("exit\n");
      await exited;
    },
  };
}

/** What a replica answers to `tick <ms>`. */
export interface ReplicaTick {
  readonly enqueued: string[];
  readonly lostRace: string[];
  readonly skipped: { job: string; reason: string; slot: number }[];
}

import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll } from "vitest";
import { z } from "zod";
import { createCronledger, type Cronledger } from "../../src/cronledger.js";
import { query } from "../../src/db/connection.js";
import { defineJob } from "../../src/jobs/define-job.js";
import { silentLogger } from "../../src/log.js";
import { createTestDatabase } from "./database.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/worker-process.ts", import.meta.url));
// The producer side: same job names as the fixture, never run here.
export const record = defineJob({ name: "proc.record", payload: z.object({ sleepMs: z.number().default(0) }), run: () => {} });
export const everySecond = defineJob({ name: "proc.every-second", run: () => {} });

export interface Child {
  readonly process: ChildProcess;
  readonly stdout: () => string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface WorkerProcessHarness {
  readonly ledger: () => Cronledger;
  readonly url: () => string;
  run<T = Record<string, unknown>>(statement: ReturnType<typeof sql>): Promise<T[]>;
  count(statement: ReturnType<typeof sql>): Promise<number>;
  spawnWorker(mode: "work" | "once" | "start", env?: Record<string, string>): Child;
  ready(child: Child): Promise<void>;
}

/** Polls a condition until it holds; a deadline turns a hang into a failure. */
export async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * A database of its own with a `runs` table that the worker fixture writes
 * every handler run to, plus child-process workers that are killed after
 * each test. Registers its vitest hooks; call it at the top of a test file.
 */
export function workerProcessHarness(label: string): WorkerProcessHarness {
  let database: { url: string; drop: () => Promise<void> };
  let ledger: Cronledger;
  const children = new Set<ChildProcess>();
  const run = <T = Record<string, unknown>>(statement: ReturnType<typeof sql>) => query<T>(ledger.database.db, statement);

  beforeAll(async () => {
    database = await createTestDatabase(label);
    ledger = createCronledger({ database: { url: database.url, poolSize: 4 }, jobs: [record, everySecond], logger: silentLogger, metrics: false, chores: false });
    await ledger.migrate();
    await run(sql`create table runs (job_id bigint, pid int, phase text, scheduled_for timestamptz, enqueued_at timestamptz, at timestamptz default clock_timestamp())`);
  });

  afterEach(async () => {
    for (const child of children) child.kill("SIGKILL");
    children.clear();
    await run(sql`truncate runs, cronledger.job_queue, cronledger.job_history, cronledger.job_keys, cronledger.job_counts, cronledger.schedule_last_runs, cronledger.schedule_state`);
  });

  afterAll(async () => {
    await ledger?.close();
    await database?.drop();
  });

  const harness: WorkerProcessHarness = {
    ledger: () => ledger,
    url: () => database.url,
    run,
    async count(statement) {
      const [row] = await run<{ n: number }>(statement);
      return row?.n ?? 0;
    },
    spawnWorker(mode, env = {}) {
      const child = spawn(process.execPath, ["--import", "tsx", FIXTURE, mode], {
        env: { ...process.env, DATABASE_URL: database.url, ...env },
        stdio: ["ignore", "pipe", "pipe"],
      });
      children.add(child);
      let out = "";
      child.stdout?.on("data", (chunk: Buffer) => (out += chunk.toString()));
      child.stderr?.on("data", (chunk: Buffer) => process.stderr.write(`[child ${child.pid}] ${chunk.toString()}`));
      const exited = once(child, "exit").then(([code, signal]) => {
        children.delete(child);
        return { code: code as number | null, signal: signal as NodeJS.Signals | null };
      });
      return { process: child, stdout: () => out, exited };
    },
    async ready(child) {
      await until("the worker is ready", () => child.stdout().includes("ready"));
    },
  };
  return harness;
}

import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { REPO_ROOT, watch } from "./support/child.js";
import { createTestDatabase } from "./support/database.js";
import { rows } from "./support/ledger.js";

/**
 * `npx cronledger worker` as the docs once recommended, in an app that has
 * cronledger installed: npm 11 passes SIGTERM to the `sh -c` it runs the
 * command in and exits, and the shell dies without passing it on. The
 * worker notices npm is gone and stops as on SIGTERM: its running job
 * finishes, and the process ends.
 */
const CONFIG = fileURLToPath(new URL("./fixtures/cli/npm-exec.config.mjs", import.meta.url));
const held = defineJob({ name: "npm-exec.held", run: () => {} });

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let ledger: Cronledger;
let app: string;

beforeAll(async () => {
  database = await createTestDatabase(import.meta.url);
  ledger = createCronledger({ database: database.url, jobs: [held], logger: silentLogger });
  await ledger.migrate();
  // An app with cronledger installed as npm links a local package: node_modules/cronledger and its bin.
  app = mkdtempSync(join(tmpdir(), "cronledger-npm-exec-"));
  mkdirSync(join(app, "node_modules", ".bin"), { recursive: true });
  symlinkSync(REPO_ROOT, join(app, "node_modules", "cronledger"), "dir");
  symlinkSync(join("..", "cronledger", "bin", "cronledger.js"), join(app, "node_modules", ".bin", "cronledger"));
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "npm-exec-app", private: true, dependencies: { cronledger: "*" } }));
});

afterAll(async () => {
  await ledger?.close();
  await database?.drop();
  if (app !== undefined) rmSync(app, { recursive: true, force: true });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

it("a worker started by `npm exec` stops gracefully when the npm process gets SIGTERM: its running job finishes and it exits", async () => {
  const release = join(app, "release");
  const { id } = await ledger.enqueue(held);
  const env = { ...process.env, DATABASE_URL: database.url, NPM_EXEC_RELEASE: release };
  const npm = watch("npm", ["exec", "--no", "cronledger", "--", "worker", "--config", CONFIG], { cwd: app, env });
  const npmExited = new Promise<void>((resolve) => npm.child.once("exit", () => resolve()));
  let workerPid = 0;
  try {
    const started = await npm.waitFor(/held job started in (\d+)/, 60_000);
    workerPid = Number(/held job started in (\d+)/.exec(started)?.[1]);
    expect(workerPid).not.toBe(npm.child.pid);

    npm.child.kill("SIGTERM");
    await npmExited;
    // npm is gone; the worker, whose job is still running, begins its graceful stop.
    await npm.waitFor(/stopping as on SIGTERM[\s\S]*SIGTERM received: stopping gracefully/, 20_000);
    expect(alive(workerPid)).toBe(true);
    expect(npm.output()).not.toContain("held job finished");

    writeFileSync(release, "");
    // Output closes once every process holding npm's pipes has ended: the worker too.
    const finished = await npm.exited;
    expect(finished.stdout).toContain("held job finished");
    await expect.poll(() => alive(workerPid), { timeout: 10_000 }).toBe(false);
    const [job] = await rows<{ status: string; attempts: number }>(ledger, sql`select status, attempts from cronledger.jobs where id = ${id}`);
    expect(job).toEqual({ status: "succeeded", attempts: 1 });
  } finally {
    npm.child.kill("SIGKILL");
    if (workerPid !== 0 && alive(workerPid)) process.kill(workerPid, "SIGKILL");
  }
}, 120_000);

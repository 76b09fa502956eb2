import { existsSync, mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { createCronledger } from "../src/cronledger.js";
import { CACHE_DIR_ENV, cacheDir, templateFile } from "../src/db/pglite-template.js";
import { defineJob } from "../src/jobs/define-job.js";
import type { Logger } from "../src/log.js";
import { defineSchedule } from "../src/schedule/define-schedule.js";
import { REPO_ROOT } from "./support/child.js";
import { jobCount } from "./support/ledger.js";

const ping = defineJob({ name: "embedded.ping", run: () => {} });
const schedule = defineSchedule([{ job: ping, cron: "*/10 * * * * *" }]);
const T0 = new Date("2026-06-01T12:00:01.000Z");
/** The first new embedded database builds the template (initdb in WebAssembly, in a child process): slow on a shared machine. */
const FIRST_USE_TIMEOUT_MS = 240_000;

let directory: string;
let previous: { cwd: string; databaseUrl: string | undefined; cacheDir: string | undefined };
beforeEach(() => {
  directory = realpathSync(mkdtempSync(join(tmpdir(), "cronledger-embedded-")));
  previous = { cwd: process.cwd(), databaseUrl: process.env.DATABASE_URL, cacheDir: process.env[CACHE_DIR_ENV] };
  delete process.env.DATABASE_URL;
  // An empty cache of its own: the test sees the template built on first use.
  process.env[CACHE_DIR_ENV] = join(directory, "cache");
  process.chdir(directory);
});
afterEach(() => {
  process.chdir(previous.cwd);
  if (previous.databaseUrl !== undefined) process.env.DATABASE_URL = previous.databaseUrl;
  if (previous.cacheDir === undefined) delete process.env[CACHE_DIR_ENV];
  else process.env[CACHE_DIR_ENV] = previous.cacheDir;
  rmSync(directory, { recursive: true, force: true });
});

function recordingLogger(lines: string[]): Logger {
  const record = (message: string) => lines.push(message);
  return { debug: () => {}, info: record, warn: record, error: record };
}

it("without database or DATABASE_URL, runs migrations and ticks on PGlite in ./.cronledger, and keeps the ledger across restarts", async () => {
  // Not shipped in the package: the first new embedded database builds the initialised cluster that later ones start from.
  expect(dirname(templateFile())).toBe(join(directory, "cache"));
  expect(existsSync(templateFile())).toBe(false);
  const lines: string[] = [];
  const first = createCronledger({ jobs: [ping], schedule, logger: recordingLogger(lines) });
  expect(existsSync(templateFile())).toBe(true);
  try {
    expect(first.database.kind).toBe("pglite");
    expect(lines).toEqual([`using embedded PGlite at ${join(directory, ".cronledger")}`]);
    expect((await first.migrate()).applied).toBeGreaterThan(0);
    expect(existsSync(join(directory, ".cronledger", "PG_VERSION"))).toBe(true);
    expect((await first.tick({ now: T0 })).created).toBe(1);
    const due = await first.tick({ now: new Date(T0.getTime() + 9_500) });
    expect(due.enqueued.map((slot) => slot.slot.toISOString())).toEqual(["2026-06-01T12:00:10.000Z"]);
  } finally {
    await first.close();
  }

  const second = createCronledger({ jobs: [ping], schedule, logger: recordingLogger([]) });
  try {
    expect((await second.migrate()).applied).toBe(0);
    const again = await second.tick({ now: new Date(T0.getTime() + 9_800) });
    expect(again).toMatchObject({ created: 0, enqueued: [] });
    expect(await jobCount(second, ping.name)).toBe(1);
  } finally {
    await second.close();
  }
}, FIRST_USE_TIMEOUT_MS);

it("keeps the template in node_modules/.cache/cronledger unless CRONLEDGER_CACHE_DIR says where", () => {
  // This checkout is not installed in a node_modules: its own node_modules holds the cache.
  expect(cacheDir({})).toBe(join(REPO_ROOT, "node_modules", ".cache", "cronledger"));
  expect(cacheDir({ [CACHE_DIR_ENV]: "/var/cache/app" })).toBe("/var/cache/app");
});

import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { insertFinishedJobs } from "./support/history.js";
import { envWithout, runCli, watch, CLI } from "./support/child.js";
import { createTestDatabase } from "./support/database.js";
import { rows } from "./support/ledger.js";

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/cli/${name}`, import.meta.url));
const BROKEN = fixture("broken.config.ts");
const NEVER_MATCHES = fixture("never-matches.config.ts");
const GOOD_JS = fixture("good.config.mjs");
const UNREACHABLE = "postgres://nobody:secret@127.0.0.1:1/nowhere";
/** How many migrations drizzle/ holds: a fresh database gets all of them. */
const MIGRATIONS = (JSON.parse(readFileSync(new URL("../drizzle/meta/_journal.json", import.meta.url), "utf8")) as { entries: unknown[] }).entries.length;

// Positions and codes of the six broken entries in fixtures/cli/broken-schedule.ts (entries 0 and 1 are good).
const BROKEN_ENTRIES = [
  [2, "invalid_cron"],
  [3, "invalid_timezone"],
  [4, "unregistered_job"],
  [5, "invalid_payload"],
  [6, "duplicate_entry"],
  [7, "invalid_jitter"],
] as const;

/** The 1-based line of the fixture that contains `text`: where an annotation for that entry must point. */
function lineOf(file: string, text: string): number {
  const index = readFileSync(fixture(file), "utf8").split("\n").findIndex((line) => line.includes(text));
  if (index < 0) throw new Error(`${text} is not in ${file}`);
  return index + 1;
}

describe("cronledger preflight", () => {
  it("reports all six broken entries of a .ts config with their codes and positions, and exits 1", async () => {
    const result = await runCli(["preflight", "--config", BROKEN]);
    expect(result.code).toBe(1);
    const lines = result.stdout.trim().split("\n");
    const problems = lines.filter((line) => line.startsWith("error ["));
    expect(problems).toHaveLength(6);
    BROKEN_ENTRIES.forEach(([index, code], at) => expect(problems[at]).toMatch(new RegExp(`^error \\[${code}\\] schedule\\[${index}\\]`)));
    expect(result.stdout).toContain('same job and timing as schedule[0]');
    expect(lines.at(-1)).toMatch(/preflight failed: 6 errors, 0 warnings in 8 schedule entries/);
  });

  it("lists the same six problems as parseable JSON", async () => {
    const result = await runCli(["preflight", "--config", BROKEN, "--json"]);
    expect(result.code).toBe(1);
    const report = JSON.parse(result.stdout) as { ok: boolean; entries: number; errors: number; problems: { code: string; index: number; severity: string; message: string }[] };
    expect(report).toMatchObject({ version: 1, ok: false, entries: 8, errors: 6, warnings: 0 });
    expect(report.problems.map((problem) => [problem.index, problem.code])).toEqual(BROKEN_ENTRIES.map(([index, code]) => [index, code]));
    expect(report.problems.every((problem) => problem.severity === "error" && problem.message.length > 0)).toBe(true);
    expect(report.problems[1]).toMatchObject({ location: { file: "test/fixtures/cli/broken-schedule.ts", line: lineOf("broken-schedule.ts", "Mars/Olympus_Mons"), column: 3 } });
  });

  it("points at the config file alone when the schedule is not one array literal", async () => {
    const result = await runCli(["preflight", "--config", fixture("mapped.config.ts"), "--format", "github"]);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^::error file=test\/fixtures\/cli\/mapped\.config\.ts,title=cronledger invalid_cron in schedule\[0\]::/m);
  });

  it("exits 0 with the warning when never_matches is the only problem", async () => {
    const result = await runCli(["preflight", "--config", NEVER_MATCHES]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^warning \[never_matches\] schedule\[1\] \(reports\.rollup\): cron "0 0 30 2 \*" has no slot/m);
    expect(result.stdout).toMatch(/preflight passed: 2 schedule entries .*0 errors, 1 warning\./);
  });

  it("prints GitHub annotations with --format github", async () => {
    const broken = await runCli(["preflight", "--config", BROKEN, "--format", "github"]);
    expect(broken.code).toBe(1);
    const annotations = broken.stdout.split("\n").filter((line) => line.startsWith("::"));
    expect(annotations).toHaveLength(6);
    // The schedule lives in a file the config imports: each annotation points at its entry's line there.
    const badMinute = lineOf("broken-schedule.ts", '"61 * * * *"');
    expect(annotations[0]).toMatch(
      new RegExp(`^::error file=test/fixtures/cli/broken-schedule\\.ts,line=${badMinute},col=3,title=cronledger invalid_cron in schedule\\[2\\]::schedule\\[2\\] `),
    );
    expect(annotations[5]).toContain(`line=${lineOf("broken-schedule.ts", 'jitter: "5m"')},`);

    const warningOnly = await runCli(["preflight", "--config", NEVER_MATCHES, "--format", "github"]);
    expect(warningOnly.code).toBe(0);
    expect(warningOnly.stdout).toMatch(
      new RegExp(`^::warning file=test/fixtures/cli/never-matches\\.config\\.ts,line=${lineOf("never-matches.config.ts", "leap-dreams")},col=5,title=cronledger never_matches in schedule\\[1\\]::`, "m"),
    );

    const notAConfig = await runCli(["preflight", "--config", fixture("not-a-config.ts"), "--format", "github"]);
    expect(notAConfig.code).toBe(1);
    expect(notAConfig.stdout).toMatch(/^::error file=.*not-a-config\.ts,title=cronledger invalid_config::.*has no `jobs` array/m);
  });

  it("needs no database: passes with DATABASE_URL unreachable and creates no embedded database", async () => {
    const directory = mkdtempSync(join(tmpdir(), "cronledger-preflight-"));
    try {
      const result = await runCli(["preflight", "--config", GOOD_JS], { cwd: directory, env: { ...process.env, DATABASE_URL: UNREACHABLE } });
      expect(result.stderr).toBe("");
      expect(result.code).toBe(0);
      expect(result.stdout).toContain("preflight passed: 1 schedule entry");
      expect(existsSync(join(directory, ".cronledger"))).toBe(false);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it("finds cronledger.config.ts in the working directory, and says how to create one when there is none", async () => {
    const found = await runCli(["preflight"], { cwd: fixture("project") });
    expect(found.code).toBe(0);
    expect(found.stdout).toContain("preflight passed: 1 schedule entry in cronledger.config.ts");

    const directory = mkdtempSync(join(tmpdir(), "cronledger-noconfig-"));
    try {
      const missing = await runCli(["preflight"], { cwd: directory });
      expect(missing.code).toBe(1);
      expect(missing.stderr).toMatch(/No config file: create cronledger\.config\.ts .* or pass --config <file>/);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });
});

describe("cronledger command line", () => {
  it("rejects an unknown command or flag with a hint and exit status 2", async () => {
    const command = await runCli(["prefligth"]);
    expect(command.code).toBe(2);
    expect(command.stderr).toContain("Did you mean `cronledger preflight`?");

    const flag = await runCli(["preflight", "--confg", BROKEN]);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("Unknown option --confg for `cronledger preflight`. Did you mean --config?");

    const missingValue = await runCli(["worker", "--concurrency"]);
    expect(missingValue.code).toBe(2);
    expect(missingValue.stderr).toContain("--concurrency needs a value");

    // The flags that set an option are checked by that option's schema (the config's worker and admin blocks), before any database.
    const [concurrency, queues, port] = await Promise.all([
      runCli(["worker", "--concurrency", "20000"]),
      runCli(["worker", "--queues", " , "]),
      runCli(["worker", "--admin-port", "70000"]),
    ]);
    expect(concurrency.stderr).toContain('--concurrency must be at most 10000 (got "20000").');
    expect(queues.stderr).toContain('--queues needs at least one queue (got " , "), e.g. --queues default,mail.');
    expect(port.stderr).toContain('--admin-port must be a port number from 0 to 65535 (got "70000").');
    for (const result of [concurrency, queues, port]) expect(result.code).toBe(2);
  });

  it("prints help for every command", async () => {
    const main = await runCli(["--help"]);
    expect(main.code).toBe(0);
    const commands = ["preflight", "migrate", "worker", "status", "failures", "tick"];
    for (const name of commands) expect(main.stdout).toMatch(new RegExp(`^  ${name} `, "m"));
    const helps = await Promise.all(commands.map((name) => runCli([name, "--help"])));
    helps.forEach((help, index) => {
      expect(help.code).toBe(0);
      expect(help.stdout).toContain(`Usage: cronledger ${commands[index]} [options]`);
      expect(help.stdout).toContain("--help");
    });
    for (const [name, argument] of [["cancel", "<id>"], ["unquarantine", "<key>"]] as const) {
      expect(main.stdout).toMatch(new RegExp(`^  ${name} `, "m"));
      const help = await runCli([name, "--help"]);
      expect(help.stdout).toContain(`Usage: cronledger ${name} ${argument} [options]`);
    }
  });
});

describe("cronledger on the embedded database", () => {
  it("migrates and ticks in ./.cronledger when neither DATABASE_URL nor database is set", async () => {
    const directory = mkdtempSync(join(tmpdir(), "cronledger-embedded-"));
    const env = envWithout("DATABASE_URL");
    try {
      const migrated = await runCli(["migrate", "--config", GOOD_JS], { cwd: directory, env });
      expect(migrated.stderr).toContain(`using embedded PGlite at ${join(directory, ".cronledger")}`);
      expect(migrated.stdout).toMatch(new RegExp(`^Applied ${MIGRATIONS} migrations? to embedded PGlite`));
      expect(migrated.code).toBe(0);

      const ticked = await runCli(["tick", "--once", "--config", GOOD_JS, "--json"], { cwd: directory, env });
      expect(ticked.code).toBe(0);
      expect(JSON.parse(ticked.stdout)).toMatchObject({ version: 1, created: 1, enqueued: [], lost_race: [], invalid: [] });
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });
});

describe("cronledger against PostgreSQL", () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let env: NodeJS.ProcessEnv;
  beforeAll(async () => {
    database = await createTestDatabase(import.meta.url);
    env = { ...process.env, DATABASE_URL: database.url };
  });
  afterAll(async () => {
    await database.drop();
  });
  let migrated: Promise<unknown> | undefined;
  // The first test checks the unmigrated state; the others only need the tables.
  const ensureMigrated = () => {
    migrated ??= (async () => {
      const ledger = createCronledger({ database: database.url, logger: silentLogger });
      await ledger.migrate();
      await ledger.close();
    })();
    return migrated;
  };

  it("refuses to work before migrate, then migrates idempotently", async () => {
    const early = await runCli(["status"], { env });
    expect(early.code).toBe(1);
    expect(early.stderr).toContain("error [migration_required]: cronledger's tables do not exist");
    expect(early.stderr).toContain("Run `cronledger migrate`");

    const first = await runCli(["migrate"], { env });
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(new RegExp(`^Applied ${MIGRATIONS} migrations? to PostgreSQL postgres://`));
    expect(first.stdout + first.stderr).not.toContain("secret");
    const second = await runCli(["migrate"], { env });
    expect(second.stdout).toMatch(/^Database is up to date/);
    migrated = Promise.resolve();
  });

  it("tick --once enqueues due slots; status shows the entry and the queue", async () => {
    await ensureMigrated();
    const first = await runCli(["tick", "--once", "--config", GOOD_JS], { env });
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/0 enqueued, .*1 new ledger row\./);
    // An hour of downtime since that pass, set in the ledger instead of waited for: the latest slot is due.
    const ledger = createCronledger({ database: database.url, logger: silentLogger });
    try {
      await rows(ledger, sql`update cronledger.schedule_state set last_enqueued_slot = last_enqueued_slot - interval '1 hour'`);
    } finally {
      await ledger.close();
    }
    const second = await runCli(["tick", "--once", "--config", GOOD_JS], { env });
    expect(second.stdout).toMatch(/^Tick at .*: 1 enqueued/);
    expect(second.stdout).toMatch(/^ {2}enqueued {5}fixture\.ping for /m);

    const status = await runCli(["status", "--config", GOOD_JS, "--json"], { env });
    expect(status.code).toBe(0);
    const report = JSON.parse(status.stdout) as { version: number; entries: { job: string; chore: boolean; last_enqueued_slot: string | null }[]; queues: Record<string, Record<string, number>> };
    expect(report.version).toBe(1);
    expect(report.entries).toEqual([
      expect.objectContaining({ job: "fixture.ping", chore: false, last_enqueued_slot: expect.any(String) }),
      expect.objectContaining({ job: "cronledger.reap", chore: true }),
      expect.objectContaining({ job: "cronledger.prune", chore: true }),
    ]);
    expect(report.queues.default?.queued).toBeGreaterThanOrEqual(1);

    // No worker runs, so the ready job waits for one; a quarantine in the ledger row shows as well.
    const writer = createCronledger({ database: database.url, logger: silentLogger });
    try {
      const quarantine = (until: string | null, count: number, reason: string | null) =>
        rows(writer, sql`update cronledger.schedule_state set quarantined_until = ${until}::timestamptz, quarantine_count = ${count}, quarantine_reason = ${reason}
                         where job_name = 'fixture.ping'`);
      await quarantine(new Date(Date.now() + 60_000).toISOString(), 2, "insert rejected by a trigger");
      const text = await runCli(["status", "--config", GOOD_JS], { env });
      expect(text.stdout).toMatch(/^quarantined fixture\.ping \(.*\) until \S+, 2 failures: insert rejected by a trigger \(ledger key default\|fixture\.ping\|.*; `cronledger unquarantine .*` once fixed\)$/m);
      expect(text.stdout).toMatch(/^ {2}fixture\.ping: \d+ jobs?, oldest ready since \S+$/m);
      await quarantine(null, 0, null);
    } finally {
      await writer.close();
    }
  });

  it("tick without --once explains itself", async () => {
    const result = await runCli(["tick", "--config", GOOD_JS], { env });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("pass --once");
  });

  it("failures lists terminal failures, filtered by --job-type", async () => {
    await ensureMigrated();
    const broken = defineJob({ name: "fixture.broken", run: () => {} });
    const ledger = createCronledger({ database: database.url, jobs: [broken], logger: silentLogger });
    try {
      // Written by hand, unredacted: the CLI redacts on the way out like every other surface.
      const raw = "upstream said no; cache redis://:hunter9-url@cache:6379/0\nciphertext: Q2lwaGVyVGV4dA\nblob kR7vQ2mZ8xW4nL6pT0yB3cF5hJ9dS1gA";
      await insertFinishedJobs(ledger.database.db, [{ jobName: broken.name, status: "failed", attempts: 5, maxAttempts: 5, lastError: raw }]);
    } finally {
      await ledger.close();
    }
    const listed = await runCli(["failures", "--job-type", "fixture.broken"], { env });
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/fixture\.broken\s+5\/\d+/);
    expect(listed.stdout).toContain("upstream said no");
    expect(listed.stdout).toContain("redis://[redacted]@cache:6379/0");
    for (const secret of ["hunter9-url", "Q2lwaGVyVGV4dA", "kR7vQ2mZ8xW4nL6pT0yB3cF5hJ9dS1gA"]) expect(listed.stdout).not.toContain(secret);
    const other = await runCli(["failures", "--job-type", "fixture.nothing"], { env });
    expect(other.stdout.trim()).toBe("No failures of fixture.nothing.");
  });

  it("worker refuses a broken schedule, and runs jobs until SIGTERM stops it gracefully", async () => {
    await ensureMigrated();
    const refused = await runCli(["worker", "--config", BROKEN], { env });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("The schedule has 6 errors");

    const tokenless = await runCli(["worker", "--config", GOOD_JS, "--admin-port", "0"], { env });
    expect(tokenless.code).toBe(1);
    expect(tokenless.stderr).toContain("--admin-without-token");

    const worker = watch(process.execPath, [CLI, "worker", "--config", GOOD_JS, "--concurrency", "2", "--admin-port", "0", "--admin-without-token"], { env });
    try {
      const output = await worker.waitFor(/cronledger worker started: 1 schedule entry, /, 20_000);
      const adminUrl = /cronledger admin at (http:\S+)/.exec(output)?.[1] ?? "";
      const status = await fetch(adminUrl.replace(/\/admin\/scheduler$/, "/admin/scheduler/status"));
      expect(status.status).toBe(200);
      expect(await status.json()).toMatchObject({
        entries: [
          expect.objectContaining({ job: "fixture.ping", chore: false }),
          expect.objectContaining({ job: "cronledger.reap", chore: true }),
          expect.objectContaining({ job: "cronledger.prune", chore: true }),
        ],
      });
      const ledger = createCronledger({ database: database.url, logger: silentLogger });
      try {
        const succeeded = async () =>
          (await rows<{ n: number }>(ledger, sql`select count(*)::int as n from cronledger.jobs where job_name = 'fixture.ping' and status = 'succeeded'`))[0]?.n;
        await expect.poll(succeeded, { timeout: 15_000, interval: 250 }).toBeGreaterThan(0);
      } finally {
        await ledger.close();
      }
      worker.child.kill("SIGTERM");
      const finished = await worker.exited;
      expect(finished.signal ?? finished.code).toBe("SIGTERM");
      expect(finished.stderr).toContain("SIGTERM received: stopping gracefully");
    } finally {
      worker.child.kill("SIGKILL");
    }
  });
});

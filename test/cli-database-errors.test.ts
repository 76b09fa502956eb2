import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger } from "../src/cronledger.js";
import { TickError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger, type Logger } from "../src/log.js";
import { defineSchedule } from "../src/schedule/define-schedule.js";
import { runCli, type Finished } from "./support/child.js";
import { createTestDatabase, serverUrl } from "./support/database.js";
import { startFakePostgres, type FakePostgres } from "./support/fake-postgres.js";
import { freePort } from "./support/ports.js";
import { startSwitchProxy, type SwitchProxy } from "./support/switch-proxy.js";
import { withDatabase } from "./support/postgres-url.js";

/**
 * The four ways a database most often refuses cronledger, each met by every
 * command that needs one: one line naming the cause and the fix, exit 1, no
 * stack trace, no SQL. Real processes of the built CLI (`npm run build` first).
 */
const GOOD_JS = fileURLToPath(new URL("./fixtures/cli/good.config.mjs", import.meta.url));
const COMMANDS: readonly (readonly string[])[] = [["migrate"], ["status"], ["worker", "--config", GOOD_JS], ["failures"], ["tick", "--once", "--config", GOOD_JS]];

let wrongPassword: FakePostgres;
let pooler: FakePostgres;
let causes: { name: string; url: string; code: string; says: RegExp }[];

beforeAll(async () => {
  [wrongPassword, pooler] = await Promise.all([startFakePostgres("wrong-password"), startFakePostgres("refuses-setting")]);
  // Nothing listens on it: the closed port.
  const port = await freePort();
  causes = [
    {
      name: "a closed port",
      url: `postgres://postgres@127.0.0.1:${port}/app`,
      code: "connection_refused",
      says: new RegExp(`^error \\[connection_refused\\]: connection refused at 127\\.0\\.0\\.1:${port}: no PostgreSQL is listening there\\. Start it, or fix the host and port`),
    },
    {
      name: "a wrong password",
      url: wrongPassword.url("report_bot"),
      code: "authentication_failed",
      says: /^error \[authentication_failed\]: password authentication failed for user "report_bot": check the user name and password/,
    },
    {
      name: "a missing database",
      url: withDatabase(serverUrl(), "cl_no_such_database"),
      code: "database_not_found",
      says: /^error \[database_not_found\]: database "cl_no_such_database" does not exist: create it/,
    },
    {
      name: "a pooler refusing client_connection_check_interval",
      url: pooler.url(),
      code: "setting_refused",
      says: /^error \[setting_refused\]: the server or a pooler in front of it refused the startup parameter client_connection_check_interval .*clientConnectionCheck: false/,
    },
  ];
});

afterAll(async () => {
  await Promise.all([wrongPassword?.close(), pooler?.close()]);
});

/** What a person must never see at the default level: a stack frame or the statement drizzle wrapped the cause in. */
function expectNoInternals(result: Finished, label: string): void {
  const output = result.stdout + result.stderr;
  expect(output, label).not.toMatch(/^\s+at /m);
  expect(output, label).not.toMatch(/Failed query|select |insert into|update cronledger|to_regclass|params:/i);
  expect(output, label).not.toContain("wrong-secret");
}

describe("a command whose database refuses it", () => {
  it("prints one line naming the cause and what to do, and exits 1, for every command and cause", { timeout: 180_000 }, async () => {
    // One cause's five commands run one after the other; the four causes side by side.
    await Promise.all(
      causes.map(async (cause) => {
        for (const command of COMMANDS) {
          const label = `${command[0]} against ${cause.name}`;
          const result = await runCli(command, { env: { ...process.env, DATABASE_URL: cause.url } });
          expect(result.code, `${label}\n${result.stderr}`).toBe(1);
          const errors = result.stderr.split("\n").filter((line) => line.startsWith("error"));
          expect(errors, `${label}\n${result.stderr}`).toHaveLength(1);
          expect(errors[0], label).toMatch(cause.says);
          // Besides the error, at most the line saying which database is in use.
          const others = result.stderr.split("\n").filter((line) => line !== "" && !line.startsWith("error"));
          expect(others.every((line) => line.startsWith("[cronledger] using PostgreSQL")), `${label}\n${result.stderr}`).toBe(true);
          expectNoInternals(result, label);
        }
      }),
    );
    // The pooler saw the parameter it refused, so the refusal was real, not a connection problem of the stand-in.
    expect(pooler.startups.some((startup) => "client_connection_check_interval" in startup)).toBe(true);
    expect(wrongPassword.startups.every((startup) => startup.user === "report_bot")).toBe(true);
  });

  it("adds the full error and its stack with --verbose or DEBUG=cronledger", async () => {
    const [cause] = causes;
    if (!cause) throw new Error("no causes");
    for (const extra of [{ args: ["--verbose"], env: {} }, { args: [], env: { DEBUG: "cronledger" } }]) {
      const result = await runCli(["status", ...extra.args], { env: { ...process.env, ...extra.env, DATABASE_URL: cause.url } });
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(new RegExp(cause.says.source, "m"));
      expect(result.stderr).toMatch(/^\s+at /m);
      expect(result.stderr).toContain("caused by Error [ECONNREFUSED]");
    }
    expect((await runCli(["status", "--verbos"])).stderr).toContain("Did you mean --verbose?");
  });
});

describe("a running process whose database starts refusing it", () => {
  const job = defineJob({ name: "diagnose.ping", run: () => {} });
  const schedule = defineSchedule([{ job, cron: "* * * * * *" }]);

  /**
   * Starts the ticker and a worker through a proxy to a real, migrated
   * database (start() checks the schema first: a process that cannot reach its
   * database at all refuses to start, as the commands above show), then turns
   * the database away with `refuse`, and collects log lines until each of
   * `wanted` has been logged.
   */
  async function runtimeLogs(refuse: (proxy: SwitchProxy) => Promise<void>, wanted: readonly RegExp[]): Promise<{ level: string; message: string; fields: Record<string, unknown> }[]> {
    const database = await createTestDatabase("database_errors_runtime");
    const proxy = await startSwitchProxy(Number(new URL(serverUrl()).port || 5432));
    const lines: { level: string; message: string; fields: Record<string, unknown> }[] = [];
    let refused = false;
    let done: () => void = () => {};
    const seenAll = new Promise<void>((resolve) => (done = resolve));
    const write = (level: string) => (message: string, fields: Record<string, unknown> = {}) => {
      if (!refused) return;
      lines.push({ level, message, fields });
      if (wanted.every((pattern) => lines.some((line) => line.level !== "debug" && pattern.test(line.message)))) done();
    };
    const logger: Logger = { debug: write("debug"), info: write("info"), warn: write("warn"), error: write("error") };
    // A password the trust-auth server ignores and the stand-in refuses.
    const url = new URL(database.url);
    url.host = `127.0.0.1:${proxy.port}`;
    url.password = "wrong-secret";
    const admin = createCronledger({ database: database.url, jobs: [job], logger: silentLogger });
    await admin.migrate();
    await admin.close();
    const ledger = createCronledger({ database: url.toString(), jobs: [job], schedule, logger });
    try {
      await ledger.start({ handleSignals: false });
      refused = true;
      await refuse(proxy);
      await seenAll;
    } finally {
      await ledger.close();
      await proxy.close();
      await database.drop();
    }
    return lines;
  }

  it("logs the outage once with its cause in one line, without SQL, and each failed statement only at debug", async () => {
    const lines = await runtimeLogs((proxy) => proxy.refuse(), [/^lost the database/]);
    const shown = lines.filter((line) => line.level !== "debug");
    for (const line of shown) {
      const text = `${line.message} ${JSON.stringify(line.fields)}`;
      expect(text).not.toMatch(/Failed query|select |update cronledger|unnest/i);
      if ("error" in line.fields) expect(String(line.fields.error)).toMatch(/^(connection refused at 127\.0\.0\.1:\d+: no PostgreSQL is listening there|the connection to the database was closed|Connection terminated|write CONNECTION_)/);
    }
    const lost = shown.filter((line) => /^lost the database/.test(line.message));
    expect(lost).toHaveLength(1);
    expect(lost[0]?.level).toBe("error");
    expect(String(lost[0]?.fields.error)).toMatch(/^(connection refused at 127\.0\.0\.1:\d+: no PostgreSQL is listening there|the connection to the database was closed|write CONNECTION_)/);
    // The full error, statement included, is there for whoever turns debug on.
    expect(lines.some((line) => line.level === "debug" && /Failed query/.test(String(line.fields.error)))).toBe(true);
  });

  it("fails a pass with a TickError whose message names the cause and its fix, never the SQL", async () => {
    const database = await createTestDatabase("database_errors_tick");
    const proxy = await startSwitchProxy(Number(new URL(serverUrl()).port || 5432));
    const url = new URL(database.url);
    url.host = `127.0.0.1:${proxy.port}`;
    url.password = "wrong-secret";
    const ledger = createCronledger({ database: url.toString(), jobs: [job], schedule, logger: silentLogger });
    try {
      await ledger.migrate();
      await ledger.tick();
      proxy.target(wrongPassword.port);
      const failure: unknown = await ledger.tick().then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(TickError);
      expect((failure as TickError).message).toMatch(/^Scheduler tick failed in phase "pass" after \d+ attempts?: password authentication failed for user "postgres": check the user name and password/);
      expect((failure as TickError).message).not.toMatch(/Failed query|select |update cronledger|unnest/i);
    } finally {
      await ledger.close();
      await proxy.close();
      await database.drop();
    }
  });

  it("logs a wrong password loudly, as not transient (retries then slow down to once a minute: see test/db-diagnose.test.ts)", async () => {
    const lines = await runtimeLogs(async (proxy) => proxy.target(wrongPassword.port), [/^scheduler tick failed; retrying \(not transient/, /^claiming jobs failed; retrying \(not transient/]);
    const failures = lines.filter((line) => line.level !== "debug" && /^(scheduler tick failed|claiming jobs failed).*not transient/.test(line.message));
    // A connection problem is no entry's fault: nothing is quarantined for it.
    expect(lines.filter((line) => /quarantined/.test(line.message))).toEqual([]);
    expect(failures.length).toBeGreaterThanOrEqual(2);
    for (const line of failures) {
      expect(line.level).toBe("error");
      expect(line.message).toContain("(not transient: retries slow down to once a minute until the cause is fixed)");
      expect(String(line.fields.error)).toMatch(/^password authentication failed for user "postgres": check the user name and password/);
    }
  });
});

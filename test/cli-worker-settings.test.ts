import { createServer, type Server } from "node:net";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { defineSchedule } from "../src/schedule/define-schedule.js";
import { runCli } from "./support/child.js";
import { createTestDatabase } from "./support/database.js";
import { rows } from "./support/ledger.js";

/**
 * `cronledger worker` checks every worker and admin setting before its first
 * write: with a bad one it exits 1 and the database is exactly as it was, row
 * for row, although an every-second entry is due and a job is ready to claim.
 */
const SETTINGS = fileURLToPath(new URL("./fixtures/cli/settings.config.mjs", import.meta.url));
const ping = defineJob({ name: "fixture.ping", run: () => {} });

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let ledger: Cronledger;

beforeAll(async () => {
  database = await createTestDatabase(import.meta.url);
  ledger = createCronledger({ database: database.url, jobs: [ping], schedule: defineSchedule([{ job: ping, cron: "* * * * * *" }]), chores: true, logger: silentLogger });
  await ledger.migrate();
  // Ledger rows for the entry and both chores, and a job any worker would claim at once.
  await ledger.tick();
  await ledger.enqueue(ping, {});
});

afterAll(async () => {
  await ledger?.close();
  await database?.drop();
});

/** Every table of the cronledger schema and the migration journal: its row count and a digest of its rows. */
async function snapshot(): Promise<Record<string, string>> {
  const tables = await rows<{ name: string }>(
    ledger,
    sql`select format('%I.%I', table_schema, table_name) as name from information_schema.tables
        where table_schema = 'cronledger' or (table_schema = 'drizzle' and table_name = '__cronledger_migrations') order by 1`,
  );
  const result: Record<string, string> = {};
  for (const { name } of tables) {
    const [row] = await rows<{ n: number; digest: string }>(
      ledger,
      sql.raw(`select count(*)::int as n, md5(coalesce(string_agg(t::text, '|' order by t::text), '')) as digest from ${name} t`),
    );
    result[name] = `${row?.n} rows, ${row?.digest}`;
  }
  return result;
}

async function busyPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  return { port: typeof address === "object" && address ? address.port : 0, server };
}

describe("cronledger worker with an invalid setting", () => {
  it("exits 1 before it ticks, enqueues or claims anything: a 15-character admin token", async () => {
    const before = await snapshot();
    expect(Object.keys(before)).toEqual(expect.arrayContaining(["cronledger.jobs", "cronledger.schedule_state"]));
    const result = await runCli(["worker", "--config", SETTINGS, "--admin-port", "0"], {
      env: { ...process.env, DATABASE_URL: database.url, CRONLEDGER_ADMIN_TOKEN: "x".repeat(15) },
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("error [invalid_config]: The admin token (CRONLEDGER_ADMIN_TOKEN) is 15 characters; it must be at least 16");
    expect(result.stderr).not.toContain("worker started");
    expect(await snapshot()).toEqual(before);
  });

  it.each([
    { name: "a short admin.token in the config", admin: { port: 0, token: "short-token" }, says: "The admin token (the config's admin.token) is 11 characters" },
    { name: "a misspelt admin field", admin: { port: 0, tokn: "x".repeat(32) }, says: 'unknown option "admin.tokn" (did you mean "token"?)' },
    { name: "an admin port out of range", admin: { port: 70_000, token: "x".repeat(32) }, says: "admin.port: must be a port number from 0 to 65535" },
    { name: "worker.concurrency 0", worker: { concurrency: 0 }, says: "worker.concurrency: must be a positive integer" },
    { name: "worker.queues as a string", worker: { queues: "default,mail" }, says: "worker.queues: " },
  ])("exits 1 with the database unchanged: $name", async ({ admin, worker, says }) => {
    const before = await snapshot();
    const result = await runCli(["worker", "--config", SETTINGS], {
      env: {
        ...process.env,
        DATABASE_URL: database.url,
        ...(admin === undefined ? {} : { FIXTURE_ADMIN: JSON.stringify(admin) }),
        ...(worker === undefined ? {} : { FIXTURE_WORKER: JSON.stringify(worker) }),
      },
    });
    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr).toMatch(/^error \[invalid_config\]: Invalid config file .*settings\.config\.mjs: |^error \[invalid_config\]: The admin token/m);
    expect(result.stderr).toContain(says);
    expect(await snapshot()).toEqual(before);
  });

  it("exits 1 with the database unchanged when the admin port is taken", async () => {
    const taken = await busyPort();
    try {
      const before = await snapshot();
      const result = await runCli(["worker", "--config", SETTINGS, "--admin-port", String(taken.port)], {
        env: { ...process.env, DATABASE_URL: database.url, CRONLEDGER_ADMIN_TOKEN: "x".repeat(32) },
      });
      expect(result.code).toBe(1);
      expect(result.stderr).toContain("EADDRINUSE");
      expect(await snapshot()).toEqual(before);
    } finally {
      taken.server.close();
    }
  });
});

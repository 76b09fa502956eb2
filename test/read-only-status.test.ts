import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startAdminServer } from "../src/admin/server.js";
import { main } from "../src/cli/main.js";
import { loadConfig } from "../src/cli/load-config.js";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { silentLogger } from "../src/log.js";
import type { StatusDocument } from "../src/wire/status.js";
import { createTestDatabase, serverUrl } from "./support/database.js";

/**
 * Status, the page, /metrics, `next` and `plan` as a role that may only read
 * (docs/operations.md, "A read-only role for dashboards"), with overdue
 * entries and a ledger row another session holds locked: the check for held
 * rows must not lock anything itself (FOR SHARE needs UPDATE).
 */
const CONFIG = fileURLToPath(new URL("./fixtures/cli/read-only.config.ts", import.meta.url));
const MINUTE = 60_000;
const TOKEN = "read-only-dashboard-token";

/** One CLI run on the database at `url` (a config without `database` takes DATABASE_URL from the process). */
async function cli(args: readonly string[], url: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const saved = process.env.DATABASE_URL;
  process.env.DATABASE_URL = url;
  try {
    const code = await main(args, { cwd: process.cwd(), env: process.env, stdout: (text) => out.push(text), stderr: (text) => err.push(text) });
    return { code, stdout: out.join("\n"), stderr: err.join("\n") };
  } finally {
    if (saved === undefined) delete process.env.DATABASE_URL;
    else process.env.DATABASE_URL = saved;
  }
}

describe("a role that can only SELECT", () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let writer: Cronledger;
  let holder: postgres.Sql;
  let readOnlyUrl: string;
  let heldKey: string;
  let freeKey: string;
  let release!: () => void;
  let holding: Promise<unknown>;
  const reader = `cl_reader_${process.pid}_${Date.now().toString(36)}`;

  beforeAll(async () => {
    database = await createTestDatabase(import.meta.url);
    const config = await loadConfig(CONFIG);
    writer = createCronledger({ ...config, database: { url: database.url, poolSize: 2 }, logger: silentLogger, metrics: false });
    await writer.migrate();
    // One pass ten minutes ago: every entry has a ledger row and is overdue now.
    await writer.tick({ now: new Date(Math.floor(Date.now() / MINUTE) * MINUTE - 10 * MINUTE) });
    heldKey = writer.entries.find((entry) => entry.jobName === "readonly.held")!.ledgerKey;
    freeKey = writer.entries.find((entry) => entry.jobName === "readonly.report")!.ledgerKey;

    // The role of the docs' section: USAGE and SELECT, nothing more.
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
    const name = new URL(database.url).pathname.slice(1);
    await admin.unsafe(`create role "${reader}" login`);
    await admin.unsafe(`grant connect on database "${name}" to "${reader}"`);
    await admin.unsafe(`grant usage on schema cronledger to "${reader}"; grant select on all tables in schema cronledger to "${reader}"`);
    await admin.end({ timeout: 1 });
    const url = new URL(database.url);
    url.username = reader;
    url.password = "";
    readOnlyUrl = url.toString();

    holder = postgres(database.url, { max: 1, onnotice: () => {} });
    // A lock taken and released leaves its transaction's id in the row's xmax: that row is not held.
    await holder.begin((tx) => tx`select 1 from cronledger.schedule_state where key = ${freeKey} for update`);
    const [locked] = await holder<{ xmax: string }[]>`select xmax::text from cronledger.schedule_state where key = ${freeKey}`;
    expect(locked?.xmax).not.toBe("0");
    // Another session holds the row of the other entry, as a pass stuck inside its statement would.
    const released = new Promise<void>((resolve) => (release = resolve));
    let taken!: () => void;
    const held = new Promise<void>((resolve) => (taken = resolve));
    holding = holder.begin(async (tx) => {
      await tx`select 1 from cronledger.schedule_state where key = ${heldKey} for update`;
      taken();
      await released;
    });
    await held;
  });

  afterAll(async () => {
    release?.();
    await holding;
    await holder?.end({ timeout: 1 });
    await writer?.close();
    await database?.drop();
    const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
    await admin.unsafe(`drop role if exists "${reader}"`);
    await admin.end({ timeout: 1 });
  });

  it("really cannot write, nor lock a row for share", async () => {
    const probe = postgres(readOnlyUrl, { max: 1, onnotice: () => {} });
    try {
      await expect(probe`select 1 from cronledger.schedule_state for share skip locked`).rejects.toThrow(/permission denied for table schedule_state/);
      await expect(probe`update cronledger.schedule_state set job_name = job_name`).rejects.toThrow(/permission denied/);
    } finally {
      await probe.end({ timeout: 1 });
    }
  });

  it("runs `cronledger status`, text and JSON: the held entry is locked, the other late", async () => {
    const text = await cli(["status", "--config", CONFIG], readOnlyUrl);
    expect(text.stderr).not.toContain("permission denied");
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/readonly\.held\s+locked/);
    expect(text.stdout).toMatch(/readonly\.report\s+late/);

    const json = await cli(["status", "--config", CONFIG, "--json"], readOnlyUrl);
    expect(json.code, json.stderr).toBe(0);
    const document = JSON.parse(json.stdout) as StatusDocument;
    const stateOf = (key: string) => document.entries.find((entry) => entry.key === key)?.state;
    expect(stateOf(heldKey)).toBe("locked");
    expect(stateOf(freeKey)).toBe("late");
  });

  it("runs `cronledger next` and `cronledger plan`", async () => {
    const upcoming = await cli(["next", "--config", CONFIG, "-n", "2", "--json"], readOnlyUrl);
    expect(upcoming.code, upcoming.stderr).toBe(0);
    expect(upcoming.stdout).toContain("readonly.held");
    const planned = await cli(["plan", "--config", CONFIG, "--json"], readOnlyUrl);
    expect(planned.stderr).not.toContain("permission denied");
    expect([0, 3], planned.stderr).toContain(planned.code);
    expect(JSON.parse(planned.stdout)).toMatchObject({ ok: true });
  });

  it("serves the page, the status document and /metrics", async () => {
    const config = await loadConfig(CONFIG);
    const ledger = createCronledger({ ...config, database: { url: readOnlyUrl, poolSize: 2 }, logger: silentLogger, chores: false });
    const server = await startAdminServer(ledger, { port: 0, token: TOKEN });
    try {
      const get = (path: string) => fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      const metrics = await get("/metrics");
      const exposition = await metrics.text();
      expect(metrics.status, exposition).toBe(200);
      expect(exposition).toMatch(/^cronledger_schedule_entries\{state="locked"\} 1$/m);
      expect(exposition).toMatch(/^cronledger_schedule_entries\{state="late"\} 1$/m);
      const page = await get("/admin/scheduler");
      const html = await page.text();
      expect(page.status, html).toBe(200);
      expect(html).toContain("held locked by another session");
      const status = await get("/admin/scheduler/status");
      expect(status.status).toBe(200);
      const document = (await status.json()) as StatusDocument;
      expect(document.entries.find((entry) => entry.key === heldKey)?.state).toBe("locked");
    } finally {
      await server.close();
      await ledger.close();
    }
  });
});

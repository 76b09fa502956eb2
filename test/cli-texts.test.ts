import { fileURLToPath } from "node:url";
import * as v from "valibot";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runEntryAction, type EntryActionsLedger } from "../src/admin/entry-actions.js";
import { main } from "../src/cli/main.js";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import type { CliErrorDocument } from "../src/wire/commands.js";
import type { NextDocument } from "../src/wire/upcoming.js";
import { createTestDatabase } from "./support/database.js";

/** What the CLI and its neighbours say, in the words a user reads (issue 34, item 8). */
const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/cli/${name}`, import.meta.url));
const GOOD = fixture("good.config.mjs");
const PAUSE = fixture("pause.config.mjs");
const BROKEN = fixture("broken.config.ts");
const UNREACHABLE = "postgres://nobody:secret@127.0.0.1:1/nowhere";

/** In this process, with DATABASE_URL set to `databaseUrl` (the ledger opens from process.env) while it runs. */
async function cli(args: readonly string[], databaseUrl?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const saved = process.env.DATABASE_URL;
  if (databaseUrl !== undefined) process.env.DATABASE_URL = databaseUrl;
  try {
    const code = await main(args, { cwd: process.cwd(), env: process.env, stdout: (text) => out.push(text), stderr: (text) => err.push(text) });
    return { code, stdout: out.join("\n"), stderr: err.join("\n") };
  } finally {
    if (saved === undefined) delete process.env.DATABASE_URL;
    else process.env.DATABASE_URL = saved;
  }
}

describe("help and request texts", () => {
  it("trigger --help says where --by goes for a run now, pause --help for a pause", async () => {
    const trigger = await cli(["trigger", "--help"]);
    expect(trigger.stdout).toMatch(/--by <who>\s+who asks, kept with the job: its handler reads it as ctx\.schedule\.trigger\.by/);
    expect(trigger.stdout).not.toContain("pause");
    expect((await cli(["pause", "--help"])).stdout).toContain("who asks, kept with the pause");
    expect((await cli(["resume", "--help"])).stdout).toContain("who asks, in the log line of the resume");
  });

  it("a trigger request with a broken JSON body is told to send request_id, not a note", async () => {
    const untouched: EntryActionsLedger = {
      pause: () => Promise.reject(new Error("not called")),
      resume: () => Promise.reject(new Error("not called")),
      trigger: () => Promise.reject(new Error("not called")),
    };
    const post = (verb: string) => new Request(`http://127.0.0.1/admin/scheduler/entries/${verb}`, { method: "POST", headers: { "content-type": "application/json" }, body: "{" });
    await expect(runEntryAction(untouched, "trigger", post("trigger"))).rejects.toThrow('send {"entry": "<key>", "request_id": "...", "by": "..."}.');
    await expect(runEntryAction(untouched, "pause", post("pause"))).rejects.toThrow('send {"entry": "<key>", "note": "...", "by": "..."}.');
  });
});

describe("--json errors", () => {
  it("a command that fails under --json prints a versioned error document on stdout, and its line on stderr", async () => {
    const failed = await cli(["status", "--config", GOOD, "--json"], UNREACHABLE);
    expect(failed.code).toBe(1);
    const document = JSON.parse(failed.stdout) as CliErrorDocument;
    expect(document).toEqual({ version: 1, error: { code: "connection_refused", message: expect.stringContaining("127.0.0.1:1"), exit_code: 1 } });
    expect(failed.stdout).not.toContain("secret");
    expect(failed.stderr).toMatch(/^error \[connection_refused\]/m);

    const usage = await cli(["preflight", "--config", GOOD, "--format", "json", "--bogus"]);
    expect(usage.code).toBe(2);
    expect(JSON.parse(usage.stdout)).toMatchObject({ version: 1, error: { code: "usage_error", message: expect.stringContaining("--bogus"), exit_code: 2 } });
    // Without --json, stdout stays empty: the line is on stderr only.
    expect((await cli(["next", "--config", GOOD, "--bogus"])).stdout).toBe("");
  });
});

describe("next with invalid entries", () => {
  it("prints the valid entries, names the invalid ones left out, and exits 1", async () => {
    const text = await cli(["next", "--config", BROKEN, "-n", "1", "--from", "2026-03-02T00:00:00Z"]);
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(/\d{4}-\d\d-\d\dT/);
    expect(text.stderr).toContain("6 invalid schedule entries left out of this list: fix them (`cronledger preflight`).");

    const json = await cli(["next", "--config", BROKEN, "-n", "1", "--from", "2026-03-02T00:00:00Z", "--json"]);
    expect(json.code).toBe(1);
    const document = JSON.parse(json.stdout) as NextDocument;
    expect(document.entries).toHaveLength(2);
    // The entries preflight finds broken in the same config, with the same codes.
    const preflight = JSON.parse((await cli(["preflight", "--config", BROKEN, "--json"])).stdout) as { problems: { index: number; code: string }[] };
    expect(preflight.problems).toHaveLength(6);
    expect(document.invalid.flatMap((entry) => entry.problems.map((problem) => [entry.index, problem.code]))).toEqual(preflight.problems.map((problem) => [problem.index, problem.code]));
  });
});

describe("on a database", () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let ledger: Cronledger;
  const checked = defineJob({ name: "texts.valibot", payload: v.object({ invoiceId: v.number() }), run: () => {} });

  beforeAll(async () => {
    database = await createTestDatabase(import.meta.url);
    ledger = createCronledger({ database: database.url, jobs: [checked], logger: silentLogger });
    await ledger.migrate();
  });
  afterAll(async () => {
    await ledger?.close();
    await database?.drop();
  });

  it("a payload a valibot schema refuses is said to fail the job's schema, not a zod one", async () => {
    const refused = ledger.enqueue(checked, { invoiceId: "7" } as unknown as { invoiceId: number });
    await expect(refused).rejects.toThrow("Fix the payload or the job's schema; nothing was written.");
    await expect(ledger.enqueue(checked, { invoiceId: "7" } as unknown as { invoiceId: number })).rejects.not.toThrow(/zod/);
  });

  it("pause of a chore says chores cannot be paused, with chores on or off", async () => {
    for (const [config, chore] of [
      [GOOD, "cronledger.reap"],
      [GOOD, "cronledger.prune"],
      [PAUSE, "cronledger.reap"],
    ] as const) {
      const result = await cli(["pause", chore, "--config", config], database.url);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`error [invalid_argument]: ${chore} is one of cronledger's chores`);
      expect(result.stderr).toContain("chores cannot be paused, resumed, run now or backfilled");
      expect(result.stderr).not.toContain("No schedule entry");
    }
  });
});

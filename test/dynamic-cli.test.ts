import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import config, { sync } from "./fixtures/cli/dynamic.config.js";
import { runCli } from "./support/child.js";
import { useTestDatabase } from "./support/database.js";

// The CLI on dynamic entries (ledger.schedules), built package (npm run build): `status` counts them and lists the
// first page, `plan` counts the entries a release without their job would orphan, `next` takes a dynamic key.
const CONFIG = fileURLToPath(new URL("./fixtures/cli/dynamic.config.ts", import.meta.url));
const digest = defineJob({ name: "tenant.digest", run: () => {} });

const database = useTestDatabase(import.meta.url);
let ledger: Cronledger;
const cli = (command: string, ...args: string[]) => runCli([command, "--config", CONFIG, ...args], { env: { ...process.env, DATABASE_URL: database.url } });

beforeAll(async () => {
  // The running release defines both jobs; the config the CLI reads is the next one, without tenant.digest.
  ledger = createCronledger({ ...config, jobs: [sync, digest], database: database.url, logger: silentLogger, metrics: false });
  await ledger.migrate();
  await ledger.schedules.upsertMany([
    ...Array.from({ length: 25 }, (_, index) => ({ key: `tenant:${String(index).padStart(2, "0")}:sync`, job: sync, cron: "*/15 * * * *" })),
    ...Array.from({ length: 3 }, (_, index) => ({ key: `tenant:${index}:digest`, job: digest, cron: "0 8 * * 1-5", timezone: "Europe/Berlin" })),
  ]);
});
afterAll(() => ledger.close());

describe("cronledger on dynamic entries", () => {
  it("status counts them by state and lists the first 20, naming the command for the rest", async () => {
    const result = await cli("status");
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain("Dynamic entries (ledger.schedules): 28 stored: 0 due, 0 paused, 0 quarantined, 0 never firing again.");
    const rows = result.stdout.split("\n").filter((line) => /^tenant:\S+\s+tenant\./.test(line));
    expect(rows).toHaveLength(20);
    // Key order is byte order: "tenant:09:sync" < "tenant:0:digest" < "tenant:10:sync".
    expect(rows[10]).toMatch(/^tenant:0:digest\s+tenant\.digest\s+0 8 \* \* 1-5\s+Europe\/Berlin\s+active\s+\d{4}-/);
    expect(result.stdout).toContain("More: `cronledger schedules list --after tenant:18:sync` (or --prefix to search by key).");
  });

  it("plan states how many dynamic entries the new config's job names would orphan, and asks for approval", async () => {
    const text = await cli("plan");
    expect(text.code, text.stderr).toBe(3);
    expect(text.stdout).toContain("Dynamic entries (ledger.schedules) of job names the new config does not define:\n  `tenant.digest`: 3 entries");
    expect(text.stdout).toContain("Needs approval: the plan orphans 3 dynamic entries.");
    const json = await cli("plan", "--json");
    expect(JSON.parse(json.stdout)).toMatchObject({ orphans_dynamic_entries: true, dynamic_orphans: { total: 3, by_job: { "tenant.digest": 3 } } });
  });

  it("next lists a dynamic entry's fire times by its key, and refuses a name that is neither", async () => {
    const result = await cli("next", "tenant:1:digest", "-n", "2", "--from", "2026-03-27T12:00:00Z");
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.split("\n").slice(0, 3)).toEqual([
      "tenant.digest [tenant:1:digest]  0 8 * * 1-5  Europe/Berlin",
      "  2026-03-30T08:00:00+02:00  2026-03-30T06:00:00.000Z",
      "  2026-03-31T08:00:00+02:00  2026-03-31T06:00:00.000Z",
    ]);
    const unknown = await cli("next", "tenant:9:nothing");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('No schedule entry has the key, job name or identity "tenant:9:nothing"');
  });
});

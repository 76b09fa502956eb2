import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../src/cli/main.js";
import { loadConfig } from "../src/cli/load-config.js";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import type { ScheduleEntry } from "../src/schedule/define-schedule.js";
import type { PlanDocument, PlanEntryDocument } from "../src/wire/plan.js";
import { createTestDatabase, serverUrl } from "./support/database.js";

const NEW_CONFIG = fileURLToPath(new URL("./fixtures/cli/plan-new.config.ts", import.meta.url));
const BROKEN_CONFIG = fileURLToPath(new URL("./fixtures/cli/broken.config.ts", import.meta.url));
const NEXT_CONFIG = fileURLToPath(new URL("./fixtures/cli/next.config.ts", import.meta.url));
const DAY = 86_400_000;
/** The switch: a Monday at 09:14 UTC, years ahead of the database clock, so the grace counts from it. */
const AT = "2030-01-07T09:14:00.000Z";
const at = (text: string) => new Date(text);

// The old version: the same job names, with the timings and keys the new config changes, and `gone.job`.
const job = (name: string) => defineJob({ name, run: () => {} });
const OLD_JOBS = ["retime.double", "retime.skip", "rekey.job", "keep.hourly", "keep.stale", "keep.paused", "keep.quarantined", "keep.unserved", "gone.job"].map(job);
const byName = (name: string) => OLD_JOBS.find((candidate) => candidate.name === name) ?? job(name);
const OLD_SCHEDULE: ScheduleEntry[] = [
  { job: byName("retime.double"), cron: "0 9 * * *" },
  { job: byName("retime.skip"), cron: "30 9 * * *" },
  { job: byName("rekey.job"), key: "a", cron: "0 12 * * *" },
  { job: byName("keep.hourly"), cron: "0 * * * *" },
  { job: byName("keep.stale"), cron: "0 * * * *", catchUpWindow: "10m" },
  { job: byName("keep.paused"), cron: "0 0 * * *" },
  { job: byName("keep.quarantined"), cron: "0 0 * * *" },
  { job: byName("keep.unserved"), cron: "*/5 * * * *" },
  { job: byName("gone.job"), cron: "*/5 * * * *" },
];

async function cli(args: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { cwd: process.cwd(), env, stdout: (text) => out.push(text), stderr: (text) => err.push(text) });
  return { code, stdout: out.join("\n"), stderr: err.join("\n") };
}

/** Every table of the cronledger schema (partitions included) as one digest each: equal digests, equal bytes. */
async function tableDigests(executor: Cronledger["database"]["db"]): Promise<Record<string, string>> {
  const tables = await query<{ name: string }>(
    executor,
    sql`select c.oid::regclass::text as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'cronledger' and c.relkind in ('r', 'p') order by 1`,
  );
  const digests: Record<string, string> = {};
  for (const { name } of tables) {
    const [row] = await query<{ digest: string; n: number }>(
      executor,
      sql.raw(`select md5(coalesce(string_agg(t::text, E'\\n' order by t::text), '')) as digest, count(*)::int as n from ${name} t`),
    );
    digests[name] = `${row?.n ?? 0}:${row?.digest ?? ""}`;
  }
  return digests;
}

describe("cronledger plan against a live ledger", () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let old: Cronledger;
  const savedUrl = process.env.DATABASE_URL;
  const reader = `cl_plan_reader_${process.pid}_${Date.now().toString(36)}`;

  beforeAll(async () => {
    database = await createTestDatabase("deploy_plan");
    process.env.DATABASE_URL = database.url;
    old = createCronledger({ database: { url: database.url, poolSize: 2 }, jobs: OLD_JOBS, schedule: OLD_SCHEDULE, logger: silentLogger });
    await old.migrate();
    // The old version runs: its rows are created at 09:05, and at 09:10 the five-minute entries fire (jobs queued).
    await old.tick({ now: at("2030-01-07T09:05:00Z") });
    const second = await old.tick({ now: at("2030-01-07T09:10:00Z") });
    expect(second.enqueued.map((slot) => slot.jobName).sort()).toEqual(["gone.job", "keep.unserved"]);
    const key = (name: string) => old.entries.find((entry) => entry.jobName === name)?.ledgerKey ?? "";
    const setSlot = (name: string, iso: string) =>
      query(old.database.db, sql`update cronledger.schedule_state set last_enqueued_slot = ${iso}::timestamptz where key = ${key(name)}`);
    await setSlot("retime.double", "2030-01-07T09:00:00Z"); // fired at 09:00 today
    await setSlot("retime.skip", "2030-01-06T09:30:00Z"); // fired at 09:30 yesterday
    await setSlot("rekey.job", "2030-01-06T12:00:00Z");
    await setSlot("keep.hourly", "2030-01-07T06:00:00Z"); // nothing ticked for three hours
    await setSlot("keep.stale", "2030-01-07T06:00:00Z");
    await query(old.database.db, sql`update cronledger.schedule_state set paused_at = now(), paused_by = 'ops@example', paused_note = 'vendor migration' where key = ${key("keep.paused")}`);
    await query(
      old.database.db,
      sql`update cronledger.schedule_state set quarantined_until = now() + interval '1 hour', quarantine_reason = 'boom', quarantine_count = 2, quarantined_since = now() where key = ${key("keep.quarantined")}`,
    );
    // A live worker of the old version: it knows every old job name but keep.unserved.
    const names = OLD_JOBS.map((definition) => definition.name).filter((name) => name !== "keep.unserved");
    await query(
      old.database.db,
      sql.raw(`insert into cronledger.workers (id, namespace, job_names, queues, lease_ms) values ('old-worker', 'default', '{${names.join(",")}}', '{default}', 3600000)`),
    );
  });

  afterAll(async () => {
    process.env.DATABASE_URL = savedUrl;
    if (savedUrl === undefined) delete process.env.DATABASE_URL;
    await old.close();
    await database.drop();
    const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
    await admin.unsafe(`drop role if exists "${reader}"`);
    await admin.end({ timeout: 1 });
  });

  const entryOf = (plan: PlanDocument, job: string) => plan.entries.find((entry) => entry.job === job) as PlanEntryDocument;

  it("lists each kind of difference as JSON, and exits 3 because it retires rows and drops a job name", async () => {
    const result = await cli(["plan", "--config", NEW_CONFIG, "--at", AT, "--json"]);
    expect(result.code, result.stderr).toBe(3);
    const plan = JSON.parse(result.stdout) as PlanDocument;
    expect(plan).toMatchObject({ version: 1, ok: true, namespace: "default", switch_at: AT, grace_ms: 7 * DAY, live_workers: 1, retires_rows: true, drops_job_names: true, problems: [] });

    const doubled = entryOf(plan, "retime.double");
    expect(doubled).toMatchObject({ kind: "retimed", served: true, first: { slot: "2030-01-07T09:30:00.000Z" }, retires_at: new Date(Date.parse(AT) + 7 * DAY).toISOString() });
    expect(doubled.row?.identity).toEqual({ job: "retime.double", key: null, cron: "0 9 * * *", timezone: "UTC" });
    expect(doubled.switch).toMatchObject({ verdict: "doubled", last_old: "2030-01-07T09:00:00.000Z", first_new: "2030-01-07T09:30:00.000Z" });

    const skipped = entryOf(plan, "retime.skip");
    expect(skipped).toMatchObject({ kind: "retimed", first: { slot: "2030-01-08T09:00:00.000Z" }, switch: { verdict: "skipped", last_old: "2030-01-06T09:30:00.000Z" } });
    expect(skipped.switch?.message).toContain("the new timing's 2030-01-07T09:00:00+00:00 is before the switch");

    expect(entryOf(plan, "rekey.job")).toMatchObject({ kind: "rekeyed", key: "b", row: { identity: { key: "a" } }, first: { slot: "2030-01-07T12:00:00.000Z" }, switch: { verdict: "ok" } });

    expect(entryOf(plan, "keep.hourly")).toMatchObject({ kind: "unchanged", overdue: { slot: "2030-01-07T09:00:00.000Z", stale: false, passed_over: 2 }, first: { slot: "2030-01-07T10:00:00.000Z" } });
    expect(entryOf(plan, "keep.stale")).toMatchObject({ kind: "unchanged", overdue: { slot: "2030-01-07T09:00:00.000Z", stale: true, passed_over: 2 } });
    expect(entryOf(plan, "keep.paused").row?.carried).toMatchObject({ paused: { by: "ops@example", note: "vendor migration" }, quarantine: null, waiting_for_worker: 0 });
    expect(entryOf(plan, "keep.quarantined").row?.carried).toMatchObject({ paused: null, quarantine: { count: 2, reason: "boom" } });
    expect(entryOf(plan, "keep.unserved")).toMatchObject({ kind: "unchanged", served: false, overdue: null, row: { queued: 1, carried: { waiting_for_worker: 1 } } });
    expect(entryOf(plan, "new.job")).toMatchObject({ kind: "added", served: false, row: null, first: { slot: "2030-01-07T10:15:00.000Z" } });

    expect(plan.removed.filter((item) => !item.chore)).toEqual([
      expect.objectContaining({
        served_by_live_worker: true,
        served_by_new_config: false,
        retires_at: new Date(Date.parse(AT) + 7 * DAY).toISOString(),
        row: expect.objectContaining({ job: "gone.job", queued: 1, running: 0, last_enqueued_slot: "2030-01-07T09:10:00.000Z" }),
      }),
    ]);
    expect(plan.dropped_job_names).toEqual([{ job: "gone.job", queued: 1, running: 0 }]);
    expect(plan.unserved_job_names).toEqual(["keep.unserved", "new.job"]);
  });

  it("gives programs the same plan through ledger.plan()", async () => {
    const config = await loadConfig(NEW_CONFIG);
    const next = createCronledger({ ...config, database: database.url, logger: silentLogger });
    try {
      const plan = await next.plan({ at: new Date(AT) });
      const kinds = Object.fromEntries(plan.entries.filter((item) => !item.chore).map((item) => [item.entry.jobName, item.kind]));
      expect(kinds).toEqual({
        "retime.double": "retimed",
        "retime.skip": "retimed",
        "rekey.job": "rekeyed",
        "keep.hourly": "unchanged",
        "keep.stale": "unchanged",
        "keep.paused": "unchanged",
        "keep.quarantined": "unchanged",
        "keep.unserved": "unchanged",
        "new.job": "added",
      });
      expect(plan.removed.map((item) => item.row.jobName)).toContain("gone.job");
    } finally {
      await next.close();
    }
  });

  it("says a removed row that never fired never fired, instead of calling its creation its last slot", async () => {
    const result = await cli(["plan", "--config", BROKEN_CONFIG, "--at", AT]);
    // The line under the removed row's head.
    const removed = (job: string) => new RegExp(`\`${job.replace(".", "\\.")}\` [^\n]*\n\\s+(its row retires[^\n]*)`).exec(result.stdout)?.[1] ?? "";
    expect(removed("gone.job")).toMatch(/its last slot was 2030-01-07T09:10:00\.000Z/);
    expect(removed("keep.paused")).toMatch(/it never fired \(its row was created \d{4}-/);
    expect(removed("keep.paused")).not.toContain("last slot");
    const json = JSON.parse((await cli(["plan", "--config", BROKEN_CONFIG, "--at", AT, "--json"])).stdout) as PlanDocument;
    const rows = Object.fromEntries(json.removed.map((item) => [item.row.job, item.row.handled]));
    expect(rows).toMatchObject({ "gone.job": true, "keep.paused": false });
  });

  it("prints text and markdown that say the same, with the verdict last", async () => {
    const text = await cli(["plan", "--config", NEW_CONFIG, "--at", AT]);
    expect(text.code).toBe(3);
    expect(text.stdout).toContain("cronledger preflight passed");
    expect(text.stdout).toContain("Entries: 1 added, 2 retimed, 1 re-keyed, 1 removed, 5 unchanged.");
    expect(text.stdout).toMatch(/runs twice across the switch: the old timing's 2030-01-07T09:00:00\+00:00 and the new timing's 2030-01-07T09:30:00\+00:00 are 30m apart/);
    expect(text.stdout).toContain("slot 2030-01-07T09:00:00+00:00 (2030-01-07T09:00:00.000Z) is skipped as stale on the first tick (older than the catch-up window, 10m)");
    expect(text.stdout).toContain("slot 2030-01-07T09:00:00+00:00 (2030-01-07T09:00:00.000Z) fires at once on the first tick (inside the catch-up window, 1d)");
    expect(text.stdout).toContain('paused since');
    expect(text.stdout).toContain('by ops@example ("vendor migration"): stays paused');
    expect(text.stdout.trim().split("\n").at(-1)).toBe("Needs approval: the plan retires 4 ledger rows and drops 1 job name (gone.job).");

    const markdown = await cli(["plan", "--config", NEW_CONFIG, "--at", AT, "--format", "markdown"]);
    expect(markdown.code).toBe(3);
    expect(markdown.stdout).toContain("### cronledger deploy plan");
    expect(markdown.stdout).toContain("**Needs approval: the plan retires 4 ledger rows and drops 1 job name (gone.job).**");
    expect(markdown.stdout).toContain("#### Removed");
    expect(markdown.stdout).toContain("#### Preflight\n\ncronledger preflight passed");
    expect(markdown.stdout).toContain("- `gone.job` `*/5 * * * *` UTC");
    expect(markdown.stdout).toContain("  - 1 queued job, 0 running; only the old version's live workers register the job");
  });

  it("runs every preflight check first: a broken config's problems as GitHub annotations at their lines, exit 1, and the plan of its valid entries", async () => {
    const result = await cli(["plan", "--config", BROKEN_CONFIG, "--at", AT, "--format", "github"]);
    expect(result.code, result.stderr).toBe(1);
    const annotations = result.stdout.split("\n").filter((line) => line.startsWith("::error "));
    expect(annotations).toHaveLength(6);
    expect(annotations[0]).toMatch(/^::error file=test\/fixtures\/cli\/broken-schedule\.ts,line=\d+,col=3,title=cronledger invalid_cron in schedule\[2\]::/);
    expect(result.stdout).toContain("cronledger preflight failed: 6 errors, 0 warnings in 8 schedule entries");
    // The two valid entries are planned against the live ledger, where they are new; the old rows are all removed.
    expect(result.stdout).toContain("Entries: 2 added, 0 retimed, 0 re-keyed, 9 removed, 0 unchanged.");
    expect(result.stdout).toMatch(/^::warning title=cronledger plan::Needs approval: the plan retires \d+ ledger rows and drops/m);
  });

  it("changes nothing: every cronledger table is byte-for-byte the same after plan and next, run as a role that can only read", async () => {
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create role "${reader}" login`);
    await admin.unsafe(`grant connect on database "${new URL(database.url).pathname.slice(1)}" to "${reader}"`);
    for (const schema of await admin<{ nspname: string }[]>`select nspname from pg_namespace where nspname not like 'pg\\_%' and nspname <> 'information_schema'`) {
      await admin.unsafe(`grant usage on schema "${schema.nspname}" to "${reader}"; grant select on all tables in schema "${schema.nspname}" to "${reader}"`);
    }
    await admin.end({ timeout: 1 });
    const readOnly = new URL(database.url);
    readOnly.username = reader;
    readOnly.password = "";

    const before = await tableDigests(old.database.db);
    expect(Object.keys(before).length).toBeGreaterThan(5);
    process.env.DATABASE_URL = readOnly.toString();
    try {
      const planned = await cli(["plan", "--config", NEW_CONFIG, "--at", AT, "--json"]);
      expect(planned.code, planned.stderr).toBe(3);
      expect((JSON.parse(planned.stdout) as PlanDocument).entries.length).toBeGreaterThan(8);
      const upcoming = await cli(["next", "--config", NEXT_CONFIG, "-n", "2", "--json"]);
      expect(upcoming.code, upcoming.stderr).toBe(0);
      // The role really cannot write: the same plan path would have failed had it tried.
      const probe = postgres(readOnly.toString(), { max: 1, onnotice: () => {} });
      await expect(probe.unsafe("update cronledger.schedule_state set job_name = job_name")).rejects.toThrow(/permission denied/);
      await probe.end({ timeout: 1 });
    } finally {
      process.env.DATABASE_URL = database.url;
    }
    expect(await tableDigests(old.database.db)).toEqual(before);
  });
});

describe("a ledger row's identity read back from its key", () => {
  it("takes the parts from the right, so a job name may hold '|', and gives up on a key bounded to a digest", async () => {
    const { identityOf } = await import("../src/schedule/deploy-plan.js");
    const { entryIdentity, ledgerKey } = await import("../src/schedule/identity.js");
    const key = ledgerKey("ns", entryIdentity({ jobName: "billing|eu", key: "nightly", canonicalCron: "0 2 * * *", timezone: "Europe/Berlin" }));
    expect(identityOf("ns", key)).toEqual({ jobName: "billing|eu", entryKey: "nightly", cron: "0 2 * * *", timezone: "Europe/Berlin" });
    expect(identityOf("ns", ledgerKey("ns", entryIdentity({ jobName: "a", key: undefined, canonicalCron: "* * * * *", timezone: "UTC" })))).toEqual({ jobName: "a", entryKey: undefined, cron: "* * * * *", timezone: "UTC" });
    const long = ledgerKey("ns", entryIdentity({ jobName: "x".repeat(300), key: undefined, canonicalCron: "* * * * *", timezone: "UTC" }));
    expect(long).toHaveLength(255);
    expect(identityOf("ns", long)).toBeNull();
    expect(identityOf("other", key)).toBeNull();
  });
});

import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { availableMigrations } from "../src/db/migrate.js";
import { REPO_ROOT, watch, type Finished } from "./support/child.js";
import { createTestDatabase } from "./support/database.js";
import { errorsBeyondDrizzle } from "./support/tsc.js";

/**
 * The package as users get it: `npm pack`, then throw-away apps in a temp
 * directory install the tarball (its dependencies come from npm's cache,
 * warm from this checkout's install) and load it the ways apps do.
 * `npm test` builds dist/ first; the pack itself runs no scripts.
 */

const WORKTREE_BIN = join(REPO_ROOT, "node_modules", ".bin");
/** Each test runs installed tools (node, tsx, tsc, drizzle-kit, the CLI) as child processes. */
const TIMEOUT_MS = 180_000;
const versionOf = (name: string) => (JSON.parse(readFileSync(join(REPO_ROOT, "node_modules", name, "package.json"), "utf8")) as { version: string }).version;

async function run(command: string, args: readonly string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<Finished> {
  const finished = await watch(command, args, { cwd: options.cwd, env: options.env ?? process.env }).exited;
  if (finished.code !== 0) throw new Error(`${command} ${args.join(" ")} exited ${finished.code}:\n${finished.stdout}\n${finished.stderr}`);
  return finished;
}

function write(dir: string, files: Record<string, string>): string {
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, ".."), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

/** Columns, indexes and constraints of the cronledger schema, as the server describes them. */
async function catalog(url: string): Promise<unknown> {
  const client = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return {
      columns: await client`
        select table_name, column_name, data_type, is_nullable, column_default, is_identity, identity_generation
        from information_schema.columns where table_schema = 'cronledger' order by table_name, column_name`,
      indexes: await client`select indexname, indexdef from pg_indexes where schemaname = 'cronledger' order by indexname`,
      constraints: await client`
        select conrelid::regclass::text as on_table, conname, pg_get_constraintdef(oid) as definition
        from pg_constraint where connamespace = 'cronledger'::regnamespace order by conname`,
    };
  } finally {
    await client.end({ timeout: 1 });
  }
}

const APP_CODE = (load: string) => `${load}
const silent = { debug() {}, info() {}, warn() {}, error() {} };
const ping = defineJob({ name: "package.ping", run() {} });
const problems = validateSchedule([{ job: ping, cron: "0 9 * * 1-5" }, { job: ping, cron: "61 * * * *", key: "bad" }], [ping]);
const ledger = createCronledger({ database: process.env.DATABASE_URL, jobs: [ping], logger: silent });
const before = await ledger.enqueue(ping).then(() => "enqueued", (error) => (error instanceof MigrationRequiredError ? error.code : String(error)));
const migrated = await ledger.migrate();
const job = await ledger.enqueue(ping, undefined, { idempotencyKey: "package-test" });
await ledger.close();
console.log(JSON.stringify({ problems: problems.map((problem) => problem.code), tables: [getViewConfig(jobs).name, getTableConfig(scheduleState).name], before, migrated, jobId: job.id }));
`;

describe("the packed package", () => {
  let root: string;
  let apps: Awaited<ReturnType<typeof createTestDatabase>>;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "cronledger-package-"));
    apps = await createTestDatabase("package-apps");
    const packed = await run("npm", ["pack", "--ignore-scripts", "--pack-destination", root, "--json"], { cwd: REPO_ROOT });
    const [{ filename }] = JSON.parse(packed.stdout) as [{ filename: string }];
    write(root, { "package.json": JSON.stringify({ name: "throwaway-apps", private: true }) });
    await run(
      "npm",
      ["install", join(root, filename), `drizzle-kit@${versionOf("drizzle-kit")}`, `tsx@${versionOf("tsx")}`, "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts"],
      { cwd: root },
    );
  }, 240_000);

  afterAll(async () => {
    await apps?.drop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it("a CommonJS app requires cronledger and cronledger/schema, then an ESM app imports them, on one database", async () => {
    const env = { ...process.env, DATABASE_URL: apps.url };
    const cjs = write(join(root, "cjs-app"), {
      "package.json": JSON.stringify({ type: "commonjs" }),
      "main.js": `const { createCronledger, defineJob, validateSchedule, MigrationRequiredError } = require("cronledger");
const { jobs, scheduleState } = require("cronledger/schema");
const { getTableConfig, getViewConfig } = require("drizzle-orm/pg-core");
(async () => {${APP_CODE("")}})();`,
    });
    const esm = write(join(root, "esm-app"), {
      "package.json": JSON.stringify({ type: "module" }),
      "main.js": APP_CODE(`import { createCronledger, defineJob, validateSchedule, MigrationRequiredError } from "cronledger";
import { jobs, scheduleState } from "cronledger/schema";
import { getTableConfig, getViewConfig } from "drizzle-orm/pg-core";`),
    });
    const fromCjs = JSON.parse((await run(process.execPath, ["main.js"], { cwd: cjs, env })).stdout) as Record<string, unknown>;
    expect(fromCjs).toEqual({
      problems: ["invalid_cron"],
      tables: ["jobs", "schedule_state"],
      before: "migration_required",
      migrated: { applied: availableMigrations(), adopted: 0 },
      jobId: expect.any(Number),
    });
    const fromEsm = JSON.parse((await run(process.execPath, ["main.js"], { cwd: esm, env })).stdout) as Record<string, unknown>;
    // The database is migrated now; the same idempotency key finds the CommonJS app's job.
    expect(fromEsm).toEqual({ ...fromCjs, before: "enqueued", migrated: { applied: 0, adopted: 0 } });
  }, TIMEOUT_MS);

  it("tsx runs a TypeScript app, and TypeScript resolves the types from ESM and from CommonJS", async () => {
    const dir = write(join(root, "ts-app"), {
      "package.json": JSON.stringify({ type: "module" }),
      "main.ts": `import { defineJob, slotCalendar, type JobContext } from "cronledger";
import { jobs } from "cronledger/schema";
import { z } from "zod";
const job = defineJob({ name: "ts.typed", payload: z.object({ n: z.number() }), run: async (payload, ctx: JobContext) => void [payload.n, ctx.attempt] });
const next: Date | null = slotCalendar("0 0 1 1 *", { timezone: "UTC" }).next(new Date("2026-06-01T00:00:00Z"));
const column: string = jobs.jobName.name;
console.log(job.name, next?.toISOString(), column);
`,
      "check.cts": `import cronledger = require("cronledger");
import schema = require("cronledger/schema");
const job: cronledger.JobDefinition = cronledger.defineJob({ name: "cts.typed", run() {} });
const table: typeof schema.jobs = schema.jobs;
const error: cronledger.CronledgerError = new cronledger.MigrationRequiredError({ database: "x", foundVersion: 0, requiredVersion: 1, requiredMigration: "0000_init", missing: [], empty: true });
export = [job, table, error];
`,
    });
    const ran = await run(join(root, "node_modules", ".bin", "tsx"), ["main.ts"], { cwd: dir });
    expect(ran.stdout.trim()).toBe("ts.typed 2027-01-01T00:00:00.000Z job_name");
    const typeRoots = join(REPO_ROOT, "node_modules", "@types");
    // node16, not nodenext: under nodenext TypeScript lets CommonJS require ESM types, so a missing CommonJS build would pass.
    await run(
      join(WORKTREE_BIN, "tsc"),
      ["--noEmit", "--strict", "--skipLibCheck", "--module", "node16", "--moduleResolution", "node16", "--types", "node", "--typeRoots", typeRoots, "main.ts", "check.cts"],
      { cwd: dir },
    );
  }, TIMEOUT_MS);

  it("route (b): drizzle-kit generates cronledger's tables from a schema re-exporting cronledger/schema and migrates them; cronledger adopts them, and a tick and a worker run", async () => {
    const fromApp = await createTestDatabase("package-route-b");
    const fromCronledger = await createTestDatabase("package-route-a");
    try {
      const env = { ...process.env, DATABASE_URL: fromApp.url };
      const dir = write(join(root, "drizzle-app"), {
        "package.json": JSON.stringify({ type: "module" }),
        "src/schema.ts": `export const appTables = {};\nexport * from "cronledger/schema";\n`,
        "drizzle.config.ts": `import { defineConfig } from "drizzle-kit";
export default defineConfig({ dialect: "postgresql", schema: "./src/schema.ts", out: "./drizzle", dbCredentials: { url: process.env.DATABASE_URL! } });
`,
        "cronledger.config.ts": `import { defineConfig, defineJob } from "cronledger";
const hello = defineJob({ name: "app.hello", retry: "maintenance", async run(_payload, ctx) { ctx.log.info("app.hello ran", { slot: ctx.scheduledFor?.toISOString() }); } });
export default defineConfig({ jobs: [hello], schedule: [{ job: hello, cron: "* * * * * *" }] });
`,
      });
      const drizzleKit = join(root, "node_modules", ".bin", "drizzle-kit");
      const cronledger = join(root, "node_modules", ".bin", "cronledger");
      await run(drizzleKit, ["generate"], { cwd: dir, env });
      const generated = readdirSync(join(dir, "drizzle")).filter((name) => name.endsWith(".sql"));
      expect(generated).toHaveLength(1);
      if (availableMigrations() === 1) {
        // One migration of ours: the app's generated file is that file, byte for byte.
        expect(readFileSync(join(dir, "drizzle", generated[0] ?? ""), "utf8")).toBe(readFileSync(join(REPO_ROOT, "drizzle", "0000_init.sql"), "utf8"));
      }

      await run(drizzleKit, ["migrate"], { cwd: dir, env });
      await run(process.execPath, [join(REPO_ROOT, "bin", "cronledger.js"), "migrate"], { cwd: tmpdir(), env: { ...process.env, DATABASE_URL: fromCronledger.url } });
      // drizzle-kit cannot say PARTITION BY: until `cronledger migrate` partitions the history, cronledger refuses to run.
      const refused = await watch(cronledger, ["tick", "--once"], { cwd: dir, env }).exited;
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/migration_required.*lack partitioning of cronledger\.job_history/);

      const adopted = await run(cronledger, ["migrate"], { cwd: dir, env });
      expect(adopted.stdout).toContain(`recorded ${availableMigrations()} migration`);
      expect(adopted.stdout).toContain("Database is up to date");
      // Whatever migrations drizzle/ holds, both routes leave the same tables, partitions included.
      expect(await catalog(fromApp.url)).toEqual(await catalog(fromCronledger.url));
      const again = await run(cronledger, ["migrate"], { cwd: dir, env });
      expect(again.stdout.trim()).toMatch(/^Database is up to date/);

      const tick = await run(cronledger, ["tick", "--once"], { cwd: dir, env });
      expect(tick.stdout).toMatch(/^Tick at .*1 new ledger row/);
      const worker = watch(cronledger, ["worker", "--concurrency", "2"], { cwd: dir, env });
      try {
        await worker.waitFor(/app\.hello ran/, 30_000);
      } finally {
        worker.child.kill("SIGTERM");
      }
      const stopped = await worker.exited;
      expect(stopped.stderr).not.toMatch(/error/i);
    } finally {
      await fromApp.drop();
      await fromCronledger.drop();
    }
  }, TIMEOUT_MS);

  it("ships every file its README, docs and messages point to, and docs that stand on their own", async () => {
    const installed = join(root, "node_modules", "cronledger");
    const pointers: string[] = [];
    for (const doc of ["README.md", "docs/operations.md", "docs/decisions.md", "docs/benchmarks.md", "docs/wire-format.md", "examples/drizzle-app/README.md"]) {
      const text = readFileSync(join(installed, doc), "utf8");
      expect(text, doc).not.toMatch(/DESIGN/);
      for (const [, link] of text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        if (link === undefined || /^[a-z]+:/.test(link)) continue;
        pointers.push(join(doc, "..", link));
      }
    }
    // Paths named in messages and comments of the built code ("see docs/operations.md").
    const built = readdirSync(join(installed, "dist"), { recursive: true, encoding: "utf8" }).filter((file) => /\.(c?js|d\.ts)$/.test(file));
    for (const file of built) {
      const text = readFileSync(join(installed, "dist", file), "utf8");
      expect(text, file).not.toMatch(/DESIGN/);
      for (const [path] of text.matchAll(/\b(?:docs|examples)\/[\w./-]+\.(?:md|ts)\b/g)) pointers.push(path);
    }
    expect(pointers.length).toBeGreaterThan(5);
    for (const pointer of new Set(pointers)) expect(existsSync(join(installed, pointer)), pointer).toBe(true);
    const manifest = JSON.parse(readFileSync(join(installed, "package.json"), "utf8")) as Record<string, unknown>;
    expect(manifest).toMatchObject({ repository: expect.anything(), homepage: expect.stringMatching(/^https:\/\//), engines: { node: expect.any(String) } });
    // The license the manifest names ships as its text.
    expect(manifest.license).toBe("MIT");
    expect(readFileSync(join(installed, "LICENSE"), "utf8")).toMatch(/^MIT License\n\nCopyright \(c\) \d{4} [\s\S]*THE SOFTWARE IS PROVIDED "AS IS"/);
  });

  it("an app without PGlite (an optional peer dependency) typechecks with skipLibCheck: false, runs on PostgreSQL, and is told what to install for the embedded default", async () => {
    expect(existsSync(join(root, "node_modules", "@electric-sql", "pglite"))).toBe(false);
    const dir = write(join(root, "no-pglite-app"), {
      "package.json": JSON.stringify({ type: "module" }),
      "main.ts": `import { createCronledger, defineJob, DependencyMissingError } from "cronledger";
import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { z } from "zod";
const remind = defineJob({ name: "no-pglite.remind", payload: z.object({ invoiceId: z.number() }), run: (payload) => void payload.invoiceId.toFixed() });
const client = postgres(process.env.APP_DATABASE_URL ?? "", { max: 2, onnotice: () => {} });
const db = drizzle(client);
const ledger = createCronledger({ database: process.env.APP_DATABASE_URL, jobs: [remind], logger: { debug() {}, info() {}, warn() {}, error() {} } });
await ledger.migrate();
const job = await db.transaction((tx) => ledger.enqueue(remind, { invoiceId: 1 }, { db: tx }));
const worked = await ledger.work({ once: true });
await ledger.close();
await client.end();
let embedded = "opened";
try {
  createCronledger({ jobs: [remind] });
} catch (error) {
  embedded = error instanceof DependencyMissingError ? \`\${error.code} \${error.packageName}: \${error.message}\` : String(error);
}
console.log(JSON.stringify({ created: job.created, succeeded: worked.succeeded, embedded }));
`,
    });
    const checked = await watch(
      join(WORKTREE_BIN, "tsc"),
      ["--noEmit", "--strict", "--skipLibCheck", "false", "--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022", "--types", "node", "--typeRoots", join(REPO_ROOT, "node_modules", "@types"), "main.ts"],
      { cwd: dir },
    ).exited;
    expect(checked.stdout).not.toMatch(/pglite/i);
    expect(errorsBeyondDrizzle(checked.stdout)).toEqual([]);
    const ran = await run(join(root, "node_modules", ".bin", "tsx"), ["main.ts"], { cwd: dir, env: { ...process.env, APP_DATABASE_URL: apps.url, DATABASE_URL: "" } });
    expect(JSON.parse(ran.stdout) as unknown).toEqual({ created: true, succeeded: 1, embedded: expect.stringMatching(/^dependency_missing @electric-sql\/pglite: .*npm install @electric-sql\/pglite/) });
  }, TIMEOUT_MS);

  it("an app that installs PGlite gets the embedded default, from ESM and from CommonJS", async () => {
    // As npm places the app's own install, without a download: the copy this checkout installed.
    mkdirSync(join(root, "node_modules", "@electric-sql"), { recursive: true });
    symlinkSync(join(REPO_ROOT, "node_modules", "@electric-sql", "pglite"), join(root, "node_modules", "@electric-sql", "pglite"), "dir");
    const code = (load: string) => `${load}
const ping = defineJob({ name: "embedded.ping", run() {} });
const ledger = createCronledger({ database: "memory://", jobs: [ping], logger: { debug() {}, info() {}, warn() {}, error() {} } });
await ledger.migrate();
await ledger.enqueue(ping);
const worked = await ledger.work({ once: true });
await ledger.close();
console.log(ledger.database.kind, worked.succeeded);
`;
    const esm = write(join(root, "pglite-esm-app"), { "package.json": JSON.stringify({ type: "module" }), "main.js": code(`import { createCronledger, defineJob } from "cronledger";`) });
    const cjs = write(join(root, "pglite-cjs-app"), {
      "package.json": JSON.stringify({ type: "commonjs" }),
      "main.js": `const { createCronledger, defineJob } = require("cronledger");\n(async () => {${code("")}})();`,
    });
    const env = { ...process.env, DATABASE_URL: "" };
    expect((await run(process.execPath, ["main.js"], { cwd: esm, env })).stdout.trim()).toBe("pglite 1");
    expect((await run(process.execPath, ["main.js"], { cwd: cjs, env })).stdout.trim()).toBe("pglite 1");
    // Not shipped: the first embedded database built the template in the app's node_modules/.cache.
    expect(readdirSync(join(root, "node_modules", ".cache", "cronledger"))).toEqual([expect.stringMatching(/^pglite-[\d.]+\.tar\.gz$/)]);
  }, TIMEOUT_MS);
});

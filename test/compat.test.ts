import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, watch, type Finished } from "./support/child.js";
import { createTestDatabase } from "./support/database.js";
import { errorsBeyondDrizzle } from "./support/tsc.js";

/**
 * The compatibility matrix: the `npm pack` tarball in generated apps, each on
 * one combination of drizzle-orm (the oldest and the newest supported), driver
 * (postgres.js, node-postgres), payload validator (zod 3 classic and its
 * `zod/v4` entry, zod 4, valibot, arktype) and module system (ESM,
 * CommonJS). Every app typechecks with `skipLibCheck: false`, is compiled by
 * tsc, and runs a transactional enqueue (one committed, one rolled back) and a
 * scheduled job against real PostgreSQL.
 *
 * Nothing is downloaded: the versions are this repository's devDependencies
 * (npm aliases such as `zod3` and `drizzle-orm-oldest`, so `npm ci` brings
 * them), and each app's node_modules links to them under the names an app
 * uses, laid out as npm lays out an install: the app's own packages (and
 * cronledger's peers) beside cronledger, cronledger's regular dependencies
 * inside it. A peer dependency made regular again would put a second
 * drizzle-orm inside cronledger, as npm would, and the apps on the oldest
 * drizzle-orm would no longer typecheck `{ db: tx }`.
 */

type Module = "esm" | "cjs";
type Driver = "postgres.js" | "node-postgres";
type Validator = "zod 3 classic" | "zod 3 zod/v4" | "zod 4" | "valibot" | "arktype";
type Drizzle = "oldest" | "newest";

interface App {
  readonly name: string;
  readonly drizzle: Drizzle;
  readonly driver: Driver;
  readonly validator: Validator;
  readonly module: Module;
}

/** Each value of every dimension, each driver and module system with both drizzle-orm versions, in eleven apps rather than forty. */
const APPS: readonly App[] = [
  { name: "oldest-pgjs-zod3v4-esm", drizzle: "oldest", driver: "postgres.js", validator: "zod 3 zod/v4", module: "esm" },
  { name: "oldest-pg-valibot-cjs", drizzle: "oldest", driver: "node-postgres", validator: "valibot", module: "cjs" },
  { name: "oldest-pgjs-arktype-cjs", drizzle: "oldest", driver: "postgres.js", validator: "arktype", module: "cjs" },
  { name: "oldest-pg-zod3-esm", drizzle: "oldest", driver: "node-postgres", validator: "zod 3 classic", module: "esm" },
  { name: "oldest-pgjs-zod4-esm", drizzle: "oldest", driver: "postgres.js", validator: "zod 4", module: "esm" },
  { name: "newest-pgjs-zod4-cjs", drizzle: "newest", driver: "postgres.js", validator: "zod 4", module: "cjs" },
  { name: "newest-pg-zod4-esm", drizzle: "newest", driver: "node-postgres", validator: "zod 4", module: "esm" },
  { name: "newest-pgjs-valibot-esm", drizzle: "newest", driver: "postgres.js", validator: "valibot", module: "esm" },
  { name: "newest-pg-arktype-esm", drizzle: "newest", driver: "node-postgres", validator: "arktype", module: "esm" },
  { name: "newest-pg-zod3v4-cjs", drizzle: "newest", driver: "node-postgres", validator: "zod 3 zod/v4", module: "cjs" },
  { name: "newest-pgjs-zod3-cjs", drizzle: "newest", driver: "postgres.js", validator: "zod 3 classic", module: "cjs" },
];

/** The repository's node_modules folder each drizzle-orm of the matrix is installed in (package.json devDependencies). */
const DRIZZLE_FOLDER: Record<Drizzle, string> = { oldest: "drizzle-orm-oldest", newest: "drizzle-orm" };

/** Per validator: the repository folders linked into the app (as the names the app imports), its import, and the payload schema. */
const VALIDATORS: Record<Validator, { links: Record<string, string>; load: string; schema: string }> = {
  "zod 3 classic": { links: { zod: "zod3" }, load: `import { z } from "zod";`, schema: "z.object({ invoiceId: z.number().int(), note: z.string().optional() })" },
  "zod 3 zod/v4": { links: { zod: "zod3" }, load: `import { z } from "zod/v4";`, schema: "z.object({ invoiceId: z.number().int(), note: z.string().optional() })" },
  "zod 4": { links: { zod: "zod" }, load: `import { z } from "zod";`, schema: "z.object({ invoiceId: z.number().int(), note: z.string().optional() })" },
  valibot: { links: { valibot: "valibot" }, load: `import * as v from "valibot";`, schema: "v.object({ invoiceId: v.pipe(v.number(), v.integer()), note: v.optional(v.string()) })" },
  arktype: { links: { arktype: "arktype" }, load: `import { type } from "arktype";`, schema: `type({ invoiceId: "number.integer", "note?": "string" })` },
};

const DRIVERS: Record<Driver, { links: Record<string, string>; load: string; open: string; close: string }> = {
  "postgres.js": {
    links: { postgres: "postgres" },
    load: `import { drizzle } from "drizzle-orm/postgres-js";\nimport postgres from "postgres";`,
    open: `const client = postgres(url, { max: 2, onnotice: () => {} });\n  const db = drizzle(client);`,
    close: "await client.end({ timeout: 5 });",
  },
  "node-postgres": {
    links: { pg: "pg", "@types/pg": "@types/pg" },
    load: `import { drizzle } from "drizzle-orm/node-postgres";\nimport pg from "pg";`,
    open: `const pool = new pg.Pool({ connectionString: url, max: 2 });\n  const db = drizzle(pool);`,
    close: "await pool.end();",
  },
};

function appSource(app: App): string {
  const validator = VALIDATORS[app.validator];
  const driver = DRIVERS[app.driver];
  const body = `
  const url = process.env.APP_DATABASE_URL ?? "";
  const silent = { debug() {}, info() {}, warn() {}, error() {} };
  const seen: string[] = [];
  const remind = defineJob({
    name: "compat.${app.name}.remind",
    payload: ${validator.schema},
    run(payload) {
      seen.push(\`remind \${payload.invoiceId.toFixed(0)}\${payload.note === undefined ? "" : \` \${payload.note.toUpperCase()}\`}\`);
    },
  });
  const nightly = defineJob({
    name: "compat.${app.name}.nightly",
    run(_payload, ctx) {
      seen.push(\`nightly \${ctx.scheduledFor?.toISOString() ?? "unscheduled"}\`);
    },
  });
  // The payload type comes from the app's validator: a string invoiceId does not compile.
  // @ts-expect-error invoiceId is a number
  const wrong: Parameters<typeof remind.run>[0] = { invoiceId: "7" };
  void wrong;
  const ledger = createCronledger({
    database: url,
    jobs: [remind, nightly],
    schedule: defineSchedule([{ job: nightly, cron: "*/10 * * * * *" }]),
    logger: silent,
  });
  ${driver.open}
  await ledger.migrate();
  await db.transaction(async (tx) => {
    await ledger.enqueue(remind, { invoiceId: 1, note: "committed" }, { db: tx });
  });
  const rolledBack = await db
    .transaction(async (tx) => {
      await ledger.enqueue(remind, { invoiceId: 2 }, { db: tx });
      throw new Error("the business write failed");
    })
    .then(() => "committed", (error: unknown) => (error instanceof Error ? error.message : String(error)));
  // The first pass records the entry; the next one, past its next slot, fires it.
  await ledger.tick({ now: new Date("2026-06-01T12:00:01.000Z") });
  const tick = await ledger.tick({ now: new Date("2026-06-01T12:00:11.000Z") });
  const worked = await ledger.work({ once: true });
  await ledger.close();
  ${driver.close}
  console.log(JSON.stringify({ rolledBack, enqueued: tick.enqueued.length, succeeded: worked.succeeded, seen }));
`;
  const imports = `import { createCronledger, defineJob, defineSchedule } from "cronledger";\n${driver.load}\n${validator.load}\n`;
  if (app.module === "esm") return `${imports}${body}`;
  return `${imports}\nasync function main(): Promise<void> {${body}}\nmain().catch((error: unknown) => {\n  console.error(error);\n  process.exitCode = 1;\n});\n`;
}

async function run(command: string, args: readonly string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<Finished> {
  const finished = await watch(command, args, { cwd: options.cwd, env: options.env ?? process.env }).exited;
  if (finished.code !== 0) throw new Error(`${command} ${args.join(" ")} exited ${finished.code}:\n${finished.stdout}\n${finished.stderr}`);
  return finished;
}

function link(nodeModules: string, name: string, repoFolder: string): void {
  const target = join(nodeModules, name);
  mkdirSync(dirname(target), { recursive: true });
  symlinkSync(join(REPO_ROOT, "node_modules", repoFolder), target, "dir");
}

/** The `>=low <high` range the package declares, as [low, high] versions (high may be "0.46"). */
function rangeBounds(range: string): [string, string] {
  const match = /^>=(\d+\.\d+\.\d+) <(\d+\.\d+(?:\.\d+)?)$/.exec(range);
  if (!match?.[1] || !match[2]) throw new Error(`drizzle-orm's peer range ${JSON.stringify(range)} is not ">=low <high"`);
  return [match[1], match[2]];
}

const compareVersions = (a: string, b: string) => {
  const [x, y] = [a.split(".").map(Number), b.split(".").map(Number)];
  for (let i = 0; i < 3; i += 1) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) - (y[i] ?? 0);
  return 0;
};

const versionIn = (folder: string) => (JSON.parse(readFileSync(join(REPO_ROOT, "node_modules", folder, "package.json"), "utf8")) as { version: string }).version;

interface Manifest {
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

describe("compatibility matrix: the packed package in apps on each supported drizzle-orm, driver, validator and module system", () => {
  let root: string;
  let manifest: Manifest;
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let typecheck: Finished;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "cronledger-compat-"));
    database = await createTestDatabase("compat");
    // One tarball for the file: `npm test` built dist/ first; the pack itself runs no scripts.
    const packed = await run("npm", ["pack", "--ignore-scripts", "--pack-destination", root, "--json"], { cwd: REPO_ROOT });
    const [{ filename }] = JSON.parse(packed.stdout) as [{ filename: string }];
    await run("tar", ["-xzf", join(root, filename), "-C", root], { cwd: root });
    const unpacked = join(root, "package");
    manifest = JSON.parse(readFileSync(join(unpacked, "package.json"), "utf8")) as Manifest;

    const sources: string[] = [];
    for (const app of APPS) {
      const dir = join(root, "apps", app.name);
      const nodeModules = join(dir, "node_modules");
      mkdirSync(nodeModules, { recursive: true });
      writeFileSync(join(dir, "package.json"), JSON.stringify({ name: app.name, private: true, type: app.module === "esm" ? "module" : "commonjs" }));
      writeFileSync(join(dir, "main.ts"), appSource(app));
      sources.push(join(dir, "main.ts"));
      // cronledger itself, a copy per app: its peers resolve from where it sits, next to the app's own packages.
      cpSync(unpacked, join(nodeModules, "cronledger"), { recursive: true });
      // Its regular dependencies inside it, whatever the app has, as npm nests a version the app's does not satisfy.
      for (const name of Object.keys(manifest.dependencies ?? {})) link(join(nodeModules, "cronledger", "node_modules"), name, name === "drizzle-orm" ? DRIZZLE_FOLDER.newest : name);
      link(nodeModules, "drizzle-orm", DRIZZLE_FOLDER[app.drizzle]);
      for (const [name, folder] of Object.entries({ ...DRIVERS[app.driver].links, ...VALIDATORS[app.validator].links })) link(nodeModules, name, folder);
    }
    // One tsc program for every app (each file resolves from its own folder, ESM or CommonJS by its package.json), emitting beside the sources.
    typecheck = await watch(
      join(REPO_ROOT, "node_modules", ".bin", "tsc"),
      [
        "--strict",
        "--skipLibCheck",
        "false",
        "--module",
        "nodenext",
        "--moduleResolution",
        "nodenext",
        "--target",
        "es2022",
        "--types",
        "node",
        "--typeRoots",
        join(REPO_ROOT, "node_modules", "@types"),
        ...sources,
      ],
      { cwd: root },
    ).exited;
  }, 480_000);

  afterAll(async () => {
    await database?.drop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it("declares drizzle-orm a peer dependency whose range holds the oldest and newest version tested, and PGlite an optional one", () => {
    expect(manifest.dependencies ?? {}).not.toHaveProperty("drizzle-orm");
    expect(manifest.dependencies ?? {}).not.toHaveProperty("@electric-sql/pglite");
    const range = manifest.peerDependencies?.["drizzle-orm"] ?? "";
    const [oldest, newest] = [versionIn(DRIZZLE_FOLDER.oldest), versionIn(DRIZZLE_FOLDER.newest)];
    const [low, high] = rangeBounds(range);
    // The oldest tested is the oldest declared, and the newest tested is below the bound: the range claims nothing the matrix does not run.
    expect(low).toBe(oldest);
    expect(compareVersions(newest, high), `${newest} < ${high}`).toBeLessThan(0);
    expect(compareVersions(newest, oldest)).toBeGreaterThan(0);
    expect(manifest.peerDependenciesMeta?.["@electric-sql/pglite"]).toEqual({ optional: true });
    // The README states what is supported, the same versions.
    const readme = readFileSync(join(root, "package", "README.md"), "utf8");
    expect(readme).toContain(`drizzle-orm | \`${range}\``);
  });

  it("every app typechecks with skipLibCheck: false: nothing beyond drizzle-orm's own declarations, which fail that way without cronledger too", () => {
    expect(typecheck.stdout).not.toMatch(/pglite/i);
    expect(errorsBeyondDrizzle(typecheck.stdout)).toEqual([]);
  });

  it.each(APPS.map((app) => [`${app.drizzle} drizzle-orm ${versionIn(DRIZZLE_FOLDER[app.drizzle])}, ${app.driver}, ${app.validator}, ${app.module}`, app] as const))(
    "%s: a transactional enqueue commits or rolls back with the app's transaction, and a scheduled job runs",
    async (_label, app) => {
      const ran = await run(process.execPath, ["main.js"], { cwd: join(root, "apps", app.name), env: { ...process.env, APP_DATABASE_URL: database.url, DATABASE_URL: "" } });
      expect(JSON.parse(ran.stdout) as unknown).toEqual({
        rolledBack: "the business write failed",
        enqueued: 1,
        succeeded: 2,
        seen: expect.arrayContaining(["remind 1 COMMITTED", "nightly 2026-06-01T12:00:10.000Z"]) as unknown,
      });
      expect((JSON.parse(ran.stdout) as { seen: string[] }).seen).toHaveLength(2);
    },
    60_000,
  );
});

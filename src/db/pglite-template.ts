import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { packageRoot } from "../package-root.js";
import { loadPglite, PGLITE_PACKAGE } from "./pglite.js";

/**
 * A new PGlite cluster runs initdb inside WebAssembly: several CPU-seconds,
 * most of a first start. The first embedded database of a PGlite version
 * leaves one freshly initialised, empty cluster as a tarball in a cache
 * directory, and later new embedded databases start from a copy of it. It
 * holds no cronledger tables: migrate() still applies every migration, as on
 * PostgreSQL. The template is built here, on first use, and not shipped: it
 * is 4.5 MB that an application on PostgreSQL never reads.
 */
export const CACHE_DIR_ENV = "CRONLEDGER_CACHE_DIR";

/**
 * CRONLEDGER_CACHE_DIR, else `node_modules/.cache/cronledger` of the
 * node_modules cronledger is installed in (of this checkout, for a clone of
 * cronledger itself): the place build tools keep caches, which `rm -rf
 * node_modules` and a fresh `npm ci` clear.
 */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const configured = env[CACHE_DIR_ENV];
  if (configured !== undefined && configured !== "") return configured;
  const root = packageRoot();
  const parent = dirname(root);
  // Installed as node_modules/cronledger or node_modules/@scope/cronledger.
  const modules = basename(parent) === "node_modules" ? parent : basename(dirname(parent)) === "node_modules" ? dirname(parent) : join(root, "node_modules");
  return join(modules, ".cache", "cronledger");
}

/** Keyed by PGlite version: a cluster from another version would not start. */
export function templateFile(env: NodeJS.ProcessEnv = process.env, version: string = loadPglite("The embedded database template").version): string {
  return join(cacheDir(env), `pglite-${version}.tar.gz`);
}

/**
 * The template for a database that does not exist yet, built first when the
 * cache has none; undefined for an existing database, or when the template
 * could not be built (a read-only cache directory): the database then runs
 * initdb itself, slower but the same.
 */
export function templateFor(dataDir: string | undefined, env: NodeJS.ProcessEnv = process.env, version?: string): Blob | undefined {
  if (dataDir !== undefined && existsSync(join(dataDir, "PG_VERSION"))) return undefined;
  try {
    return new Blob([readFileSync(buildTemplate(env, version))]);
  } catch {
    return undefined;
  }
}

/**
 * The child's script: opening a database is synchronous (openDatabase()
 * returns at once), and PGlite's initdb and dump are asynchronous, so the
 * template is made in a child process waited for. Written aside and renamed,
 * so a build killed half-way never leaves a torn template, and two processes
 * building at once both leave a whole one.
 */
const BUILD_SCRIPT = `
import { renameSync, writeFileSync } from "node:fs";
const [pglite, file] = process.argv.slice(1);
const { PGlite } = await import(pglite);
const client = new PGlite();
await client.waitReady;
const dump = await client.dumpDataDir("gzip");
const partial = file + "." + process.pid + ".partial";
writeFileSync(partial, Buffer.from(await dump.arrayBuffer()));
renameSync(partial, file);
await client.close();
`;

/** Builds the template unless this PGlite version already has one; returns its path. Throws when it cannot. */
export function buildTemplate(env: NodeJS.ProcessEnv = process.env, version?: string): string {
  const file = templateFile(env, version);
  if (existsSync(file)) return file;
  mkdirSync(dirname(file), { recursive: true });
  // The same PGlite this process loads: resolved from where cronledger is installed.
  const pglite = pathToFileURL(createRequire(join(packageRoot(), "package.json")).resolve(PGLITE_PACKAGE)).href;
  execFileSync(process.execPath, ["--input-type=module", "--eval", BUILD_SCRIPT, pglite, file], { stdio: ["ignore", "ignore", "pipe"], env: { ...env, NODE_OPTIONS: "" } });
  return file;
}

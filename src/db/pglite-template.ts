import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { packagePath } from "../package-root.js";
import { loadPglite } from "./pglite.js";

/**
 * A new PGlite cluster runs initdb inside WebAssembly: several CPU-seconds,
 * most of a first start. The build (`npm run build`, run by npm install)
 * leaves one freshly initialised, empty cluster as a tarball, and new
 * embedded databases start from a copy of it. It holds no cronledger tables:
 * migrate() still applies every migration, as on PostgreSQL.
 */
/** Keyed by PGlite version: a cluster from another version would not start. Same path from src/, dist/ and dist/cjs/. */
export function templateFile(version: string = loadPglite("The embedded database template").version): string {
  return packagePath("dist", "pglite-template", `pglite-${version}.tar.gz`);
}

/** The template for a database that does not exist yet; undefined for an existing one or when no build left a template. */
export function templateFor(dataDir: string | undefined, version?: string): Blob | undefined {
  if (dataDir !== undefined && existsSync(join(dataDir, "PG_VERSION"))) return undefined;
  const file = templateFile(version);
  return existsSync(file) ? new Blob([readFileSync(file)]) : undefined;
}

/** Writes the template unless this PGlite version already has one; returns its path. */
export async function buildTemplate(): Promise<string> {
  const { PGlite, version } = loadPglite("The embedded database template");
  const file = templateFile(version);
  if (existsSync(file)) return file;
  const client = new PGlite();
  try {
    // dumpDataDir() does not wait for initdb itself.
    await client.waitReady;
    const dump = await client.dumpDataDir("gzip");
    mkdirSync(dirname(file), { recursive: true });
    // Written aside and renamed, so a build killed half-way never leaves a torn template.
    const partial = `${file}.${process.pid}.partial`;
    writeFileSync(partial, Buffer.from(await dump.arrayBuffer()));
    renameSync(partial, file);
  } finally {
    await client.close();
  }
  return file;
}

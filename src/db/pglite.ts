import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Logger as DrizzleLogger } from "drizzle-orm/logger";
import { DependencyMissingError } from "../errors.js";
import type { Executor } from "./executor.js";
import type { PgliteInstance } from "./settings.js";

/**
 * PGlite is an optional peer dependency: about 27 MB that a production image
 * on PostgreSQL never needs. It is loaded here, on first use, and only here;
 * no other module imports it, and the types cronledger's entry declares for
 * it are its own (PgliteInstance), so an application without PGlite installs,
 * typechecks with `skipLibCheck: false`, and runs on PostgreSQL.
 */
export const PGLITE_PACKAGE = "@electric-sql/pglite";

/** The PGlite a build or an embedded database opens: an instance, plus the dump the build keeps as a template. */
export interface OwnedPglite extends PgliteInstance {
  dumpDataDir(compression: "gzip"): Promise<Blob>;
}

interface PgliteOptions {
  readonly loadDataDir?: Blob;
}

/** PGlite's types are not imported even here: they would need the package to typecheck cronledger's declarations. */
export interface PgliteModules {
  readonly PGlite: { new (options?: PgliteOptions): OwnedPglite; new (dataDir: string, options?: PgliteOptions): OwnedPglite };
  readonly drizzle: (client: PgliteInstance, config: { logger: DrizzleLogger }) => Executor;
  /** The installed PGlite's version: the embedded template is keyed by it. */
  readonly version: string;
}

// Resolved from where cronledger is installed, so the application's own copy is found (a peer dependency).
const requireHere = createRequire(import.meta.url);
let loaded: PgliteModules | undefined;

function isNotFound(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "MODULE_NOT_FOUND" || code === "ERR_MODULE_NOT_FOUND";
}

/** PGlite and drizzle-orm's PGlite driver, or a DependencyMissingError that says what to install. */
export function loadPglite(purpose: string): PgliteModules {
  if (loaded !== undefined) return loaded;
  try {
    const { PGlite } = requireHere(PGLITE_PACKAGE) as { PGlite: PgliteModules["PGlite"] };
    const { drizzle } = requireHere("drizzle-orm/pglite") as { drizzle: PgliteModules["drizzle"] };
    loaded = { PGlite, drizzle, version: installedVersion() };
    return loaded;
  } catch (error) {
    if (!isNotFound(error)) throw error;
    throw new DependencyMissingError(
      PGLITE_PACKAGE,
      `${purpose} needs the optional peer dependency ${PGLITE_PACKAGE}, which is not installed: run \`npm install ${PGLITE_PACKAGE}\`, ` +
        "or set DATABASE_URL (or `database`) to a PostgreSQL URL.",
      { cause: error },
    );
  }
}

/** PGlite's package.json is not in its exports: it is found beside its entry (dist/index.cjs). */
function installedVersion(): string {
  const entry = requireHere.resolve(PGLITE_PACKAGE);
  const manifest = JSON.parse(readFileSync(join(dirname(entry), "..", "package.json"), "utf8")) as { version?: string };
  return manifest.version ?? "unknown";
}

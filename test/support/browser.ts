import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream, existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rename, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import { fileURLToPath } from "node:url";
import { createBrotliDecompress } from "node:zlib";
import { chromium, type BrowserContext, type BrowserContextOptions } from "playwright-core";

/**
 * Headless Chromium for the page tests, on a fresh machine too: Debian's
 * package when it is installed, otherwise the Chromium binary that the
 * @sparticuz/chromium dev dependency ships inside its npm package. Nothing is
 * downloaded from anywhere but the npm registry (playwright's own browser
 * download is never used).
 */
export const DEBIAN_CHROMIUM = "/usr/bin/chromium";

/** Flags for a sandbox-less root user on a machine without network: no GPU, no QUIC, no background requests to Google's hosts. */
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

const require = createRequire(import.meta.url);
const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

/**
 * The binary @sparticuz/chromium ships brotli-compressed, unpacked once per
 * package version under node_modules/.cache. Its own executablePath() unpacks
 * into a fixed /tmp path in place, so a second test process could run a
 * half-written file; here each process writes a file of its own and renames
 * it into place, which is atomic.
 */
async function packagedChromium(): Promise<string> {
  // The package exports only its entry point (build/cjs/index.cjs); its root is two levels up.
  const root = join(dirname(require.resolve("@sparticuz/chromium")), "..", "..");
  const { version } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
  const target = join(REPO_ROOT, "node_modules", ".cache", `cronledger-chromium-${version}`, "chromium");
  if (existsSync(target)) return target;
  await mkdir(dirname(target), { recursive: true });
  const partial = `${target}.${process.pid}.${randomBytes(4).toString("hex")}.partial`;
  try {
    await pipeline(createReadStream(join(root, "bin", "chromium.br")), createBrotliDecompress(), createWriteStream(partial, { mode: 0o755 }));
    await rename(partial, target);
  } finally {
    await rm(partial, { force: true });
  }
  return target;
}

/** Which Chromium the page tests run: Debian's when present, else the one from the npm package. */
export async function chromiumExecutable(): Promise<{ path: string; source: "debian" | "npm package @sparticuz/chromium" }> {
  if (existsSync(DEBIAN_CHROMIUM)) return { path: DEBIAN_CHROMIUM, source: "debian" };
  return { path: await packagedChromium(), source: "npm package @sparticuz/chromium" };
}

export interface TestBrowser {
  readonly context: BrowserContext;
  readonly executable: string;
  close(): Promise<void>;
}

/** A headless Chromium with a fresh, throw-away profile; close() removes the profile. */
export async function launchBrowser(options: BrowserContextOptions = {}): Promise<TestBrowser> {
  const { path } = await chromiumExecutable();
  const profile = await mkdtemp(join(tmpdir(), "cronledger-chromium-"));
  try {
    const context = await chromium.launchPersistentContext(profile, { ...options, executablePath: path, headless: true, args: FLAGS });
    return {
      context,
      executable: path,
      async close() {
        await context.close();
        await rm(profile, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await rm(profile, { recursive: true, force: true });
    throw error;
  }
}

import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type BrowserContextOptions } from "playwright-core";

/** Debian's Chromium, used when it is installed. */
export const DEBIAN_CHROMIUM = "/usr/bin/chromium";

/** Flags for a quiet, offline headless Chromium in a container (no sandbox: tests run as root). */
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
] as const;

/**
 * The Chromium the page tests drive: Debian's when installed, else the one
 * the `@sparticuz/chromium` npm package ships inside itself (unpacked to /tmp
 * on first use), so `npm install && npm test` needs nothing downloaded from
 * outside the npm registry.
 */
export async function chromiumExecutable(): Promise<string> {
  if (existsSync(DEBIAN_CHROMIUM)) return DEBIAN_CHROMIUM;
  const bundled = (await import("@sparticuz/chromium")).default;
  return bundled.executablePath();
}

export interface LaunchedChromium {
  readonly context: BrowserContext;
  close(): Promise<void>;
}

/** A headless Chromium with a fresh profile (its --user-data-dir), removed on close. */
export async function launchChromium(options: BrowserContextOptions = {}): Promise<LaunchedChromium> {
  const profile = await mkdtemp(join(tmpdir(), "cronledger-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: await chromiumExecutable(),
    headless: true,
    args: [...CHROMIUM_ARGS],
    ...options,
  });
  return {
    context,
    async close() {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}

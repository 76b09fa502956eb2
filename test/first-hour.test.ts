import { mkdtempSync, rmSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "vitest";
import { launchBrowser, type TestBrowser } from "./support/browser.js";
import { envWithout, watch } from "./support/child.js";

/**
 * A newcomer's first minute: `npm start` (the demo script, run as npm runs it,
 * in a process of its own and a directory with no database) prints the
 * Schedule page's URL; a browser opened on it sees entries fire, fail, retry
 * and succeed within 60 s of the start.
 */
const DEMO = fileURLToPath(new URL("../examples/demo/main.ts", import.meta.url));
const TSX_LOADER = import.meta.resolve("tsx");
const WITHIN_MS = 60_000;
const ARTIFACTS = "test-results";

let browser: TestBrowser | undefined;
afterAll(async () => {
  await browser?.close();
});

it("npm start prints the Schedule page's URL, and within 60 s the page shows an ok entry, a retrying or failing one, and a run strip", async () => {
  const directory = mkdtempSync(join(tmpdir(), "cronledger-first-hour-"));
  const started = Date.now();
  // Port 0: the test must not depend on the demo's default port being free on a shared machine.
  const demo = watch(process.execPath, ["--import", TSX_LOADER, DEMO], { cwd: directory, env: { ...envWithout("DATABASE_URL"), CRONLEDGER_DEMO_PORT: "0" } });
  try {
    const output = await demo.waitFor(/Schedule page: http:\/\/\S+/, WITHIN_MS);
    const url = /Schedule page: (http:\/\/\S+)/.exec(output)?.[1] ?? "";
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/admin\/scheduler$/);
    expect(output).toContain("no token needed");

    browser = await launchBrowser({ viewport: { width: 1400, height: 1000 } });
    const page = await browser.context.newPage();
    const seen = async () => {
      await page.goto(url);
      return {
        ok: await page.locator('#entries tr[data-state="ok"]').count(),
        unwell: await page.locator('#entries tr[data-state="retrying"], #entries tr[data-state="failing"]').count(),
        runs: await page.locator("#entries .strip .run").count(),
      };
    };
    await expect.poll(async () => {
      const counts = await seen();
      return counts.ok > 0 && counts.unwell > 0 && counts.runs > 0;
    }, { timeout: Math.max(1_000, WITHIN_MS - (Date.now() - started)), interval: 2_000 }).toBe(true);
    console.info(`first hour: the page showed ok, retrying/failing and a strip ${Date.now() - started} ms after spawn`);
    const states = await page.locator("#entries tbody tr").evaluateAll((rows) => rows.map((row) => row.getAttribute("data-state")));
    console.info(`first hour: entry states ${states.join(", ")}`);
    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, "first-hour-1400.png"), fullPage: true });
  } finally {
    demo.child.kill("SIGINT");
    await Promise.race([demo.exited, new Promise((resolve) => setTimeout(resolve, 20_000))]);
    demo.child.kill("SIGKILL");
    rmSync(directory, { recursive: true, force: true });
  }
}, 120_000);

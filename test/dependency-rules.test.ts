import { appendFileSync, cpSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { REPO_ROOT, watch, type Finished } from "./support/child.js";

/**
 * `npm run check` runs dependency-cruiser over src/ with .dependency-cruiser.cjs
 * (no import cycle, no import from a lower layer to a higher one). Each test
 * copies src/ to a temp directory, plants one break and runs the same
 * check there: it must fail naming the rule, and pass on the copy as it is.
 */

const TIMEOUT_MS = 120_000;
const copies: string[] = [];

function copyOfSrc(): string {
  const dir = mkdtempSync(join(tmpdir(), "cronledger-deps-"));
  copies.push(dir);
  cpSync(join(REPO_ROOT, "src"), join(dir, "src"), { recursive: true });
  for (const file of [".dependency-cruiser.cjs", "tsconfig.json", "package.json"]) cpSync(join(REPO_ROOT, file), join(dir, file));
  symlinkSync(join(REPO_ROOT, "node_modules"), join(dir, "node_modules"), "dir");
  return dir;
}

/** The check `npm run deps` runs, in `dir`. */
function check(dir: string): Promise<Finished> {
  return watch(process.execPath, [join(REPO_ROOT, "node_modules", "dependency-cruiser", "bin", "dependency-cruise.mjs"), "src", "--config", ".dependency-cruiser.cjs", "--output-type", "err"], {
    cwd: dir,
  }).exited;
}

afterEach(() => {
  for (const dir of copies.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("the dependency check", () => {
  it("passes on src/ as it is", { timeout: TIMEOUT_MS }, async () => {
    const finished = await check(copyOfSrc());
    expect(finished.stdout + finished.stderr).toMatch(/no dependency violations found/);
    expect(finished.code).toBe(0);
  });

  it("fails on a planted import cycle, even one of types only", { timeout: TIMEOUT_MS }, async () => {
    const dir = copyOfSrc();
    // errors.ts re-exports errors/schedule.ts, which imports error-chain.ts; this closes the loop.
    appendFileSync(join(dir, "src", "error-chain.ts"), '\nimport type { ErrorCode } from "./errors.js";\nexport type PlantedCycle = ErrorCode;\n');
    const finished = await check(dir);
    expect(finished.code).not.toBe(0);
    expect(finished.stdout).toMatch(/no-cycle: src\/error-chain\.ts/);
  });

  it("fails on an import from a lower layer to a higher one, root modules included", { timeout: TIMEOUT_MS }, async () => {
    const dir = copyOfSrc();
    appendFileSync(join(dir, "src", "db", "executor.ts"), '\nimport type { RetryPolicy } from "../jobs/retry.js";\nexport type PlantedClimb = RetryPolicy;\n');
    appendFileSync(join(dir, "src", "log.ts"), '\nimport type { Executor } from "./db/executor.js";\nexport type PlantedBaseClimb = Executor;\n');
    const finished = await check(dir);
    expect(finished.code).not.toBe(0);
    expect(finished.stdout).toMatch(/db-knows-nothing-above: src\/db\/executor\.ts → src\/jobs\/retry\.ts/);
    expect(finished.stdout).toMatch(/base-imports-no-layer: src\/log\.ts → src\/db\/executor\.ts/);
  });
});

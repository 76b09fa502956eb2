import { rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { FAULT_KINDS } from "../bench/soak/plan.js";
import { watch, type Finished } from "./support/child.js";

// The fault soak (bench/soak/orchestrate.ts) inside npm test: a short one with a fixed seed must end with no violation
// and every kind of fault injected; one with a seed from the date runs a replica with a planted bug (each tenth job's
// side effect written twice by one attempt), which the checker must catch, and nothing else. Both at once, to stay
// within the file's budget; each starts its own throwaway cluster (test/support/private-cluster.ts).
const ORCHESTRATE = fileURLToPath(new URL("../bench/soak/orchestrate.ts", import.meta.url));

interface SoakResult {
  seed: number;
  injected: Record<string, number>;
  acks: number;
  violations: { check: string; detail: string }[];
}

async function soak(args: readonly string[]): Promise<{ finished: Finished; result: SoakResult }> {
  const finished = await watch(process.execPath, ["--import", "tsx", ORCHESTRATE, "--replicas", "2", "--json", ...args]).exited;
  // A run with violations keeps its logs for whoever replays it; here the assertions below say what they were.
  const kept = /^logs kept in (\S+)$/m.exec(finished.stdout)?.[1];
  if (kept !== undefined) rmSync(kept, { recursive: true, force: true });
  const json = finished.stdout.split("\n").find((line) => line.startsWith('{"seed"'));
  if (json === undefined) throw new Error(`the soak printed no result (code ${finished.code}):\n${finished.stdout}\n${finished.stderr.slice(-4_000)}`);
  return { finished, result: JSON.parse(json) as SoakResult };
}

const unknown = (result: SoakResult, also: readonly string[] = []) => result.violations.filter((violation) => !also.includes(violation.check));

describe.concurrent("the fault soak", () => {
  it("holds every invariant through every kind of fault (seed 31, 45 s, 2 replicas) and prints the table", async () => {
    const { finished, result } = await soak(["--minutes", "0.75", "--seed", "31"]);
    expect(unknown(result)).toEqual([]);
    expect(finished.code).toBe(result.violations.length === 0 ? 0 : 1);
    for (const kind of FAULT_KINDS) expect(result.injected[kind], kind).toBeGreaterThan(0);
    expect(result.acks).toBeGreaterThan(100);
    expect(finished.stdout).toMatch(/\| fault +\| events +\| injected \|/);
    expect(finished.stdout).toMatch(/\| pg-restart +\| +\d+ \| +\d+ \|/);
    expect(finished.stdout).toMatch(/\| check +\| violations \|/);
  }, 300_000);

  it("catches a planted bug, a side effect written twice by one attempt, and prints the seed to replay (seed from the date)", async () => {
    const seed = Math.floor(Date.now() / 86_400_000);
    const { finished, result } = await soak(["--minutes", "0.5", "--seed", String(seed), "--plant", "double-effect"]);
    expect(finished.code).toBe(1);
    expect(result.violations.filter((violation) => violation.check === "effect-once").length).toBeGreaterThan(0);
    // The faults of the date's seed break nothing else.
    expect(unknown(result, ["effect-once"])).toEqual([]);
    expect(finished.stdout).toContain(`replay with: npm run soak -- --minutes 0.5 --seed ${seed} --replicas 2 --plant double-effect`);
  }, 300_000);
});

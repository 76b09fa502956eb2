import { rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { FAULT_KINDS } from "../bench/soak/plan.js";
import { watch, type Finished } from "./support/child.js";

// The fault soak (bench/soak/orchestrate.ts) inside npm test, as issue 31 asks: a 2-minute soak with a fixed seed
// and a 2-minute soak with a seed from the date (a new plan every day) that also fails over to its synchronous
// standby, both ending with no violation and every kind of fault injected; then a short one with planted bugs,
// which the checker must catch, with the seed to replay. The two clean runs go at once (each its own throwaway
// cluster, test/support/private-cluster.ts, and 2 replicas), the planted one after them: about 5 minutes for the
// file, beside the rest of npm test.
const ORCHESTRATE = fileURLToPath(new URL("../bench/soak/orchestrate.ts", import.meta.url));
/** 2 minutes of faults, plus the cluster's start, the drain (at most 2 min), the settle and the stop. */
const SOAK_TIMEOUT_MS = 12 * 60_000;

interface SoakResult {
  seed: number;
  replay: string;
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
  // The table of faults and checks, in the test's log: what the run did, whatever its verdict.
  process.stderr.write(`${finished.stdout.slice(0, finished.stdout.indexOf('{"seed"'))}\n`);
  return { finished, result: JSON.parse(json) as SoakResult };
}

/** The violations, with the command that replays the run in the assertion's message. */
function expectClean({ finished, result }: { finished: Finished; result: SoakResult }): void {
  expect(result.violations, `the soak found violations; replay with: ${result.replay}\n${finished.stdout}`).toEqual([]);
  expect(finished.code).toBe(0);
  for (const kind of FAULT_KINDS) expect(result.injected[kind], `${kind} never injected (${result.replay})`).toBeGreaterThan(0);
  expect(result.acks).toBeGreaterThan(300);
  expect(finished.stdout).toMatch(/\| fault +\| events +\| injected \|/);
  expect(finished.stdout).toMatch(/\| pg-restart +\| +\d+ \| +\d+ \|/);
  expect(finished.stdout).toMatch(/\| check +\| violations \|/);
  expect(finished.stdout).toContain("\n0 violations\n");
}

/** The day as YYYYMMDD (UTC): the seed of the day's run, the same for every run of npm test that day. */
function seedOfTheDay(now = new Date()): number {
  return Number(now.toISOString().slice(0, 10).replaceAll("-", ""));
}

describe.concurrent("the fault soak, 2 minutes, 2 replicas", () => {
  it("holds every invariant through every kind of fault with a fixed seed (31)", async () => {
    expectClean(await soak(["--minutes", "2", "--seed", "31"]));
  }, SOAK_TIMEOUT_MS);

  it("holds every invariant through every kind of fault and a failover with the seed of the day (YYYYMMDD, UTC)", async () => {
    const run = await soak(["--minutes", "2", "--seed", String(seedOfTheDay()), "--failover"]);
    expectClean(run);
    expect(run.result.injected.failover, run.result.replay).toBe(1);
    expect(run.finished.stdout).toMatch(/\| failover +\| +1 \| +1 \|/);
  }, SOAK_TIMEOUT_MS);
});

describe("the fault soak's checker", () => {
  it("catches planted bugs, a success dropped and a side effect written twice, and prints the seed to replay", async () => {
    const seed = seedOfTheDay();
    const { finished, result } = await soak(["--minutes", "0.5", "--seed", String(seed), "--plant", "drop-success,double-effect"]);
    expect(finished.code).toBe(1);
    const by = (check: string) => result.violations.filter((violation) => violation.check === check).length;
    expect(by("effect-once")).toBeGreaterThan(0);
    // A success dropped: the job runs again with no record of the success, and its last one ends failed.
    expect(by("completed-not-rerun")).toBeGreaterThan(0);
    expect(by("success-kept")).toBeGreaterThan(0);
    // The faults of the day's seed break nothing else.
    const planted = ["effect-once", "completed-not-rerun", "success-kept"];
    expect(result.violations.filter((violation) => !planted.includes(violation.check)), result.replay).toEqual([]);
    expect(result.replay).toBe(`npm run soak -- --minutes 0.5 --seed ${seed} --replicas 2 --plant drop-success,double-effect`);
    expect(finished.stdout).toContain(`violations; replay with: ${result.replay}\n`);
  }, SOAK_TIMEOUT_MS);
});

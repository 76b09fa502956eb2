import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { envWithout, watch } from "./support/child.js";

const DEMO = fileURLToPath(new URL("../examples/demo/main.ts", import.meta.url));
// tsx's own CLI, as `npm start` runs it (it relays Ctrl-C to the demo).
const TSX = fileURLToPath(new URL("../node_modules/tsx/dist/cli.mjs", import.meta.url));

/**
 * On this 2-core machine the first slot fires 6-9 s after spawn (the goal for `npm start` is under 10 s),
 * but the suite runs files in parallel and speed stays out of assertions (it is measured in bench/): the deadline here only
 * catches a demo that does not fire at all, and the time is printed for whoever watches.
 */
const FIRST_FIRE_DEADLINE_MS = 30_000;

// What `npm start` runs, from a directory with no database: the embedded default in ./.cronledger.
it("the demo fires jobs on embedded PGlite, retries the flaky job to success, and stops on Ctrl-C", async () => {
  const directory = mkdtempSync(join(tmpdir(), "cronledger-demo-"));
  const spawned = performance.now();
  const demo = watch(process.execPath, [TSX, DEMO], { cwd: directory, env: envWithout("DATABASE_URL") });
  try {
    await demo.waitFor(/slot fired demo\.heartbeat for slot [\d:.]+ -> job \d+[\s\S]*done {7}demo\.heartbeat job \d+ attempt 1/, FIRST_FIRE_DEADLINE_MS);
    console.info(`demo: first slot fired and ran ${Math.round(performance.now() - spawned)} ms after spawn`);
    expect(demo.output()).toContain(`using embedded PGlite at ${join(directory, ".cronledger")}`);
    expect(demo.output()).toMatch(/demo\.daily-report +30 7 \* \* \* +Asia\/Tokyo +next \d{4}-\d\d-\d\dT22:30:00\.000Z/);

    const story = await demo.waitFor(/done {7}demo\.flaky-sync job 1 attempt 3/, 20_000);
    const flaky = story.split("\n").filter((line) => line.includes("demo.flaky-sync job 1 "));
    expect(flaky.map((line) => /(retry|done) +demo\.flaky-sync job 1 attempt (\d)/.exec(line)?.slice(1, 3).join(" "))).toEqual([
      "retry 1",
      "retry 2",
      "done 3",
    ]);
    // The runtime's own log line for a failed attempt is left out: one line per event.
    expect(story).not.toContain("job attempt failed; retrying");

    demo.child.kill("SIGINT");
    const finished = await demo.exited;
    // tsx reports the demo's end by Ctrl-C as exit status 130 (128 + SIGINT).
    expect([finished.signal, finished.code]).toContainEqual(expect.toSatisfy((value) => value === "SIGINT" || value === 130));
    expect(finished.stdout).toContain("SIGINT received: stopping gracefully");
  } finally {
    demo.child.kill("SIGKILL");
    rmSync(directory, { recursive: true, force: true });
  }
});

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { envWithout, watch } from "./support/child.js";

const DEMO = fileURLToPath(new URL("../examples/demo/main.ts", import.meta.url));
/**
 * tsx as a loader in the demo's own process, as `npm start` runs it: Ctrl-C
 * reaches the demo itself. (tsx's CLI runs a child and relays the signal,
 * then SIGKILLs the child when it does not acknowledge within about 60 ms,
 * which a loaded machine easily misses: the demo then died before its
 * graceful stop and its "SIGINT received" line.)
 */
const TSX_LOADER = import.meta.resolve("tsx");

/**
 * On this 2-core machine the first slot fires 6-9 s after spawn (the goal for `npm start` is under 10 s),
 * but the suite runs files in parallel and speed stays out of assertions: the deadline here only
 * catches a demo that does not fire at all, and the time is printed for whoever watches.
 */
const FIRST_FIRE_DEADLINE_MS = 60_000;

// What `npm start` runs, from a directory with no database: the embedded default in ./.cronledger.
it("the demo fires jobs on embedded PGlite, retries the flaky job to success, and stops on Ctrl-C", async () => {
  const directory = mkdtempSync(join(tmpdir(), "cronledger-demo-"));
  const spawned = performance.now();
  const demo = watch(process.execPath, ["--import", TSX_LOADER, DEMO], { cwd: directory, env: envWithout("DATABASE_URL") });
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
    // Waited for, not read off the exit: the line is the demo's answer to the signal.
    await demo.waitFor(/SIGINT received: stopping gracefully/, 20_000);
    const finished = await demo.exited;
    // The runtime stops gracefully, closes the database and re-raises the signal, so the process ends by it.
    expect(finished.signal).toBe("SIGINT");
  } finally {
    demo.child.kill("SIGKILL");
    rmSync(directory, { recursive: true, force: true });
  }
});

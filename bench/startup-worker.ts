// One process of bench/startup.ts's "work() to first job": on "go" (stdin) it calls work() and prints
// "first <ms>" when its first job starts, counted from that call; on "stop" it stops and exits.
// Its jobs await 20 ms, so that the first process to start does not drain the queue before the others claim.
import { createInterface } from "node:readline";
import { createCronledger, defineJob, silentLogger } from "../src/index.js";

let calledAt = 0;
let reported = false;
const first = defineJob({
  name: "bench.startup",
  run: async () => {
    if (!reported) {
      reported = true;
      process.stdout.write(`first ${performance.now() - calledAt}\n`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  },
});
const ledger = createCronledger({ database: { url: process.env.BENCH_URL ?? "" }, jobs: [first], logger: silentLogger, chores: false, metrics: false });
let working: Promise<unknown> | undefined;
const lines = createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (line === "go") {
    calledAt = performance.now();
    working = ledger.work({ concurrency: 10 });
  } else if (line === "stop") {
    void (async () => {
      await ledger.stop();
      await working;
      await ledger.close();
      lines.close();
    })();
  }
});
process.stdout.write("ready\n");

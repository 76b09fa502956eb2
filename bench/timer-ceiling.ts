// The ceiling of an I/O-shaped drain: one process's share of the jobs run by `concurrency` loops that
// only await BENCH_IO_MS each, as the bench's I/O handlers do, with no queue at all. A queue's drain
// of the same jobs cannot beat it: setTimeout fires at the earliest after its delay, later on a busy
// loop. Protocol (lines): "ready"; on "go" it runs, prints "elapsed <ms>" and exits.
import { createInterface } from "node:readline";
import { sleep } from "./systems.js";

const concurrency = Number(process.env.BENCH_CONCURRENCY ?? "50");
const ioMs = Number(process.env.BENCH_IO_MS ?? "5");
const jobs = Number(process.env.BENCH_JOBS ?? "5000");

async function run(): Promise<number> {
  let left = jobs;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (left > 0) {
        left -= 1;
        await sleep(ioMs);
      }
    }),
  );
  return performance.now() - started;
}

const lines = createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (line !== "go") return;
  void run().then((elapsed) => {
    process.stdout.write(`elapsed ${elapsed}\n`);
    lines.close();
    process.exit(0);
  });
});
process.stdout.write("ready\n");

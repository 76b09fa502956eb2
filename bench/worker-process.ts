// One bench worker process: consumes one system's jobs with a no-op or an I/O-shaped handler.
// Protocol (lines): it prints "ready"; on "go" from stdin it starts consuming, prints
// "first <epoch ms>" when its first job starts and "progress <jobs run>" every 5 ms while
// that changes; on "stop" it stops, prints "latencies <json array of enqueue-to-start ms>"
// and exits. Drains are timed from the first job's start, so no system's start-up counts.
import { createInterface } from "node:readline";
import { nowMs, sleep, SYSTEMS, type BenchPayload, type Consumer, type SystemKey } from "./systems.js";

const system = SYSTEMS[process.env.BENCH_SYSTEM as SystemKey];
if (system === undefined) throw new Error(`bench worker: unknown BENCH_SYSTEM ${process.env.BENCH_SYSTEM}`);
const endpoint = { url: process.env.BENCH_URL ?? "", ...(process.env.BENCH_PGBOUNCER_URL ? { pgbouncerUrl: process.env.BENCH_PGBOUNCER_URL } : {}) };
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? "10");
/** I/O-shaped jobs await this long, like a call to another service; 0 for no-op jobs. */
const ioMs = Number(process.env.BENCH_IO_MS ?? "0");

let ran = 0;
let started = false;
const latencies: number[] = [];
function begin(payload: BenchPayload): void {
  const now = nowMs();
  if (!started) {
    started = true;
    process.stdout.write(`first ${now}\n`);
  }
  if (payload.sentAt !== undefined) latencies.push(now - payload.sentAt);
}
const handler =
  ioMs > 0
    ? async (payload: BenchPayload) => {
        begin(payload);
        await sleep(ioMs);
        ran += 1;
      }
    : (payload: BenchPayload) => {
        begin(payload);
        ran += 1;
      };

let starting: Promise<Consumer> | undefined;
let reported = 0;
const progress = setInterval(() => {
  if (ran === reported) return;
  reported = ran;
  process.stdout.write(`progress ${ran}\n`);
}, 5);

const lines = createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (line === "go") {
    starting = system.consumer(endpoint, { concurrency, handler });
  } else if (line === "stop") {
    void (async () => {
      const consumer = await starting;
      await consumer?.stop();
      clearInterval(progress);
      process.stdout.write(`progress ${ran}\nlatencies ${JSON.stringify(latencies.map((ms) => Math.round(ms * 100) / 100))}\n`);
      lines.close();
      process.exit(0);
    })();
  }
});
process.stdout.write("ready\n");

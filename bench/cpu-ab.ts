// CPU time, not wall time, of enqueueMany, a drain and single enqueues, per 1,000 jobs: this process's and the
// database server's (a private cluster's processes, from /proc), for source trees compared in interleaved rounds. On a
// loaded shared machine, wall-clock rates of the same tree swung 7x between runs while CPU per job stayed within about
// a third; this says whether a change costs CPU when the quiet machine for bench/throughput.ts is not at hand.
//   BENCH_AB_TREES="main=/path/to/main,branch=."   the trees to compare (default: this one), each with its node_modules
//   BENCH_AB_TRACING=1                              adds "<last tree>+tracing": the same with `tracing: true` and the SDK
//   BENCH_AB_JOBS=10000 BENCH_AB_ROUNDS=4
// Needs root (a private PostgreSQL cluster, test/support/private-cluster.ts). Prints one line per measurement and a
// table of medians (min-max).
import { execFileSync, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import postgres from "postgres";
import type * as Cronledger from "../src/index.js";
import { startPrivateCluster } from "../test/support/private-cluster.js";
import { envNumber, formatNumber, markdownTable, printSection, spread } from "./support.js";

const SELF = fileURLToPath(import.meta.url);
const JOBS = envNumber("BENCH_AB_JOBS", 10_000);
const ROUNDS = envNumber("BENCH_AB_ROUNDS", 4);
const CLOCK_TICKS_PER_SECOND = 100;
const OPERATIONS = ["enqueueMany", "drain", "enqueue"] as const;

interface Measurement {
  readonly variant: string;
  readonly operation: (typeof OPERATIONS)[number];
  /** Milliseconds of CPU per 1,000 jobs. */
  readonly clientMs: number;
  readonly serverMs: number;
}

/** CPU seconds of the server: the postmaster with the children it reaped, and its live children. */
function serverCpuSeconds(postmaster: number): number {
  const fields = (pid: number) => readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ").map(Number);
  const own = fields(postmaster);
  let ticks = (own[11] ?? 0) + (own[12] ?? 0) + (own[13] ?? 0) + (own[14] ?? 0);
  const children = execFileSync("ps", ["-o", "pid=", "--ppid", String(postmaster)], { encoding: "utf8" }).split("\n").map(Number).filter(Boolean);
  for (const pid of children) {
    try {
      const child = fields(pid);
      ticks += (child[11] ?? 0) + (child[12] ?? 0);
    } catch {
      // Ended meanwhile: the postmaster's reaped time has it.
    }
  }
  return ticks / CLOCK_TICKS_PER_SECOND;
}

/** One variant in this process: a fresh database, then each operation measured. */
async function measureTree(variant: string, tree: string, tracing: boolean, serverUrl: string): Promise<void> {
  const { createCronledger, defineJob, silentLogger } = (await import(pathToFileURL(resolve(tree, "src/index.ts")).href)) as typeof Cronledger;
  if (tracing) {
    const { NodeTracerProvider } = await import("@opentelemetry/sdk-trace-node");
    const { BatchSpanProcessor } = await import("@opentelemetry/sdk-trace-base");
    // Every span goes through a batch processor to an exporter that drops it: the cost of making and handing spans over.
    const discard = { export: (_spans: unknown, done: (result: { code: 0 }) => void) => done({ code: 0 }), shutdown: () => Promise.resolve() };
    new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(discard)] }).register();
  }
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  const name = `cpu_ab_${process.pid}`;
  await admin.unsafe(`create database ${name}`);
  const [backend] = await admin<{ pid: number }[]>`select pg_backend_pid() as pid`;
  const postmaster = Number(readFileSync(`/proc/${backend?.pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ")[1]);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const job = defineJob({ name: "bench.cpu", run: () => {} });
  const ledger = createCronledger({ database: { url: url.toString(), poolSize: 4 }, jobs: [job], logger: silentLogger, metrics: false, chores: false, ...(tracing ? { tracing: true } : {}) });
  try {
    await ledger.migrate();
    // The schema check and the statements' first planning, outside the measurements.
    await ledger.enqueueMany([{ job }]);
    await ledger.work({ once: true });
    const measure = async (operation: Measurement["operation"], jobs: number, run: () => Promise<unknown>) => {
      const client = process.cpuUsage();
      const server = serverCpuSeconds(postmaster);
      await run();
      const used = process.cpuUsage(client);
      const measurement: Measurement = {
        variant,
        operation,
        clientMs: ((used.user + used.system) / 1e3 / jobs) * 1_000,
        serverMs: ((serverCpuSeconds(postmaster) - server) * 1e3 * 1_000) / jobs,
      };
      console.log(JSON.stringify(measurement));
    };
    await measure("enqueueMany", JOBS, async () => {
      for (let done = 0; done < JOBS; done += 1_000) await ledger.enqueueMany(Array.from({ length: Math.min(1_000, JOBS - done) }, () => ({ job })));
    });
    await measure("drain", JOBS, () => ledger.work({ once: true, concurrency: 10 }));
    const singles = Math.ceil(JOBS / 5);
    await measure("enqueue", singles, async () => {
      for (let index = 0; index < singles; index += 1) await ledger.enqueue(job);
    });
  } finally {
    await ledger.close();
    await admin.unsafe(`drop database ${name} with (force)`);
    await admin.end({ timeout: 1 });
  }
}

function runVariant(variant: string, tree: string, tracing: boolean, serverUrl: string): Promise<Measurement[]> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ["--import", "tsx", SELF, "--variant", variant, tree, tracing ? "tracing" : "plain", serverUrl], { stdio: ["ignore", "pipe", "inherit"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.on("close", (code) => {
      if (code !== 0) return fail(new Error(`${variant} exited ${code}`));
      const measured = output.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line) as Measurement);
      for (const measurement of measured) console.log(`round ${variant}: ${JSON.stringify(measurement)}`);
      done(measured);
    });
  });
}

export async function runCpuAbBench(): Promise<void> {
  const trees = (process.env.BENCH_AB_TREES ?? "this=.").split(",").map((pair) => {
    const [variant = "", tree = "."] = pair.split("=");
    return { variant, tree: resolve(tree), tracing: false };
  });
  const last = trees.at(-1);
  if (process.env.BENCH_AB_TRACING === "1" && last) trees.push({ ...last, variant: `${last.variant}+tracing`, tracing: true });
  const cluster = await startPrivateCluster();
  const results: Measurement[] = [];
  try {
    for (let round = 0; round < ROUNDS; round += 1) {
      // Interleaved, each round starting one further along, so no tree always runs first.
      for (let index = 0; index < trees.length; index += 1) {
        const { variant, tree, tracing } = trees[(index + round) % trees.length] ?? trees[0]!;
        results.push(...(await runVariant(variant, tree, tracing, cluster.url)));
      }
    }
  } finally {
    await cluster.destroy();
  }
  const cell = (values: number[]) => {
    const figures = spread(values);
    return figures ? `${formatNumber(figures.median, 1)} (${formatNumber(figures.min, 1)}–${formatNumber(figures.max, 1)})` : "-";
  };
  printSection(
    `CPU per 1,000 jobs, ms: this process (client) and the database server, median (min–max) of ${ROUNDS} rounds`,
    markdownTable(
      ["variant", ...OPERATIONS.flatMap((operation) => [`${operation} client`, `${operation} server`])],
      trees.map(({ variant }) => [
        variant,
        ...OPERATIONS.flatMap((operation) => {
          const mine = results.filter((result) => result.variant === variant && result.operation === operation);
          return [cell(mine.map((result) => result.clientMs)), cell(mine.map((result) => result.serverMs))];
        }),
      ]),
    ),
  );
}

if (process.argv[2] === "--variant") {
  const [, , , variant = "", tree = ".", tracing = "plain", serverUrl = ""] = process.argv;
  await measureTree(variant, tree, tracing === "tracing", serverUrl);
} else if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  await runCpuAbBench();
}

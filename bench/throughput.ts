// Side-by-side throughput in interleaved rounds: cronledger (directly and through PgBouncer),
// graphile-worker, pg-boss and the raw-SQL limit, with workers in separate OS processes.
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import postgres from "postgres";
import { createCronledger, defineJob, silentLogger } from "../src/index.js";
import { startPgBouncer, type PgBouncer } from "../test/support/pgbouncer.js";
import {
  BENCH_SERVER,
  dropDatabase,
  envList,
  envNumber,
  formatNumber,
  formatSpread,
  freshDatabase,
  markdownTable,
  percentile,
  printSection,
  rotate,
  spread,
  type Spread,
} from "./support.js";
import { nowMs, sleep, SYSTEMS, type Endpoint, type Producer, type SystemKey } from "./systems.js";

const WORKER = fileURLToPath(new URL("./worker-process.ts", import.meta.url));
const CEILING = fileURLToPath(new URL("./timer-ceiling.ts", import.meta.url));

/** Every size and count can be set from the environment; the defaults are the documented run. */
const SETTINGS = {
  rounds: envNumber("BENCH_ROUNDS", 3),
  jobs: envNumber("BENCH_JOBS", 20_000),
  multiJobs: envNumber("BENCH_MP_JOBS", 100_000),
  ioJobs: envNumber("BENCH_IO_JOBS", 20_000),
  ioMs: envNumber("BENCH_IO_MS", 5),
  ioRate: envNumber("BENCH_IO_RATE", 2_000),
  ioSeconds: envNumber("BENCH_IO_SECONDS", 5),
  /** Idle enqueue-to-start samples per run: the p99 of 200 was their second slowest, one hiccup of the machine; of 1,000, the tenth. */
  latencySamples: envNumber("BENCH_LATENCY_SAMPLES", 1_000),
  tickerSeconds: envNumber("BENCH_TICKER_SECONDS", 6),
  /** Server connections per database in the bench's PgBouncer: 20, PgBouncer's own default_pool_size. */
  pgbouncerPool: envNumber("BENCH_PGBOUNCER_POOL", 20),
};
/** Jobs per bulk-insert call, for every system alike. */
const ENQUEUE_CHUNK = 2_000;
const LATENCY_SPACING_MS = 5;
const ARRIVAL_TICK_MS = 10;

type LatencyMode = "idle" | "steady" | "none";

/**
 * pg-boss runs a batch per worker per poll (0.5 s at the shortest), so at
 * concurrency 50 it does at most 100 jobs/s per process and the I/O sections
 * would take minutes per round for it; BENCH_IO_PGBOSS=1 puts it back.
 */
const IO_SYSTEMS: readonly SystemKey[] = process.env.BENCH_IO_PGBOSS ? ["cronledger", "graphile", "pgboss"] : ["cronledger", "graphile"];

interface Section {
  readonly key: string;
  readonly title: string;
  readonly systems: readonly SystemKey[];
  readonly processes: number;
  readonly concurrency: number;
  readonly ioMs: number;
  readonly jobs: number;
  readonly latency: LatencyMode;
}

const ALL_SECTIONS: readonly Section[] = [
  {
    key: "single",
    title: `One process, concurrency 10, ${formatNumber(SETTINGS.jobs)} no-op jobs`,
    systems: ["cronledger", "cronledger-pgbouncer", "graphile", "pgboss", "raw"],
    processes: 1,
    concurrency: 10,
    ioMs: 0,
    jobs: SETTINGS.jobs,
    latency: "idle",
  },
  {
    key: "multi",
    title: `Four processes, concurrency 10 each, ${formatNumber(SETTINGS.multiJobs)} no-op jobs`,
    systems: ["cronledger", "cronledger-pgbouncer", "graphile", "pgboss", "raw"],
    processes: 4,
    concurrency: 10,
    ioMs: 0,
    jobs: SETTINGS.multiJobs,
    latency: "none",
  },
  {
    key: "io1",
    title: `I/O-shaped jobs (each awaits ${SETTINGS.ioMs} ms), one process, concurrency 50, ${formatNumber(SETTINGS.ioJobs)} jobs`,
    systems: IO_SYSTEMS,
    processes: 1,
    concurrency: 50,
    ioMs: SETTINGS.ioMs,
    jobs: SETTINGS.ioJobs,
    latency: "steady",
  },
  {
    key: "io4",
    title: `I/O-shaped jobs (each awaits ${SETTINGS.ioMs} ms), four processes, concurrency 50 each, ${formatNumber(SETTINGS.ioJobs)} jobs`,
    systems: IO_SYSTEMS,
    processes: 4,
    concurrency: 50,
    ioMs: SETTINGS.ioMs,
    jobs: SETTINGS.ioJobs,
    latency: "steady",
  },
];

/** The figures of one system in one round of one section. */
interface Run {
  readonly enqueuePerSecond: number;
  readonly drainPerSecond: number;
  /** The same jobs over the time from `go`: each process's start-up and the stagger between them included. */
  readonly fromGoPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

// ---- worker processes ---------------------------------------------------------------------------

interface Fleet {
  go(): void;
  /** Resolves once the processes together have run `jobs` jobs. */
  reached(jobs: number): Promise<void>;
  /** Epoch ms of the first job started by any process. */
  firstAt(): number;
  /** Stops every process; resolves with all enqueue-to-start samples. */
  stop(): Promise<number[]>;
}

async function spawnFleet(system: SystemKey, endpoint: Endpoint, section: Section): Promise<Fleet> {
  const progress: number[] = [];
  const firsts: number[] = [];
  const latencies: number[] = [];
  const waiters = new Set<() => void>();
  const children: ChildProcess[] = [];
  const exits: Promise<void>[] = [];
  const ready: Promise<void>[] = [];
  for (let index = 0; index < section.processes; index += 1) {
    // BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" profiles every worker process (NODE_OPTIONS refuses --cpu-prof).
    const child = spawn(process.execPath, [...(process.env.BENCH_NODE_ARGS?.split(" ").filter(Boolean) ?? []), "--import", "tsx", WORKER], {
      env: {
        ...process.env,
        BENCH_SYSTEM: system,
        BENCH_URL: endpoint.url,
        BENCH_PGBOUNCER_URL: endpoint.pgbouncerUrl ?? "",
        BENCH_CONCURRENCY: String(section.concurrency),
        BENCH_IO_MS: String(section.ioMs),
      },
      stdio: ["pipe", "pipe", "inherit"],
    });
    children.push(child);
    progress.push(0);
    let markReady!: () => void;
    ready.push(new Promise<void>((resolve) => (markReady = resolve)));
    exits.push(
      new Promise<void>((resolve, reject) =>
        child.on("exit", (code) => (code === 0 || code === null ? resolve() : reject(new Error(`bench worker (${system}) exited with ${code}`)))),
      ),
    );
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const space = line.indexOf(" ");
      const kind = space < 0 ? line : line.slice(0, space);
      const value = line.slice(space + 1);
      if (kind === "ready") markReady();
      else if (kind === "progress") {
        progress[index] = Number(value);
        for (const check of waiters) check();
      } else if (kind === "first") firsts.push(Number(value));
      else if (kind === "latencies") latencies.push(...(JSON.parse(value) as number[]));
    });
  }
  await Promise.race([Promise.all(ready), Promise.all(exits).then(() => Promise.reject(new Error(`bench workers (${system}) exited before ready`)))]);
  const total = () => progress.reduce((sum, n) => sum + n, 0);
  return {
    go: () => children.forEach((child) => child.stdin?.write("go\n")),
    reached: (jobs) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`bench: ${system} ran ${total()} of ${jobs} jobs in 10 minutes`)), 600_000);
        const check = () => {
          if (total() < jobs) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve();
        };
        waiters.add(check);
        check();
      }),
    firstAt: () => Math.min(...firsts),
    async stop() {
      children.forEach((child) => child.stdin?.write("stop\n"));
      await Promise.all(exits);
      return latencies;
    },
  };
}

/**
 * The drain of an I/O section's jobs with no queue: the same processes and slots only awaiting the same
 * delay (bench/timer-ceiling.ts). What the systems reach is read against it: no queue can beat it.
 */
async function timerCeiling(section: Section): Promise<number> {
  const share = Math.ceil(section.jobs / section.processes);
  const children = Array.from({ length: section.processes }, () =>
    spawn(process.execPath, ["--import", "tsx", CEILING], {
      env: { ...process.env, BENCH_CONCURRENCY: String(section.concurrency), BENCH_IO_MS: String(section.ioMs), BENCH_JOBS: String(share) },
      stdio: ["pipe", "pipe", "inherit"],
    }),
  );
  const lines = children.map((child) => createInterface({ input: child.stdout! }));
  const ready = lines.map((reader) => new Promise<void>((resolve) => reader.once("line", () => resolve())));
  await Promise.all(ready);
  const elapsed = lines.map(
    (reader) => new Promise<number>((resolve) => reader.on("line", (line) => line.startsWith("elapsed ") && resolve(Number(line.slice(8))))),
  );
  children.forEach((child) => child.stdin?.write("go\n"));
  const slowest = Math.max(...(await Promise.all(elapsed)));
  return (share * section.processes) / (slowest / 1000);
}

// ---- one run ------------------------------------------------------------------------------------

async function timedEnqueue(producer: Producer, jobs: number): Promise<number> {
  const started = performance.now();
  for (let done = 0; done < jobs; done += ENQUEUE_CHUNK) await producer.enqueueBulk(Math.min(ENQUEUE_CHUNK, jobs - done));
  return jobs / ((performance.now() - started) / 1000);
}

/** Waits until the producer sees no unfinished job, checking every 5 ms. */
async function finished(producer: Producer): Promise<number> {
  while ((await producer.remaining()) > 0) await sleep(5);
  return nowMs();
}

/** One enqueue at a time into idle workers, LATENCY_SPACING_MS apart. */
async function idleArrivals(producer: Producer): Promise<number> {
  for (let i = 0; i < SETTINGS.latencySamples; i += 1) {
    await producer.enqueueTimed([nowMs()]);
    await sleep(LATENCY_SPACING_MS);
  }
  return SETTINGS.latencySamples;
}

/** Open-loop arrivals: SETTINGS.ioRate jobs a second in batches every ARRIVAL_TICK_MS, while the workers run. */
async function steadyArrivals(producer: Producer): Promise<number> {
  const perTick = Math.max(1, Math.round((SETTINGS.ioRate * ARRIVAL_TICK_MS) / 1000));
  const ticks = Math.round((SETTINGS.ioSeconds * 1000) / ARRIVAL_TICK_MS);
  const start = performance.now();
  for (let tick = 0; tick < ticks; tick += 1) {
    const wait = start + tick * ARRIVAL_TICK_MS - performance.now();
    if (wait > 0) await sleep(wait);
    const sentAt = nowMs();
    await producer.enqueueTimed(Array.from({ length: perTick }, () => sentAt));
  }
  return perTick * ticks;
}

async function runOnce(system: SystemKey, section: Section, pgbouncer: PgBouncer | undefined): Promise<Run> {
  const name = `cronledger_bench_${system.replace(/-/g, "_")}`;
  const url = await freshDatabase(name);
  const endpoint: Endpoint = { url, ...(pgbouncer ? { pgbouncerUrl: withHost(url, pgbouncer.url) } : {}) };
  const implementation = SYSTEMS[system];
  await implementation.install(endpoint);
  const producer = await implementation.producer(endpoint);
  let fleet: Fleet | undefined;
  try {
    fleet = await spawnFleet(system, endpoint, section);
    const enqueuePerSecond = await timedEnqueue(producer, section.jobs);
    const goAt = nowMs();
    fleet.go();
    await fleet.reached(section.jobs);
    const drainedAt = await finished(producer);
    const drainPerSecond = section.jobs / ((drainedAt - fleet.firstAt()) / 1000);
    const fromGoPerSecond = section.jobs / ((drainedAt - goAt) / 1000);
    let samples = 0;
    if (implementation.measuresLatency && section.latency !== "none") {
      samples = section.latency === "idle" ? await idleArrivals(producer) : await steadyArrivals(producer);
      await fleet.reached(section.jobs + samples);
    }
    const latencies = await fleet.stop();
    fleet = undefined;
    return {
      enqueuePerSecond,
      drainPerSecond,
      fromGoPerSecond,
      p50Ms: samples > 0 ? percentile(latencies, 50) : Number.NaN,
      p99Ms: samples > 0 ? percentile(latencies, 99) : Number.NaN,
    };
  } finally {
    await fleet?.stop().catch(() => undefined);
    await producer.close();
    await dropDatabase(name);
  }
}

function withHost(url: string, hostOf: string): string {
  const target = new URL(url);
  target.host = new URL(hostOf).host;
  return target.toString();
}

// ---- the ticker ---------------------------------------------------------------------------------

/** Slot-to-enqueue latency of a 6-field every-second entry under start(), from the jobs' own timestamps. */
async function tickerLatency(): Promise<{ p50: number; p99: number; slots: number }> {
  const name = "cronledger_bench_ticker";
  const url = await freshDatabase(name);
  const everySecond = defineJob({ name: "bench.every-second", run: () => {} });
  const ledger = createCronledger({ database: url, jobs: [everySecond], schedule: [{ job: everySecond, cron: "* * * * * *" }], logger: silentLogger, chores: false });
  const probe = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await ledger.migrate();
    await ledger.start({ concurrency: 10, handleSignals: false });
    await sleep(SETTINGS.tickerSeconds * 1000);
    await ledger.stop();
    const rows = await probe<{ lag_ms: number }[]>`
      select (extract(epoch from created_at - scheduled_for) * 1000)::float8 as lag_ms from cronledger.jobs where job_name = 'bench.every-second'`;
    const lags = rows.map((row) => row.lag_ms);
    return { p50: percentile(lags, 50), p99: percentile(lags, 99), slots: lags.length };
  } finally {
    await probe.end({ timeout: 1 });
    await ledger.close();
    await dropDatabase(name);
  }
}

// ---- tables -------------------------------------------------------------------------------------

type Results = Map<string, Map<SystemKey, Run[]>>;
/** Per I/O section, the no-queue drain of each round (timerCeiling). */
type Ceilings = Map<string, number[]>;

function figure(results: Results, section: string, system: SystemKey, pick: (run: Run) => number): Spread | undefined {
  const runs = results.get(section)?.get(system);
  return runs === undefined ? undefined : spread(runs.map(pick));
}

function sectionTable(results: Results, section: Section, systems: readonly SystemKey[], ceiling: readonly number[] | undefined): string {
  const rows: [string, (run: Run) => number, number][] = [
    [`enqueue jobs/s (bulk calls of ${formatNumber(ENQUEUE_CHUNK)})`, (run) => run.enqueuePerSecond, 0],
    ["drain jobs/s", (run) => run.drainPerSecond, 0],
  ];
  // Drains are timed from the first job any process starts; with several processes the others are
  // still starting then, so their start-up counts in part. Counted from `go`, all of it counts.
  if (section.processes > 1) rows.push(["drain jobs/s counted from go (start-up included)", (run) => run.fromGoPerSecond, 0]);
  if (section.latency !== "none") {
    const label = section.latency === "idle" ? "enqueue-to-start, idle workers" : `enqueue-to-start at ${formatNumber(SETTINGS.ioRate)} jobs/s arriving`;
    rows.push([`${label}, p50 ms`, (run) => run.p50Ms, 1], [`${label}, p99 ms`, (run) => run.p99Ms, 1]);
  }
  // The no-queue ceiling has a drain only: the same slots awaiting the same delay, nothing enqueued.
  const ceilingColumn = ceiling === undefined ? [] : ["no queue: the awaits alone"];
  const ceilingCell = (label: string) => (ceiling === undefined ? [] : [label === "drain jobs/s" ? formatSpread(spread(ceiling), 0) : "n/a"]);
  return markdownTable(
    ["metric", ...systems.map((system) => SYSTEMS[system].label), ...ceilingColumn],
    rows.map(([label, pick, digits]) => [label, ...systems.map((system) => formatSpread(figure(results, section.key, system, pick), digits)), ...ceilingCell(label)]),
  );
}

interface Target {
  readonly label: string;
  readonly value: number | undefined;
  readonly shown: string;
  readonly goal: string;
  readonly met: boolean | undefined;
}

function ratioTarget(label: string, a: Spread | undefined, b: Spread | undefined, goal: number, asPercent = false): Target {
  if (a === undefined || b === undefined || !(b.median > 0)) return { label, value: undefined, shown: "n/a", goal: "", met: undefined };
  const value = a.median / b.median;
  return {
    label,
    value,
    shown: asPercent ? `${(value * 100).toFixed(1)} %` : `${value.toFixed(2)}x`,
    goal: asPercent ? `>= ${(goal * 100).toFixed(0)} %` : `>= ${goal}x`,
    met: value >= goal,
  };
}

function targetsTable(results: Results, ceilings: Ceilings): string {
  const drain = (section: string, system: SystemKey) => figure(results, section, system, (run) => run.drainPerSecond);
  const ceiling = (section: string) => {
    const rates = ceilings.get(section);
    return rates === undefined ? undefined : spread(rates);
  };
  const p50 = figure(results, "single", "cronledger", (run) => run.p50Ms);
  const p99 = figure(results, "single", "cronledger", (run) => run.p99Ms);
  const graphileP99 = figure(results, "single", "graphile", (run) => run.p99Ms);
  const targets: Target[] = [
    ratioTarget("drain, one process: cronledger / graphile-worker", drain("single", "cronledger"), drain("single", "graphile"), 1.3),
    ratioTarget("drain, one process: cronledger / pg-boss", drain("single", "cronledger"), drain("single", "pgboss"), 5),
    ratioTarget("drain, one process: cronledger / raw SQL limit", drain("single", "cronledger"), drain("single", "raw"), 0.7, true),
    ratioTarget("drain, four processes: cronledger / graphile-worker", drain("multi", "cronledger"), drain("multi", "graphile"), 1.3),
    ratioTarget("drain, four processes: cronledger / raw SQL limit (no target)", drain("multi", "cronledger"), drain("multi", "raw"), 0, true),
    ratioTarget("drain of I/O-shaped jobs, one process: cronledger / graphile-worker", drain("io1", "cronledger"), drain("io1", "graphile"), 1.3),
    ratioTarget("drain of I/O-shaped jobs, four processes: cronledger / graphile-worker", drain("io4", "cronledger"), drain("io4", "graphile"), 1.3),
    ratioTarget("drain of I/O-shaped jobs, one process: cronledger / no-queue ceiling (no target)", drain("io1", "cronledger"), ceiling("io1"), 0, true),
    ratioTarget("drain of I/O-shaped jobs, one process: graphile-worker / no-queue ceiling (no target)", drain("io1", "graphile"), ceiling("io1"), 0, true),
    ratioTarget("drain of I/O-shaped jobs, four processes: cronledger / no-queue ceiling (no target)", drain("io4", "cronledger"), ceiling("io4"), 0, true),
    ratioTarget("drain of I/O-shaped jobs, four processes: graphile-worker / no-queue ceiling (no target)", drain("io4", "graphile"), ceiling("io4"), 0, true),
    ratioTarget("drain through PgBouncer / direct, one process", drain("single", "cronledger-pgbouncer"), drain("single", "cronledger"), 0.8, true),
    ratioTarget("drain through PgBouncer / direct, four processes", drain("multi", "cronledger-pgbouncer"), drain("multi", "cronledger"), 0.8, true),
    p50 === undefined
      ? { label: "enqueue-to-start p50, cronledger", value: undefined, shown: "n/a", goal: "< 3 ms", met: undefined }
      : { label: "enqueue-to-start p50, cronledger", value: p50.median, shown: `${p50.median.toFixed(1)} ms`, goal: "< 3 ms", met: p50.median < 3 },
    p99 === undefined || graphileP99 === undefined
      ? { label: "enqueue-to-start p99: cronledger vs graphile-worker", value: undefined, shown: "n/a", goal: "<= graphile-worker's", met: undefined }
      : {
          label: "enqueue-to-start p99: cronledger vs graphile-worker",
          value: p99.median,
          shown: `${p99.median.toFixed(1)} ms vs ${graphileP99.median.toFixed(1)} ms`,
          goal: "<= graphile-worker's",
          met: p99.median <= graphileP99.median,
        },
  ];
  return markdownTable(
    ["target (ratios of medians)", "measured", "goal", "met"],
    // A partial run (BENCH_SECTIONS, BENCH_SYSTEMS) lists only the targets it measured.
    targets.filter((target) => target.value !== undefined).map((target) => [target.label, target.shown, target.goal || "-", target.met === undefined ? "-" : target.met ? "yes" : "**no**"]),
    (column) => column === 1,
  );
}

// ---- the whole bench ----------------------------------------------------------------------------

/**
 * Every section in every round, systems in rotating order within each
 * section (A B C, B C A, C A B), each run in a fresh database with its
 * workers in separate OS processes. Prints markdown tables of medians and
 * ranges and the targets computed from the medians.
 */
export async function runThroughputBench(): Promise<Results> {
  const wantedSections = envList("BENCH_SECTIONS", [...ALL_SECTIONS.map((section) => section.key), "ticker"]);
  const wantedSystems = envList("BENCH_SYSTEMS", [...Object.keys(SYSTEMS)]) as SystemKey[];
  const sections = ALL_SECTIONS.filter((section) => wantedSections.includes(section.key)).map((section) => ({
    ...section,
    systems: section.systems.filter((system) => wantedSystems.includes(system)),
  }));
  const needsBouncer = sections.some((section) => section.systems.includes("cronledger-pgbouncer"));
  const pgbouncer = needsBouncer ? await startPgBouncer(BENCH_SERVER, { poolSize: SETTINGS.pgbouncerPool, log: (line) => console.log(line) }) : undefined;
  const results: Results = new Map();
  const ceilings: Ceilings = new Map();
  try {
    for (let round = 0; round < SETTINGS.rounds; round += 1) {
      for (const section of sections) {
        for (const system of rotate(section.systems, round)) {
          const started = performance.now();
          const run = await runOnce(system, section, pgbouncer);
          const bySystem = results.get(section.key) ?? new Map<SystemKey, Run[]>();
          results.set(section.key, bySystem);
          bySystem.set(system, [...(bySystem.get(system) ?? []), run]);
          console.log(
            `round ${round + 1}/${SETTINGS.rounds} ${section.key} ${SYSTEMS[system].label}: drain ${formatNumber(run.drainPerSecond)} jobs/s, ` +
              `enqueue ${formatNumber(run.enqueuePerSecond)} jobs/s, p50 ${formatNumber(run.p50Ms, 1)} ms, p99 ${formatNumber(run.p99Ms, 1)} ms ` +
              `(${((performance.now() - started) / 1000).toFixed(1)} s)`,
          );
        }
        if (section.ioMs > 0 && section.systems.length > 0) {
          const rate = await timerCeiling(section);
          ceilings.set(section.key, [...(ceilings.get(section.key) ?? []), rate]);
          console.log(`round ${round + 1}/${SETTINGS.rounds} ${section.key} no queue (the awaits alone): drain ${formatNumber(rate)} jobs/s`);
        }
      }
    }
  } finally {
    await pgbouncer?.stop();
  }
  const rounds = `${SETTINGS.rounds} round${SETTINGS.rounds === 1 ? "" : "s"}`;
  for (const section of sections) {
    if (section.systems.length > 0) printSection(`${section.title} (median (min–max) of ${rounds})`, sectionTable(results, section, section.systems, ceilings.get(section.key)));
  }
  printSection(`Targets (medians of ${rounds})`, targetsTable(results, ceilings));
  if (wantedSections.includes("ticker")) {
    const ticker = await tickerLatency();
    printSection(
      `Ticker: slot-to-enqueue latency of a 6-field every-second entry under start(), ${ticker.slots} slots`,
      markdownTable(["metric", "cronledger"], [["p50 ms", formatNumber(ticker.p50, 1)], ["p99 ms", formatNumber(ticker.p99, 1)]]),
    );
  }
  return results;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  await runThroughputBench();
}

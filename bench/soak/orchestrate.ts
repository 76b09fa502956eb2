// `npm run soak -- --minutes N --seed S [--replicas R]`: the fault soak. It starts a private PostgreSQL cluster in a
// temporary directory (never the shared server), R replicas (bench/soak/replica.ts: ticker, worker, chores), each
// behind its own fault proxy (bench/soak/proxy.ts), enqueues continuously with idempotency keys, and for N minutes
// injects the seeded plan's faults (bench/soak/plan.ts): link cuts of 0.1-2x the lease, 57P01 / 57014 / 40001 on
// live connections, slow answers, SIGKILLed and restarted replicas, server restarts. Then a quiet drain, a SIGTERM
// to every replica, and the checker (bench/soak/check.ts) over the database and the side-effect log. It prints the
// faults injected by kind and the violations by check, and exits 1 on any violation with the seed to replay it.
//
// --failover: the cluster gets a synchronous streaming standby (pg_basebackup), and once, in the middle of the run,
// the primary is stopped hard (immediate) and the standby promoted; every proxy then leads to it.
//
// Options: --lease-ms (default 3000), --plant double-effect,drop-success (planted bugs, for the checker's own test),
// --keep (leave the cluster and logs in place), --json (the result as one JSON line after the table).
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import postgres from "postgres";
import { createCronledger, type Cronledger } from "../../src/cronledger.js";
import { silentLogger } from "../../src/log.js";
import { startPrivateCluster, startStandby, type PrivateCluster } from "../../test/support/private-cluster.js";
import { check, type Interval, type Violation } from "./check.js";
import { FAULT_KINDS, OPT_IN_KINDS, faultPlan, seededRandom, type FaultKind, type PlannedFault } from "./plan.js";
import { startSoakProxy, type InjectedCode, type SoakProxy } from "./proxy.js";
import { defineJob } from "../../src/jobs/define-job.js";
import { WORK_JOB, workPayload, type Effect } from "./shape.js";

const REPLICA = fileURLToPath(new URL("./replica.ts", import.meta.url));
const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));
/** Between two enqueues. */
const ENQUEUE_EVERY_MS = 100;
/** An error fault impairs its replica this long (its statements fail, its parts back off). */
const ERROR_IMPAIRS_MS = 3_000;
const DRAIN_TIMEOUT_MS = 120_000;
/** After the faults, how long an enqueue whose answer was lost is tried again with its key. */
const ENQUEUE_SETTLE_MS = 60_000;
/** The orchestrator enqueues the replicas' job by its definition (its handler runs in the replicas only). */
const workJob = defineJob({ name: WORK_JOB, payload: workPayload, retry: "probe", run: () => {} });
const STOP_TIMEOUT_MS = 30_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Settings {
  readonly minutes: number;
  readonly seed: number;
  readonly replicas: number;
  readonly leaseMs: number;
  readonly plant: string;
  readonly failover: boolean;
  readonly keep: boolean;
  readonly json: boolean;
}

/** The planted bugs bench/soak/replica.ts knows (SOAK_PLANT). */
const PLANTS = ["double-effect", "drop-success"];

function plants(raw: string): string {
  const unknown = raw.split(",").filter((name) => name !== "" && !PLANTS.includes(name));
  if (unknown.length > 0) throw new Error(`--plant ${raw}: unknown ${unknown.join(", ")}; the planted bugs are ${PLANTS.join(", ")} (comma-separated)`);
  return raw;
}

function settings(): Settings {
  const { values } = parseArgs({
    options: {
      minutes: { type: "string", default: "2" },
      seed: { type: "string" },
      replicas: { type: "string", default: "3" },
      "lease-ms": { type: "string", default: "3000" },
      plant: { type: "string", default: "" },
      failover: { type: "boolean", default: false },
      keep: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
    },
  });
  const number = (name: string, raw: string | undefined, min: number) => {
    const value = Number(raw);
    if (!Number.isFinite(value) || value < min) throw new Error(`--${name} ${raw}: must be a number of at least ${min}`);
    return value;
  };
  return {
    minutes: number("minutes", values.minutes, 0.25),
    seed: values.seed === undefined ? Math.floor(Date.now() % 2_147_483_647) : Math.floor(number("seed", values.seed, 0)),
    replicas: Math.floor(number("replicas", values.replicas, 1)),
    leaseMs: number("lease-ms", values["lease-ms"], 500),
    plant: plants(values.plant ?? ""),
    failover: values.failover ?? false,
    keep: values.keep ?? false,
    json: values.json ?? false,
  };
}

interface Replica {
  readonly index: number;
  child: ChildProcess;
  /** Set when the orchestrator ends it (SIGKILL, or SIGTERM at the end): its exit is not a death. */
  ending: boolean;
  ready: Promise<void>;
  exited: Promise<void>;
}

class Soak {
  readonly dir = mkdtempSync(join(tmpdir(), "cronledger-soak-"));
  readonly startedAt = Date.now();
  /** The primary: the first cluster, or after a failover the promoted standby. */
  cluster!: PrivateCluster;
  standby?: PrivateCluster & { promote(): Promise<void> };
  /** The primary a failover left (stopped; its files go with the rest at the end, or stay with --keep). */
  readonly retired: PrivateCluster[] = [];
  /** The orchestrator's own way in (enqueues, the drain, the checker): a proxy with no faults, moved by a failover. */
  link!: SoakProxy;
  readonly proxies: SoakProxy[] = [];
  readonly replicas: Replica[] = [];
  readonly impaired: Interval[][];
  readonly serverDown: Interval[] = [];
  readonly serverCrashes: number[] = [];
  readonly killed = new Map<number, number>();
  readonly deaths: string[] = [];
  readonly applied = Object.fromEntries([...FAULT_KINDS, ...OPT_IN_KINDS].map((kind) => [kind, 0])) as Record<FaultKind, number>;
  readonly acks: { key: string; id: number }[] = [];
  enqueueFailures = 0;
  /** Faults under way (a server restart, a replica's restart): the drain waits for them. */
  readonly underway = new Set<Promise<unknown>>();

  constructor(readonly settings: Settings) {
    this.impaired = Array.from({ length: settings.replicas }, () => []);
  }

  log(text: string): void {
    process.stderr.write(`soak +${((Date.now() - this.startedAt) / 1000).toFixed(1)}s ${text}\n`);
  }

  spawnReplica(index: number): Replica {
    const url = new URL(this.cluster.url);
    url.port = String(this.proxies[index]?.port);
    const output = createWriteStream(join(this.dir, `replica-r${index}.log`), { flags: "a" });
    const child = spawn(process.execPath, ["--import", "tsx", REPLICA], {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        DATABASE_URL: url.toString(),
        SOAK_EFFECTS: join(this.dir, `effects-r${index}.log`),
        SOAK_REPLICA: `r${index}`,
        SOAK_LEASE_MS: String(this.settings.leaseMs),
        SOAK_PLANT: this.settings.plant,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let tail = "";
    let readyResolve!: () => void;
    const replica: Replica = { index, child, ending: false, ready: new Promise((resolve) => (readyResolve = resolve)), exited: Promise.resolve() };
    const onData = (chunk: Buffer) => {
      output.write(chunk);
      tail = (tail + chunk.toString()).slice(-3_000);
      if (/ ready\n/.test(tail)) readyResolve();
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    replica.exited = new Promise((resolve) =>
      child.on("close", (code, signal) => {
        output.end();
        if (!replica.ending) this.deaths.push(`replica r${index} (pid ${child.pid}) exited on its own (code ${code}, signal ${signal}); its last output:\n${tail.slice(-1_500)}`);
        readyResolve();
        resolve();
      }),
    );
    this.replicas[index] = replica;
    return replica;
  }

  /** SIGKILL, and a new process `downMs` later; impaired until the new one is ready. */
  async kill(index: number, downMs: number): Promise<void> {
    const replica = this.replicas[index];
    if (!replica || replica.ending) return;
    const from = Date.now();
    replica.ending = true;
    if (replica.child.pid !== undefined) this.killed.set(replica.child.pid, from);
    replica.child.kill("SIGKILL");
    await replica.exited;
    await sleep(downMs);
    await this.spawnReplica(index).ready;
    this.impaired[index]?.push({ from, to: Date.now() });
  }

  async restartServer(mode: "fast" | "immediate", downMs: number): Promise<void> {
    const from = Date.now();
    await this.cluster.stop(mode);
    if (mode === "immediate") this.serverCrashes.push(Date.now());
    await sleep(downMs);
    await this.cluster.start();
    this.serverDown.push({ from, to: Date.now() });
  }

  /**
   * The primary stopped hard and the standby promoted (pg_ctl promote, waiting for it), then every proxy moved to
   * it: a failover manager's work with no detection delay. Commits that did not wait for the standby (claims and
   * completions: synchronous_commit off) may be lost, as in a crash; everything acknowledged synchronously is there.
   */
  async failover(): Promise<void> {
    const standby = this.standby;
    if (!standby) return;
    this.standby = undefined;
    const from = Date.now();
    await this.cluster.stop("immediate");
    this.serverCrashes.push(Date.now());
    const old = this.cluster;
    await standby.promote();
    this.cluster = standby;
    for (const proxy of [...this.proxies, this.link]) proxy.retarget(standby.port);
    this.serverDown.push({ from, to: Date.now() });
    this.log(`failover: the standby on port ${standby.port} is the primary after ${Date.now() - from} ms`);
    this.retired.push(old);
  }

  apply(fault: PlannedFault): void {
    const now = Date.now();
    const proxy = this.proxies[fault.replica] as SoakProxy;
    const impair = (ms: number): void => void this.impaired[fault.replica]?.push({ from: now, to: now + ms });
    this.applied[fault.kind] += 1;
    this.log(`${fault.kind} r${fault.replica} ${fault.durationMs} ms ${fault.amount || ""}`);
    switch (fault.kind) {
      case "cut":
        proxy.cut(fault.durationMs);
        return impair(fault.durationMs);
      case "slow":
        proxy.slow(fault.amount, fault.durationMs);
        return impair(fault.durationMs + fault.amount);
      case "kill":
        return this.track(this.kill(fault.replica, fault.durationMs));
      case "pg-restart":
        return this.track(this.restartServer(fault.mode ?? "fast", fault.durationMs));
      case "failover":
        return this.track(this.failover());
      default:
        proxy.inject(fault.kind.slice("error-".length) as InjectedCode, fault.amount);
        return impair(ERROR_IMPAIRS_MS);
    }
  }

  track(work: Promise<unknown>): void {
    const tracked = work.catch((error: unknown) => this.deaths.push(`the orchestrator's fault failed: ${String(error)}`));
    this.underway.add(tracked);
    void tracked.finally(() => this.underway.delete(tracked));
  }
}

/** Enqueues one job every ENQUEUE_EVERY_MS, each with its own key; a key whose enqueue failed is tried again until acknowledged. */
function enqueueLoop(soak: Soak, ledger: Cronledger, stopped: () => boolean): Promise<void> {
  const random = seededRandom(soak.settings.seed ^ 0x5eed);
  let n = 0;
  const pending: string[] = [];
  let giveUpAt = Infinity;
  const errors = new Map<string, number>();
  return (async () => {
    while (!stopped() || (pending.length > 0 && Date.now() < giveUpAt)) {
      if (stopped() && giveUpAt === Infinity) giveUpAt = Date.now() + ENQUEUE_SETTLE_MS;
      const key = pending.shift() ?? (stopped() ? undefined : `soak-${soak.settings.seed}-${(n += 1)}`);
      if (key === undefined) break;
      const payload = { ms: Math.round(20 + random() * 780), failFirst: random() < 0.1 };
      try {
        const { id } = await ledger.enqueue(workJob, payload, { idempotencyKey: key });
        soak.acks.push({ key, id });
      } catch (error) {
        soak.enqueueFailures += 1;
        pending.push(key);
        // Each kind of failure once in the log: an enqueue that can never succeed shows at once.
        const kind = String(error).slice(0, 160);
        if (!errors.has(kind)) soak.log(`enqueue failed (tried again with its key): ${kind}`);
        errors.set(kind, (errors.get(kind) ?? 0) + 1);
      }
      await sleep(ENQUEUE_EVERY_MS);
    }
    if (pending.length > 0) soak.log(`${pending.length} enqueues never acknowledged (not checked: nobody was told they were done)`);
  })();
}

function readEffects(soak: Soak): Effect[] {
  const effects: Effect[] = [];
  for (let index = 0; index < soak.settings.replicas; index += 1) {
    let text = "";
    try {
      text = readFileSync(join(soak.dir, `effects-r${index}.log`), "utf8");
    } catch {
      continue;
    }
    // A SIGKILLed handler may leave half a line: nothing it claims can be read from it.
    for (const line of text.split("\n")) if (line.trim() !== "") effects.push(JSON.parse(line) as Effect);
  }
  return effects.sort((a, b) => a.t - b.t);
}

function table(soak: Soak, violations: readonly Violation[]): string {
  const injected: Record<string, number> = {};
  for (const proxy of soak.proxies) for (const [code, n] of Object.entries(proxy.injected)) injected[`error-${code}`] = (injected[`error-${code}`] ?? 0) + n;
  const kinds = soak.settings.failover ? [...FAULT_KINDS, ...OPT_IN_KINDS] : FAULT_KINDS;
  const rows = kinds.map((kind) => `| ${kind.padEnd(12)} | ${String(soak.applied[kind]).padStart(7)} | ${String(kind in injected ? injected[kind] : soak.applied[kind]).padStart(8)} |`);
  const checks = new Map<string, number>();
  for (const violation of violations) checks.set(violation.check, (checks.get(violation.check) ?? 0) + 1);
  const lines = [
    "| fault        | events  | injected |",
    "|--------------|---------|----------|",
    ...rows,
    "",
    `acknowledged enqueues: ${soak.acks.length} (${soak.enqueueFailures} enqueue attempts failed and were retried with their key)`,
    "",
    "| check                | violations |",
    "|----------------------|------------|",
    ...(checks.size === 0 ? ["| (all)                |          0 |"] : [...checks].map(([name, n]) => `| ${name.padEnd(20)} | ${String(n).padStart(10)} |`)),
  ];
  return lines.join("\n");
}

/**
 * A streaming standby of the soak's cluster (pg_basebackup, as test/failover.test.ts makes one), made synchronous
 * only once it exists: pg_basebackup copies postgresql.auto.conf, and a promoted standby that still named a
 * synchronous standby of its own would wait for it on every commit.
 */
async function startSynchronousStandby(soak: Soak, sql: postgres.Sql): Promise<void> {
  soak.standby = await startStandby(soak.cluster);
  await sql`alter system set synchronous_standby_names = '*'`;
  await sql`select pg_reload_conf()`;
  const deadline = Date.now() + 60_000;
  while ((await sql<{ s: string }[]>`select sync_state as s from pg_stat_replication`)[0]?.s !== "sync") {
    if (Date.now() > deadline) throw new Error("the standby did not stream synchronously within 60 s");
    await sleep(200);
  }
  soak.log(`standby on port ${soak.standby.port} streams synchronously`);
}

async function main(): Promise<number> {
  const soak = new Soak(settings());
  const { minutes, seed, replicas, leaseMs } = soak.settings;
  const replay = `npm run soak -- --minutes ${minutes} --seed ${seed} --replicas ${replicas}${leaseMs === 3_000 ? "" : ` --lease-ms ${leaseMs}`}${soak.settings.plant ? ` --plant ${soak.settings.plant}` : ""}${soak.settings.failover ? " --failover" : ""}`;
  soak.log(`seed ${seed}: ${replay} (logs in ${soak.dir})`);
  soak.cluster = await startPrivateCluster();
  soak.link = await startSoakProxy(soak.cluster.port);
  const linkUrl = new URL(soak.cluster.url);
  linkUrl.port = String(soak.link.port);
  const ledger = createCronledger({ database: { url: linkUrl.toString(), poolSize: 4 }, jobs: [workJob], chores: false, logger: silentLogger, metrics: false });
  const sql = postgres(linkUrl.toString(), { max: 2, onnotice: () => {} });
  let exitCode = 1;
  try {
    await ledger.migrate();
    if (soak.settings.failover) await startSynchronousStandby(soak, sql);
    for (let index = 0; index < replicas; index += 1) soak.proxies.push(await startSoakProxy(soak.cluster.port));
    for (let index = 0; index < replicas; index += 1) soak.spawnReplica(index);
    await Promise.all(soak.replicas.map((replica) => replica.ready));
    soak.log("replicas ready; faults begin");

    const plan = faultPlan({ seed, minutes, replicas, leaseMs, failover: soak.settings.failover });
    writeFileSync(join(soak.dir, "plan.json"), JSON.stringify(plan, null, 1));
    const begin = Date.now();
    let faulting = true;
    const timers = plan.map((fault) => setTimeout(() => faulting && soak.apply(fault), fault.atMs));
    const enqueuing = enqueueLoop(soak, ledger, () => !faulting);
    await sleep(minutes * 60_000);
    faulting = false;
    timers.forEach(clearTimeout);
    soak.log("faults end; quiet drain");
    await Promise.all(soak.underway);
    for (const proxy of soak.proxies) proxy.calm();
    await enqueuing;
    const keys = soak.acks.map((ack) => ack.id);
    const drainDeadline = Date.now() + DRAIN_TIMEOUT_MS;
    for (;;) {
      const [row] = await sql<{ n: number }[]>`select count(*)::int as n from cronledger.job_queue where id = any(${keys}::bigint[])`;
      if (row?.n === 0 || Date.now() > drainDeadline) break;
      await sleep(500);
    }
    // A few slots of the entries with every replica healthy, then the end.
    await sleep(Math.max(5_000, 2 * leaseMs));
    const quietEnd = Date.now();
    const unstopped: string[] = [];
    await Promise.all(
      soak.replicas.map(async (replica) => {
        replica.ending = true;
        replica.child.kill("SIGTERM");
        const stopped = await Promise.race([replica.exited.then(() => true), sleep(STOP_TIMEOUT_MS).then(() => false)]);
        if (!stopped) {
          unstopped.push(`replica r${replica.index} did not stop within ${STOP_TIMEOUT_MS} ms of SIGTERM`);
          replica.child.kill("SIGKILL");
        }
      }),
    );
    const violations = await check({
      sql,
      effects: readEffects(soak),
      acks: soak.acks,
      impaired: soak.impaired,
      serverDown: soak.serverDown,
      serverCrashes: soak.serverCrashes,
      killed: soak.killed,
      deaths: soak.deaths,
      unstopped,
      // The first slots come while the replicas settle; the last ones while they stop.
      window: { from: begin + 4_000, to: quietEnd - 3_000 },
    });
    process.stdout.write(`\nfault soak: ${minutes} min, ${replicas} replicas, lease ${leaseMs} ms, seed ${seed}\n\n${table(soak, violations)}\n`);
    for (const violation of violations.slice(0, 40)) process.stdout.write(`\nviolation [${violation.check}] ${violation.detail}`);
    if (violations.length > 40) process.stdout.write(`\n... and ${violations.length - 40} more`);
    process.stdout.write(violations.length === 0 ? "\n\n0 violations\n" : `\n\n${violations.length} violations; replay with: ${replay}\n`);
    if (soak.settings.json) {
      const injected = Object.fromEntries(Object.entries(soak.applied));
      process.stdout.write(`${JSON.stringify({ seed, replay, injected, acks: soak.acks.length, violations })}\n`);
    }
    exitCode = violations.length === 0 ? 0 : 1;
  } finally {
    for (const replica of soak.replicas) {
      replica.ending = true;
      replica.child.kill("SIGKILL");
    }
    await ledger.close().catch(() => undefined);
    await sql.end({ timeout: 1 }).catch(() => undefined);
    await Promise.all([...soak.proxies, soak.link].map((proxy) => proxy?.close()));
    if (!soak.settings.keep) {
      await soak.standby?.destroy();
      for (const old of soak.retired) await old.destroy();
      await soak.cluster?.destroy();
      if (exitCode === 0) rmSync(soak.dir, { recursive: true, force: true });
    }
  }
  if (exitCode !== 0) process.stdout.write(`logs kept in ${soak.dir}\n`);
  return exitCode;
}

process.exitCode = await main();

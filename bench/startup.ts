import { execFileSync, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import { sql } from "drizzle-orm";
import { openDatabase, resolveDatabaseSetting, query } from "../src/db/connection.js";
import { migrateDatabase } from "../src/db/migrate.js";
import { createCronledger, defineJob, silentLogger } from "../src/index.js";
import { inspectSchema } from "../src/db/schema-check.js";
import { dropDatabase, freshDatabase, median, printTable } from "./support.js";

const ROUNDS = 15;
const DIST = fileURLToPath(new URL("../dist/", import.meta.url));

/** Milliseconds for a fresh Node process to load the package one way (the build must exist: `npm run build`). */
function loadMs(kind: "import" | "require"): number {
  const code =
    kind === "import"
      ? `const t = performance.now(); await import(${JSON.stringify(pathToFileURL(`${DIST}index.js`).href)}); console.log(performance.now() - t);`
      : `const t = performance.now(); require(${JSON.stringify(`${DIST}cjs/index.cjs`)}); console.log(performance.now() - t);`;
  const args = kind === "import" ? ["--input-type=module", "-e", code] : ["-e", code];
  return Number(execFileSync(process.execPath, args, { encoding: "utf8" }).trim());
}

const STARTUP_WORKER = fileURLToPath(new URL("./startup-worker.ts", import.meta.url));

/**
 * `processes` fresh worker processes call work() together on a queue of
 * waiting jobs; resolves with each one's milliseconds from that call to its
 * first job's start: its connections, the schema check, LISTEN, its
 * registration and its first claim.
 */
async function firstJobMs(url: string, processes: number): Promise<number[]> {
  const children = Array.from({ length: processes }, () =>
    spawn(process.execPath, ["--import", "tsx", STARTUP_WORKER], { env: { ...process.env, BENCH_URL: url }, stdio: ["pipe", "pipe", "inherit"] }),
  );
  const lines = children.map((child) => {
    const seen: string[] = [];
    const waiting = new Map<string, (line: string) => void>();
    createInterface({ input: child.stdout }).on("line", (line) => {
      const kind = line.split(" ")[0] ?? "";
      const resolve = waiting.get(kind);
      if (resolve) resolve(line);
      else seen.push(line);
    });
    return (kind: string) => {
      const earlier = seen.find((line) => line.split(" ")[0] === kind);
      return earlier !== undefined ? Promise.resolve(earlier) : new Promise<string>((resolve) => waiting.set(kind, resolve));
    };
  });
  const exits = children.map((child) => new Promise((resolve) => child.on("exit", resolve)));
  await Promise.all(lines.map((next) => next("ready")));
  const firsts = lines.map((next) => next("first"));
  for (const child of children) child.stdin.write("go\n");
  const ms = (await Promise.all(firsts)).map((line) => Number(line.split(" ")[1]));
  for (const child of children) child.stdin.write("stop\n");
  await Promise.all(exits);
  return ms;
}

const range = (values: readonly number[], digits: number) =>
  `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}-${Math.max(...values).toFixed(digits)})`;

/**
 * What startup costs: the schema check every process runs once before its
 * first write (one catalog statement, on a migrated database), a worker's
 * time from work() to its first job (one process, then four starting
 * together on the 2 cores), and loading the package as ESM and as CommonJS
 * in a fresh process, in interleaved rounds.
 */
export async function runStartupBench(): Promise<void> {
  const name = "cronledger_bench_startup";
  const url = await freshDatabase(name);
  try {
    const setup = openDatabase(resolveDatabaseSetting({ url, poolSize: 2 }));
    await migrateDatabase(setup);
    await setup.close();
    const check: number[] = [];
    const roundTrip: number[] = [];
    const esm: number[] = [];
    const cjs: number[] = [];
    const firstJob: Record<1 | 4, number[]> = { 1: [], 4: [] };
    const job = defineJob({ name: "bench.startup", run: () => {} });
    const ledger = createCronledger({ database: { url, poolSize: 2 }, jobs: [job], logger: silentLogger, chores: false, metrics: false });
    for (let round = 0; round < ROUNDS; round += 1) {
      for (const processes of [1, 4] as const) {
        // 100 jobs a process, 20 ms each: every process finds work waiting when it first claims.
        await ledger.enqueueMany(Array.from({ length: 100 * processes }, () => ({ job })));
        firstJob[processes].push(...(await firstJobMs(url, processes)));
        await ledger.work({ once: true, concurrency: 50 });
      }
      // A new Database each round: a new process's first statement, connection included.
      const database = openDatabase(resolveDatabaseSetting({ url, poolSize: 2 }));
      await inspectSchema(database.db); // connects
      const started = performance.now();
      await inspectSchema(database.db);
      check.push(performance.now() - started);
      const baseline = performance.now();
      await query(database.db, sql`select 1`);
      roundTrip.push(performance.now() - baseline);
      await database.close();
      esm.push(loadMs("import"));
      cjs.push(loadMs("require"));
    }
    await ledger.close();
    printTable(`Startup, median (min-max) of ${ROUNDS} interleaved rounds`, [
      { what: "schema check (1 catalog statement), ms", value: range(check, 2) },
      { what: "for scale: select 1, ms", value: range(roundTrip, 2) },
      { what: "work() to its first job, one process, ms", value: range(firstJob[1], 1) },
      { what: "work() to its first job, four processes starting together, ms", value: range(firstJob[4], 1) },
      { what: "import cronledger (ESM, dist/index.js), ms", value: range(esm, 0) },
      { what: "require cronledger (CommonJS, dist/cjs/index.cjs), ms", value: range(cjs, 0) },
    ]);
  } finally {
    await dropDatabase(name);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await runStartupBench();

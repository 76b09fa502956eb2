import { execFileSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { sql } from "drizzle-orm";
import { openDatabase, query } from "../src/db/connection.js";
import { migrateDatabase } from "../src/db/migrate.js";
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

const range = (values: readonly number[], digits: number) =>
  `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}-${Math.max(...values).toFixed(digits)})`;

/**
 * What startup costs: the schema check every process runs once before its
 * first write (one catalog statement, on a migrated database), and loading
 * the package as ESM and as CommonJS in a fresh process, in interleaved rounds.
 */
export async function runStartupBench(): Promise<void> {
  const name = "cronledger_bench_startup";
  const url = await freshDatabase(name);
  try {
    const setup = openDatabase({ url, poolSize: 2 });
    await migrateDatabase(setup);
    await setup.close();
    const check: number[] = [];
    const roundTrip: number[] = [];
    const esm: number[] = [];
    const cjs: number[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      // A new Database each round: a new process's first statement, connection included.
      const database = openDatabase({ url, poolSize: 2 });
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
    printTable(`Startup, median (min-max) of ${ROUNDS} interleaved rounds`, [
      { what: "schema check (1 catalog statement), ms", value: range(check, 2) },
      { what: "for scale: select 1, ms", value: range(roundTrip, 2) },
      { what: "import cronledger (ESM, dist/index.js), ms", value: range(esm, 0) },
      { what: "require cronledger (CommonJS, dist/cjs/index.cjs), ms", value: range(cjs, 0) },
    ]);
  } finally {
    await dropDatabase(name);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await runStartupBench();

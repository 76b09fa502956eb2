// Enqueue inside the application's drizzle transaction against plain enqueue: 20,000 jobs in
// 2,000-job enqueueMany calls, each call in the transactional variant inside a transaction that
// also inserts one business row. Interleaved rounds, a fresh database per run.
import { pathToFileURL } from "node:url";
import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { createCronledger, defineJob, silentLogger } from "../src/index.js";
import { dropDatabase, envNumber, formatNumber, formatSpread, freshDatabase, markdownTable, printSection, rotate, spread } from "./support.js";

const JOBS = envNumber("BENCH_TX_JOBS", 20_000);
const CHUNK = 2_000;
const ROUNDS = envNumber("BENCH_TX_ROUNDS", 5);

type Variant = "plain" | "transaction";

const job = defineJob({ name: "bench.tx", run: () => {} });

/** Jobs per second for one variant in a fresh database. */
async function runOnce(variant: Variant, round: number): Promise<number> {
  const name = `cronledger_bench_tx_${variant}_${round}`;
  const url = await freshDatabase(name);
  const client = postgres(url, { max: 4, onnotice: () => {} });
  const app = drizzle(client);
  const ledger = createCronledger({ database: { url, poolSize: 4 }, jobs: [job], logger: silentLogger, metrics: false, chores: false });
  try {
    await ledger.migrate();
    await app.execute(sql`create table invoices (id bigserial primary key, note text not null)`);
    // The schema check and the first statements' planning, outside the timing.
    await ledger.enqueueMany([{ job }]);
    const started = performance.now();
    for (let done = 0; done < JOBS; done += CHUNK) {
      const requests = Array.from({ length: Math.min(CHUNK, JOBS - done) }, () => ({ job }));
      if (variant === "plain") {
        await ledger.enqueueMany(requests);
      } else {
        await app.transaction(async (tx) => {
          await tx.execute(sql`insert into invoices (note) values ('batch')`);
          await ledger.enqueueMany(requests, { db: tx });
        });
      }
    }
    return JOBS / ((performance.now() - started) / 1000);
  } finally {
    await ledger.close();
    await client.end({ timeout: 5 });
    await dropDatabase(name);
  }
}

export async function runEnqueueTxBench(): Promise<Map<Variant, number[]>> {
  const results = new Map<Variant, number[]>();
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const variant of rotate<Variant>(["plain", "transaction"], round)) {
      results.set(variant, [...(results.get(variant) ?? []), await runOnce(variant, round)]);
    }
  }
  const plain = spread(results.get("plain") ?? []);
  const tx = spread(results.get("transaction") ?? []);
  printSection(
    `Enqueue in the application's transaction: ${formatNumber(JOBS)} jobs in ${formatNumber(CHUNK)}-job enqueueMany calls (median (min–max) of ${ROUNDS} rounds)`,
    markdownTable(
      ["variant", "jobs/s", "vs plain"],
      [
        ["enqueueMany on cronledger's connection", formatSpread(plain), "1.00×"],
        ["enqueueMany({ db: tx }) + one business insert per call", formatSpread(tx), plain && tx ? `${(tx.median / plain.median).toFixed(2)}×` : "n/a"],
      ],
    ),
  );
  return results;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  await runEnqueueTxBench();
}

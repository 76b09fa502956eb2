// What an operator's look at N stored dynamic entries costs, beside bench/dynamic.ts: `ledger.status()` (the counts by
// state, always in it), the status with the first page of 50 and their run strips (`status({ dynamic: { limit: 50, runs:
// 20 } })`), and the Schedule page served by the admin handler (static entries, that page of dynamic entries with their
// strips, failures, running and retrying jobs). The first 50 keys fire every minute and have 20 runs each; the others
// are yearly. Sizes from BENCH_DYNAMIC_PAGE_SIZES or the command line (default 1,000 and 1,000,000), rounds from
// BENCH_DYNAMIC_PAGE_ROUNDS (default 5, interleaved).
import { pathToFileURL } from "node:url";
import postgres from "postgres";
import { createAdminHandler } from "../src/admin/handler.js";
import { createCronledger, defineJob, silentLogger } from "../src/index.js";
import { dropDatabase, envList, envNumber, formatNumber, formatSpread, freshDatabase, markdownTable, printSection, spread } from "./support.js";

const job = defineJob({ name: "bench.page", run: () => {} });
const START = Date.parse("2027-01-04T00:00:00.000Z");
const BATCH = 100_000;
const SHOWN = 50;
const RUNS = 20;
const TOKEN = "bench-dynamic-page-token-0123456789";

interface PageRound {
  readonly statusMs: number;
  readonly statusListMs: number;
  readonly statusPageMs: number;
  readonly pageMs: number;
  readonly pageKb: number;
}

async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  return [await work(), performance.now() - started];
}

export async function runDynamicPageBench(
  sizes: readonly number[] = envList("BENCH_DYNAMIC_PAGE_SIZES", ["1000", "1000000"]).map(Number),
  rounds = envNumber("BENCH_DYNAMIC_PAGE_ROUNDS", 5),
): Promise<void> {
  const results = new Map<number, { loadMs: number; rounds: PageRound[] }>();
  for (const size of sizes) {
    const name = `cronledger_bench_dynamic_page_${process.pid}_${size}`;
    const url = await freshDatabase(name);
    const ledger = createCronledger({ database: { url, poolSize: 4 }, jobs: [job], logger: silentLogger, metrics: false, chores: false, passTimeout: "5m" });
    const client = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await ledger.migrate();
      const entry = (index: number) => ({ key: `tenant:${String(index).padStart(8, "0")}:sync`, job, cron: index < SHOWN ? "* * * * *" : "0 3 1 1 *" });
      let loadMs = 0;
      for (let from = 0; from < size; from += BATCH) {
        const entries = Array.from({ length: Math.min(BATCH, size - from) }, (_, i) => entry(from + i));
        loadMs += (await timed(() => ledger.schedules.upsertMany(entries, { now: new Date(START) })))[1];
      }
      await client.unsafe("analyze cronledger.dynamic_schedules, cronledger.schedule_state");
      // The first page's entries get RUNS runs each: a pass at each minute, its jobs run before the next.
      for (let minute = 1; minute <= RUNS; minute += 1) {
        await ledger.tick({ now: new Date(START + minute * 60_000 + 500) });
        await ledger.work({ once: true });
      }
      await client.unsafe("analyze cronledger.job_history, cronledger.schedule_last_runs");
      const handler = createAdminHandler(ledger, { token: TOKEN });
      const measured: PageRound[] = [];
      for (let r = 0; r < rounds; r += 1) {
        const [, statusMs] = await timed(() => ledger.status());
        const [, statusListMs] = await timed(() => ledger.status({ dynamic: { limit: SHOWN } }));
        const [, statusPageMs] = await timed(() => ledger.status({ dynamic: { limit: SHOWN, runs: RUNS } }));
        const [html, pageMs] = await timed(async () => (await handler(new Request("http://localhost/admin/scheduler", { headers: { authorization: `Bearer ${TOKEN}` } }))).text());
        const strips = (html.match(/<tr data-key="[^"]+"[^]*?<span class="strip" role="img"/g) ?? []).length;
        if (strips < SHOWN) throw new Error(`the page drew ${strips} dynamic strips, expected ${SHOWN}`);
        measured.push({ statusMs, statusListMs, statusPageMs, pageMs, pageKb: html.length / 1024 });
      }
      results.set(size, { loadMs, rounds: measured });
      process.stderr.write(`dynamic page: ${formatNumber(size)} stored done\n`);
    } finally {
      await ledger.close();
      await client.end({ timeout: 1 });
      await dropDatabase(name);
    }
  }
  const column = (size: number, pick: (round: PageRound) => number, digits = 1) => formatSpread(spread((results.get(size)?.rounds ?? []).map(pick)), digits);
  printSection(
    `Operators' view of N stored dynamic entries: status, status with the first ${SHOWN} and their ${RUNS}-run strips, the Schedule page (median (min–max) of ${rounds} rounds)`,
    markdownTable(
      ["stored", "upsertMany (load, once)", "status()", `status, first ${SHOWN}`, `status, first ${SHOWN} with strips`, "Schedule page", "page size"],
      sizes.map((size) => [
        formatNumber(size),
        `${formatNumber(results.get(size)?.loadMs ?? Number.NaN)} ms`,
        `${column(size, (r) => r.statusMs)} ms`,
        `${column(size, (r) => r.statusListMs)} ms`,
        `${column(size, (r) => r.statusPageMs)} ms`,
        `${column(size, (r) => r.pageMs)} ms`,
        `${column(size, (r) => r.pageKb, 0)} KB`,
      ]),
    ),
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const sizes = process.argv.slice(2).map(Number).filter((size) => size > 0);
  await runDynamicPageBench(sizes.length > 0 ? sizes : undefined);
  process.exit(0);
}

// Where a drain's time goes: the database's cost per job of claiming and finishing it, statement
// by statement, on one connection with nothing running beside it. Three variants, interleaved
// rounds, a fresh database each:
//   raw      the raw-SQL limit's two statements on its five-column, one-index table (bench/systems.ts)
//   raw-cl   the same two statements on cronledger.jobs, with its columns and indexes
//   cl       cronledger's own claim and completion statements (src/db/sql/jobs.ts)
// Each claims `BATCH` rows and marks them finished until the table is drained, and reports the
// server time per job and the WAL each job writes. raw vs raw-cl is the cost of the table's shape;
// raw-cl vs cl the cost of cronledger's statements. `npx tsx bench/drain-cost.ts`.
import { pathToFileURL } from "node:url";
import postgres from "postgres";
import { claimJobs, completeJobs, insertJobs, type NewJobRow } from "../src/db/sql/jobs.js";
import { createCronledger, silentLogger } from "../src/index.js";
import { RAW_SCHEMA } from "./systems.js";
import { dropDatabase, envNumber, formatSpread, freshDatabase, markdownTable, printSection, rotate, spread } from "./support.js";

const JOBS = envNumber("BENCH_COST_JOBS", 20_000);
const BATCH = envNumber("BENCH_COST_BATCH", 500);
const ROUNDS = envNumber("BENCH_COST_ROUNDS", 3);

type Variant = "raw" | "raw-cl" | "cl";
const LABELS: Record<Variant, string> = {
  raw: "raw statements, raw table (5 columns, 1 index)",
  "raw-cl": "raw statements, cronledger.jobs (its columns and 8 indexes)",
  cl: "cronledger's claim and completion statements",
};

interface Cost {
  readonly claimUs: number;
  readonly finishUs: number;
  readonly walBytes: number;
}

async function runOnce(variant: Variant, round: number): Promise<Cost> {
  const name = `cronledger_bench_cost_${variant.replace("-", "_")}_${round}`;
  const url = await freshDatabase(name);
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  const ledger = createCronledger({ database: { url, poolSize: 2 }, logger: silentLogger, metrics: false, chores: false });
  try {
    await ledger.migrate();
    const rows: NewJobRow[] = Array.from({ length: JOBS }, () => ({
      jobName: "bench.noop",
      queue: "default",
      payloadJson: "{}",
      priority: 0,
      runAt: null,
      delayMs: 0,
      maxAttempts: 5,
      idempotencyKey: null,
      scheduleKey: null,
      scheduledFor: null,
      retryPolicyJson: null,
    }));
    if (variant === "raw") {
      await sql.unsafe(RAW_SCHEMA);
      await sql`insert into raw_jobs (payload) select '{}'::jsonb from generate_series(1, ${JOBS})`;
    } else {
      for (let at = 0; at < JOBS; at += 2_000) await insertJobs(ledger.database.db, rows.slice(at, at + 2_000));
    }
    await sql`vacuum analyze`;
    const table = variant === "raw" ? sql`raw_jobs` : sql`cronledger.jobs`;
    const done = variant === "raw" ? "done" : "succeeded";
    const claim = async (): Promise<number[]> => {
      if (variant === "cl") {
        const claimed = await claimJobs(ledger.database.db, { workerId: "bench", queues: ["default"], jobNames: ["bench.noop"], limit: BATCH });
        return claimed.map((job) => job.id);
      }
      const claimed = await sql<{ id: string }[]>`
        update ${table} set status = 'running'
        where id in (select id from ${table} where status = 'queued' and run_at <= now() order by run_at, id limit ${BATCH} for update skip locked)
        returning id`;
      return claimed.map((row) => Number(row.id));
    };
    const finish = async (ids: number[]) => {
      if (variant === "cl") {
        await completeJobs(
          ledger.database.db,
          "bench",
          ids.map((id) => ({ id, status: "succeeded", outcome: "success", error: null, delayMs: 0, returned: false })),
        );
        return;
      }
      await sql`update ${table} set status = ${done}, finished_at = now() where id = any(${sql.array(ids)}::bigint[])`;
    };
    const lsn = async () => (await sql<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`)[0]!.lsn;
    const walSince = async (from: string) => Number((await sql<{ n: string }[]>`select pg_wal_lsn_diff(pg_current_wal_lsn(), ${from}::pg_lsn)::text as n`)[0]!.n);
    const startLsn = await lsn();
    let claimMs = 0;
    let finishMs = 0;
    let jobs = 0;
    for (;;) {
      const claimStarted = performance.now();
      const ids = await claim();
      claimMs += performance.now() - claimStarted;
      if (ids.length === 0) break;
      const finishStarted = performance.now();
      await finish(ids);
      finishMs += performance.now() - finishStarted;
      jobs += ids.length;
    }
    const walBytes = await walSince(startLsn);
    return { claimUs: (claimMs * 1000) / jobs, finishUs: (finishMs * 1000) / jobs, walBytes: walBytes / jobs };
  } finally {
    await ledger.close();
    await sql.end({ timeout: 1 });
    await dropDatabase(name);
  }
}

export async function runDrainCostBench(): Promise<void> {
  const variants: Variant[] = ["raw", "raw-cl", "cl"];
  const results = new Map<Variant, Cost[]>();
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const variant of rotate(variants, round)) results.set(variant, [...(results.get(variant) ?? []), await runOnce(variant, round)]);
  }
  const rows = variants.map((variant) => {
    const costs = results.get(variant) ?? [];
    const total = spread(costs.map((cost) => cost.claimUs + cost.finishUs));
    return [
      LABELS[variant],
      formatSpread(spread(costs.map((cost) => cost.claimUs)), 1),
      formatSpread(spread(costs.map((cost) => cost.finishUs)), 1),
      formatSpread(total, 1),
      formatSpread(spread(costs.map((cost) => cost.walBytes))),
    ];
  });
  printSection(
    `Database cost per job of a drain: ${JOBS.toLocaleString("en-US")} jobs claimed ${BATCH} at a time and finished, one connection (median (min–max) of ${ROUNDS} rounds)`,
    markdownTable(["statements and table", "claim µs/job", "finish µs/job", "total µs/job", "WAL bytes/job"], rows),
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await runDrainCostBench();

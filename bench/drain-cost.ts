// Where a drain's time goes: the database's cost per job of enqueueing, claiming and finishing
// it, statement by statement, on one connection with nothing running beside it. Variants run in
// interleaved rounds, a fresh database each:
//   raw      the raw-SQL limit's two statements on its five-column, one-index table (bench/systems.ts)
//   cl       cronledger's own insert, claim and completion statements (src/db/sql/jobs.ts)
//   and the candidate storage designs of bench/storage-candidates.ts (wide, delete, queue-history, ...)
// Each inserts `JOBS` jobs, claims `BATCH` rows and marks them finished until the table is drained,
// and reports the server time per job and the WAL each job writes. `BENCH_COST_VARIANTS=raw,cl`
// picks variants; `BENCH_COST_BATCH=10` shows the cost of small completions (I/O-shaped jobs).
// `npx tsx bench/drain-cost.ts`.
import { pathToFileURL } from "node:url";
import postgres, { type Sql } from "postgres";
import { completeJobs } from "../src/db/sql/completions.js";
import { claimJobs, insertJobs, type NewJobRow } from "../src/db/sql/jobs.js";
import { createCronledger, silentLogger, type Cronledger } from "../src/index.js";
import { CANDIDATES, type Candidate } from "./storage-candidates.js";
import { RAW_SCHEMA } from "./systems.js";
import { dropDatabase, envList, envNumber, formatSpread, freshDatabase, markdownTable, printSection, rotate, spread } from "./support.js";

const JOBS = envNumber("BENCH_COST_JOBS", 20_000);
const BATCH = envNumber("BENCH_COST_BATCH", 500);
const ROUNDS = envNumber("BENCH_COST_ROUNDS", 3);
/** Inserts go in calls of this many, as `enqueueMany` calls would. */
const INSERT_CALL = 2_000;

/** A variant as the runner drives it: set up, then insert, claim and finish through one connection. */
interface Subject {
  readonly label: string;
  open(url: string, sql: Sql): Promise<{ insert(count: number): Promise<void>; claim(limit: number): Promise<number[]>; finish(ids: number[]): Promise<void>; close(): Promise<void> }>;
}

const raw: Subject = {
  label: "raw statements, raw table (5 columns, 1 index)",
  async open(_url, sql) {
    await sql.unsafe(RAW_SCHEMA);
    return {
      insert: async (count) => void (await sql`insert into raw_jobs (payload) select '{}'::jsonb from generate_series(1, ${count})`),
      claim: async (limit) =>
        (
          await sql<{ id: string }[]>`
            update raw_jobs set status = 'running'
            where id in (select id from raw_jobs where status = 'queued' and run_at <= now() order by run_at, id limit ${limit} for update skip locked)
            returning id`
        ).map((row) => Number(row.id)),
      finish: async (ids) => void (await sql`update raw_jobs set status = 'done', finished_at = now() where id = any(${sql.array(ids)}::bigint[])`),
      close: async () => {},
    };
  },
};

const noopRow: NewJobRow = {
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
};

const cronledger: Subject = {
  label: "cronledger's statements (src/db/sql/jobs.ts)",
  async open(url) {
    const ledger: Cronledger = createCronledger({ database: { url, poolSize: 2 }, logger: silentLogger, metrics: false, chores: false });
    await ledger.migrate();
    const db = ledger.database.db;
    return {
      insert: async (count) => void (await insertJobs(db, Array.from({ length: count }, () => noopRow))),
      claim: async (limit) => (await claimJobs(db, { workerId: "bench", queues: ["default"], jobNames: ["bench.noop"], limit })).map((job) => job.id),
      // Every claimed job is on its first attempt here.
      finish: async (ids) =>
        void (await completeJobs(
          db,
          "bench",
          ids.map((id) => ({ id, attempt: 1, status: "succeeded", outcome: null, error: null, delayMs: 0, returned: false })),
        )),
      close: () => ledger.close(),
    };
  },
};

function candidate(design: Candidate): Subject {
  return {
    label: design.label,
    async open(_url, sql) {
      await sql`create schema candidate`;
      await design.install(sql);
      return {
        insert: (count) => design.insert(sql, count),
        claim: (limit) => design.claim(sql, limit),
        finish: (ids) => design.finish(sql, ids),
        close: async () => {},
      };
    },
  };
}

const SUBJECTS: ReadonlyMap<string, Subject> = new Map([
  ["raw", raw],
  ["cl", cronledger],
  ...CANDIDATES.map((design) => [design.key, candidate(design)] as const),
]);

interface Cost {
  readonly insertUs: number;
  readonly insertWal: number;
  readonly claimUs: number;
  readonly finishUs: number;
  readonly walBytes: number;
}

async function runOnce(key: string, subject: Subject, round: number): Promise<Cost> {
  const name = `cronledger_bench_cost_${key.replace(/-/g, "_")}_${round}`;
  const url = await freshDatabase(name);
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  const lsn = async () => (await sql<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`)[0]!.lsn;
  const walSince = async (from: string) => Number((await sql<{ n: string }[]>`select pg_wal_lsn_diff(pg_current_wal_lsn(), ${from}::pg_lsn)::text as n`)[0]!.n);
  const opened = await subject.open(url, sql);
  try {
    const insertLsn = await lsn();
    const insertStarted = performance.now();
    for (let at = 0; at < JOBS; at += INSERT_CALL) await opened.insert(Math.min(INSERT_CALL, JOBS - at));
    const insertMs = performance.now() - insertStarted;
    const insertWal = await walSince(insertLsn);
    await sql`vacuum analyze`;
    const startLsn = await lsn();
    let claimMs = 0;
    let finishMs = 0;
    let jobs = 0;
    for (;;) {
      const claimStarted = performance.now();
      const ids = await opened.claim(BATCH);
      claimMs += performance.now() - claimStarted;
      if (ids.length === 0) break;
      const finishStarted = performance.now();
      await opened.finish(ids);
      finishMs += performance.now() - finishStarted;
      jobs += ids.length;
    }
    if (jobs !== JOBS) throw new Error(`bench: ${key} drained ${jobs} of ${JOBS} jobs`);
    const walBytes = await walSince(startLsn);
    return { insertUs: (insertMs * 1000) / JOBS, insertWal: insertWal / JOBS, claimUs: (claimMs * 1000) / jobs, finishUs: (finishMs * 1000) / jobs, walBytes: walBytes / jobs };
  } finally {
    await opened.close();
    await sql.end({ timeout: 1 });
    await dropDatabase(name);
  }
}

export async function runDrainCostBench(): Promise<void> {
  const keys = envList("BENCH_COST_VARIANTS", ["raw", "cl"]);
  for (const key of keys) if (!SUBJECTS.has(key)) throw new Error(`BENCH_COST_VARIANTS: unknown variant ${key} (known: ${[...SUBJECTS.keys()].join(", ")})`);
  const results = new Map<string, Cost[]>();
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const key of rotate(keys, round)) results.set(key, [...(results.get(key) ?? []), await runOnce(key, SUBJECTS.get(key)!, round)]);
  }
  const rows = keys.map((key) => {
    const costs = results.get(key) ?? [];
    const figure = (pick: (cost: Cost) => number, digits = 1) => formatSpread(spread(costs.map(pick)), digits);
    return [
      SUBJECTS.get(key)!.label,
      figure((cost) => cost.insertUs),
      figure((cost) => cost.insertWal, 0),
      figure((cost) => cost.claimUs),
      figure((cost) => cost.finishUs),
      figure((cost) => cost.claimUs + cost.finishUs),
      figure((cost) => cost.walBytes, 0),
    ];
  });
  printSection(
    `Database cost per job: ${JOBS.toLocaleString("en-US")} jobs inserted ${INSERT_CALL.toLocaleString("en-US")} per statement, claimed ${BATCH} at a time and finished, one connection (median (min–max) of ${ROUNDS} rounds)`,
    markdownTable(["statements and tables", "insert µs/job", "insert WAL B/job", "claim µs/job", "finish µs/job", "claim + finish µs/job", "claim + finish WAL B/job"], rows),
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await runDrainCostBench();

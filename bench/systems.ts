// The queues the throughput bench compares, each behind the same small interface:
// install its tables, enqueue from a producer, consume with a handler in a worker process.
import { Logger as GraphileLogger, makeWorkerUtils, run as runGraphile, type Runner } from "graphile-worker";
import PgBoss from "pg-boss";
import postgres from "postgres";
import { z } from "zod";
import { createCronledger, defineJob, silentLogger, type Cronledger, type DatabaseSetting } from "../src/index.js";

/** What a bench job carries: the producer's clock at enqueue, for enqueue-to-start latency. */
export interface BenchPayload {
  readonly sentAt?: number;
}

/** The handler a worker process runs for every job, whatever the system. */
export type BenchHandler = (payload: BenchPayload) => Promise<void> | void;

export interface Producer {
  /** Inserts `count` no-op jobs in one call of the system's bulk API. */
  enqueueBulk(count: number): Promise<void>;
  /** Inserts timed jobs (one per entry of `sentAt`) in one call. */
  enqueueTimed(sentAt: readonly number[]): Promise<void>;
  /** Jobs not finished yet; read at the end of a drain only (it scans). */
  remaining(): Promise<number>;
  close(): Promise<void>;
}

export interface Consumer {
  stop(): Promise<void>;
}

export interface ConsumerOptions {
  readonly concurrency: number;
  readonly handler: BenchHandler;
}

/** Where a system reaches the database: the server directly, or through PgBouncer with LISTEN on the server. */
export interface Endpoint {
  readonly url: string;
  readonly pgbouncerUrl?: string;
}

export interface QueueSystem {
  readonly key: SystemKey;
  readonly label: string;
  /** Enqueue-to-start is measured only where there is a wake-up path (not for the raw loop, which polls). */
  readonly measuresLatency: boolean;
  install(endpoint: Endpoint): Promise<void>;
  producer(endpoint: Endpoint): Promise<Producer>;
  /** Starts consuming at once; the worker process calls it on "go". */
  consumer(endpoint: Endpoint, options: ConsumerOptions): Promise<Consumer>;
}

export const SYSTEM_KEYS = ["cronledger", "cronledger-pgbouncer", "graphile", "pgboss", "raw"] as const;
export type SystemKey = (typeof SYSTEM_KEYS)[number];

const nowMs = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---- cronledger, through its public API --------------------------------------------------------

function cronledgerJobs(handler: BenchHandler = () => {}) {
  const noop = defineJob({ name: "bench.noop", run: () => handler({}) });
  const timed = defineJob({ name: "bench.timed", payload: z.object({ sentAt: z.number() }), run: (payload) => handler(payload) });
  return { noop, timed, all: [noop, timed] };
}

function cronledgerSystem(key: "cronledger" | "cronledger-pgbouncer"): QueueSystem {
  const viaBouncer = key === "cronledger-pgbouncer";
  const database = (endpoint: Endpoint, poolSize?: number): DatabaseSetting => {
    if (!viaBouncer) return { url: endpoint.url, ...(poolSize ? { poolSize } : {}) };
    if (endpoint.pgbouncerUrl === undefined) throw new Error("bench: the PgBouncer system needs a PgBouncer URL");
    return { url: endpoint.pgbouncerUrl, pooler: "pgbouncer", listenUrl: endpoint.url, ...(poolSize ? { poolSize } : {}) };
  };
  // Default settings, except no chores: they would add their own rows to the counts.
  const open = (setting: DatabaseSetting, handler?: BenchHandler): Cronledger =>
    createCronledger({ database: setting, jobs: cronledgerJobs(handler).all, logger: silentLogger, chores: false });
  return {
    key,
    label: viaBouncer ? "cronledger via PgBouncer" : "cronledger",
    measuresLatency: true,
    async install(endpoint) {
      const ledger = open({ url: endpoint.url, poolSize: 2 });
      await ledger.migrate();
      await ledger.close();
    },
    async producer(endpoint) {
      const ledger = open(database(endpoint, 4));
      const { noop, timed } = cronledgerJobs();
      // The drain's end is watched by one count on a connection of its own, as for the peers (not by
      // ledger.status(), which builds the whole status model and would load the server every 5 ms).
      const probe = postgres(endpoint.url, { max: 1, onnotice: () => {} });
      return {
        async enqueueBulk(count) {
          await ledger.enqueueMany(Array.from({ length: count }, () => ({ job: noop })));
        },
        async enqueueTimed(sentAt) {
          await ledger.enqueueMany(sentAt.map((at) => ({ job: timed, payload: { sentAt: at } })));
        },
        async remaining() {
          const [row] = await probe<{ n: number }[]>`select count(*)::int as n from cronledger.job_queue`;
          return row?.n ?? 0;
        },
        async close() {
          await ledger.close();
          await probe.end({ timeout: 1 });
        },
      };
    },
    async consumer(endpoint, options) {
      const ledger = open(database(endpoint), options.handler);
      const working = ledger.work({ concurrency: options.concurrency });
      return {
        async stop() {
          await ledger.stop();
          await working;
          await ledger.close();
        },
      };
    },
  };
}

// ---- graphile-worker 0.17.3, local queue -------------------------------------------------------

const quietGraphileLogger = new GraphileLogger(() => () => {});
// Its recommended fast settings: local queue on, completions batched with no added delay.
const graphilePreset = { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } };

const graphileSystem: QueueSystem = {
  key: "graphile",
  label: "graphile-worker 0.17.3",
  measuresLatency: true,
  async install(endpoint) {
    const utils = await makeWorkerUtils({ connectionString: endpoint.url, logger: quietGraphileLogger });
    await utils.migrate();
    await utils.release();
  },
  async producer(endpoint) {
    const utils = await makeWorkerUtils({ connectionString: endpoint.url, logger: quietGraphileLogger });
    const probe = postgres(endpoint.url, { max: 1, onnotice: () => {} });
    return {
      async enqueueBulk(count) {
        await utils.addJobs(Array.from({ length: count }, () => ({ identifier: "noop", payload: {} })));
      },
      async enqueueTimed(sentAt) {
        if (sentAt.length === 1) await utils.addJob("timed", { sentAt: sentAt[0] });
        else await utils.addJobs(sentAt.map((at) => ({ identifier: "timed", payload: { sentAt: at } })));
      },
      async remaining() {
        const [row] = await probe<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs`;
        return row?.n ?? 0;
      },
      async close() {
        await utils.release();
        await probe.end({ timeout: 1 });
      },
    };
  },
  async consumer(endpoint, options) {
    const runner: Runner = await runGraphile({
      connectionString: endpoint.url,
      concurrency: options.concurrency,
      noHandleSignals: true,
      pollInterval: 1_000,
      logger: quietGraphileLogger,
      preset: graphilePreset,
      taskList: {
        noop: async () => {
          await options.handler({});
        },
        timed: async (payload) => {
          await options.handler(payload as BenchPayload);
        },
      },
    });
    return { stop: () => runner.stop() };
  },
};

// ---- pg-boss 10.4.2, its fast settings ---------------------------------------------------------

const PGBOSS_QUEUES = ["noop", "timed"] as const;

/**
 * Its fast settings: several workers each fetching a batch per poll at the
 * shortest polling interval (0.5 s). A worker's batch is one handler call,
 * so the jobs of a batch run side by side; concurrency = workers x batch.
 */
function pgBossShape(concurrency: number): { workers: number; batchSize: number } {
  // No-op drains: 10 workers of 100, as its docs suggest for throughput; else batches of 10.
  if (concurrency === 10) return { workers: 10, batchSize: 100 };
  return { workers: Math.max(1, Math.round(concurrency / 10)), batchSize: 10 };
}

const pgBossSystem: QueueSystem = {
  key: "pgboss",
  label: "pg-boss 10.4.2",
  measuresLatency: true,
  async install(endpoint) {
    const boss = new PgBoss({ connectionString: endpoint.url, max: 2 });
    boss.on("error", () => {});
    await boss.start();
    for (const queue of PGBOSS_QUEUES) await boss.createQueue(queue);
    await boss.stop({ graceful: false, wait: true });
  },
  async producer(endpoint) {
    const boss = new PgBoss({ connectionString: endpoint.url, max: 4, supervise: false, schedule: false, migrate: false });
    boss.on("error", () => {});
    await boss.start();
    const probe = postgres(endpoint.url, { max: 1, onnotice: () => {} });
    return {
      async enqueueBulk(count) {
        await boss.insert(Array.from({ length: count }, () => ({ name: "noop", data: {} })));
      },
      async enqueueTimed(sentAt) {
        if (sentAt.length === 1) await boss.send("timed", { sentAt: sentAt[0] });
        else await boss.insert(sentAt.map((at) => ({ name: "timed", data: { sentAt: at } })));
      },
      async remaining() {
        const [row] = await probe<{ n: number }[]>`select count(*)::int as n from pgboss.job where state in ('created', 'retry', 'active')`;
        return row?.n ?? 0;
      },
      async close() {
        await boss.stop({ graceful: false, wait: true }).catch(() => undefined);
        await probe.end({ timeout: 1 });
      },
    };
  },
  async consumer(endpoint, options) {
    const shape = pgBossShape(options.concurrency);
    const boss = new PgBoss({ connectionString: endpoint.url, max: 10, migrate: false });
    boss.on("error", () => {});
    await boss.start();
    for (const queue of PGBOSS_QUEUES) {
      for (let i = 0; i < shape.workers; i += 1) {
        await boss.work<BenchPayload>(queue, { batchSize: shape.batchSize, pollingIntervalSeconds: 0.5 }, async (jobs) => {
          await Promise.all(jobs.map((job) => options.handler(job.data)));
        });
      }
    }
    return { stop: () => boss.stop({ graceful: true, wait: true }) };
  },
};

// ---- the raw-SQL limit: postgres.js and the least SQL a queue needs per job --------------------

/**
 * Rows one claim takes: cronledger's own largest claim. Tried 50, 100, 200, 500
 * and 1,000 at concurrency 10 (3 rounds each, busy machine): drain rose with the
 * batch up to 500 (about 2.5x the rate of 100 and 4x that of 50); 1,000 was no faster.
 */
const RAW_BATCH = Number(process.env.BENCH_RAW_BATCH ?? "500");
const RAW_POLL_MS = 50;

/**
 * A table with what a queue cannot do without (a status to claim by, a
 * ready time, a payload) and the one partial index that serves the claim.
 */
export const RAW_SCHEMA = `
  create table raw_jobs (
    id bigint generated always as identity primary key,
    payload jsonb not null default '{}',
    status text not null default 'queued',
    run_at timestamptz not null default now(),
    finished_at timestamptz
  );
  create index raw_jobs_ready_idx on raw_jobs (run_at, id) where status = 'queued'`;

const rawSystem: QueueSystem = {
  key: "raw",
  label: "raw SQL limit",
  measuresLatency: false,
  async install(endpoint) {
    const sql = postgres(endpoint.url, { max: 1, onnotice: () => {} });
    await sql.unsafe(RAW_SCHEMA);
    await sql.end({ timeout: 1 });
  },
  async producer(endpoint) {
    const sql = postgres(endpoint.url, { max: 2, onnotice: () => {} });
    const insert = (payloads: readonly BenchPayload[]) =>
      sql`insert into raw_jobs (payload) select value from jsonb_array_elements(${JSON.stringify(payloads)}::text::jsonb)`;
    return {
      async enqueueBulk(count) {
        await insert(Array.from({ length: count }, () => ({})));
      },
      async enqueueTimed(sentAt) {
        await insert(sentAt.map((at) => ({ sentAt: at })));
      },
      async remaining() {
        const [row] = await sql<{ n: number }[]>`select count(*)::int as n from raw_jobs where status <> 'done'`;
        return row?.n ?? 0;
      },
      close: () => sql.end({ timeout: 1 }),
    };
  },
  /**
   * `concurrency` loops on a pool of that many connections (10, like
   * cronledger's default pool): each claims up to RAW_BATCH ready rows with
   * FOR UPDATE SKIP LOCKED, runs their handlers, and marks the batch done
   * in one UPDATE. No LISTEN: an empty claim sleeps RAW_POLL_MS.
   */
  async consumer(endpoint, options) {
    const sql = postgres(endpoint.url, { max: options.concurrency, onnotice: () => {} });
    let stopping = false;
    const loop = async () => {
      while (!stopping) {
        const rows = await sql<{ id: string; payload: BenchPayload }[]>`
          update raw_jobs set status = 'running'
          where id in (
            select id from raw_jobs where status = 'queued' and run_at <= now()
            order by run_at, id limit ${RAW_BATCH} for update skip locked
          )
          returning id, payload`;
        if (rows.length === 0) {
          await sleep(RAW_POLL_MS);
          continue;
        }
        for (const row of rows) await options.handler(row.payload);
        await sql`update raw_jobs set status = 'done', finished_at = now() where id = any(${sql.array(rows.map((row) => row.id))}::bigint[])`;
      }
    };
    const loops = Array.from({ length: options.concurrency }, loop);
    return {
      async stop() {
        stopping = true;
        await Promise.all(loops);
        await sql.end({ timeout: 1 });
      },
    };
  },
};

export const SYSTEMS: Readonly<Record<SystemKey, QueueSystem>> = {
  cronledger: cronledgerSystem("cronledger"),
  "cronledger-pgbouncer": cronledgerSystem("cronledger-pgbouncer"),
  graphile: graphileSystem,
  pgboss: pgBossSystem,
  raw: rawSystem,
};

export { nowMs, sleep };

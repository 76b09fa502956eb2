import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createCronledger } from "../src/cronledger.js";
import { guardedSockets } from "../src/db/guarded-socket.js";
import { resolveTargets } from "../src/db/hosts.js";
import { silentLogger } from "../src/log.js";
import { watch, type Watched } from "./support/child.js";
import { useTestDatabase } from "./support/database.js";
import { withPort } from "./support/postgres-url.js";
import { startStormProxy, type StormProxy } from "./support/storm-proxy.js";
import { until } from "./support/worker-processes.js";

/**
 * A storm of injected 57014 and 57P01 on a replica's live connections
 * (issue 32): postgres.js 3.4.9 wrote to a connection it had already seen
 * close and died with `TypeError: Cannot read properties of null (reading
 * 'write')` in `nextWrite`, or stalled. docs/decisions.md, "A storm of errors
 * on live connections". Two loads: small payloads with failed enqueues retried after 5 ms, and payloads of 1,500
 * bytes (postgres.js writes a chunk of 1 KiB or more at once, from inside the call that made it) retried at once,
 * which crashed or stalled the replica in 5 runs of 5 until cronledger's socket stopped reporting a connection's end
 * from inside such a write.
 */
const FIXTURE = fileURLToPath(new URL("./fixtures/storm-replica.ts", import.meta.url));
const EACH = 100;
const LEASE_MS = 6_000;
/** Heartbeats go every lease/3 (src/jobs/heartbeats.ts). */
const BEAT_MS = LEASE_MS / 3;
/** What a beat's statement may take after its timer fired, on a machine shared with other test files. */
const STATEMENT_SLACK_MS = 750;

const acked = (output: string) => [...output.matchAll(/^acked (\d+)$/gm)].map((match) => Number(match[1]));

describe("a replica under load whose live connections get a storm of 57014 and 57P01", () => {
  const database = useTestDatabase("connection-storm");
  let proxy: StormProxy | undefined;
  let direct: postgres.Sql;
  let replica: Watched | undefined;

  beforeAll(async () => {
    const migrator = createCronledger({ database: { url: database.url, poolSize: 2 }, logger: silentLogger, metrics: false });
    await migrator.migrate();
    await migrator.close();
    direct = postgres(database.url, { max: 1, onnotice: () => {} });
  });

  afterEach(async () => {
    replica?.child.kill("SIGKILL");
    await replica?.exited;
    await proxy?.close();
    [replica, proxy] = [undefined, undefined];
  });

  afterAll(async () => {
    await direct?.end({ timeout: 1 });
  });

  it.each([
    { load: "payloads of a few bytes, a failed enqueue retried after 5 ms", pad: 0, retryAtOnce: false },
    { load: "payloads of 1,500 bytes, a failed enqueue retried at once", pad: 1_500, retryAtOnce: true },
  ])(`lives through ${EACH} of each ($load): every acknowledged enqueue is done, and heartbeats resume within one interval`, async ({ load, pad, retryAtOnce }) => {
    const stormProxy = await startStormProxy(database.url);
    proxy = stormProxy;
    replica = watch(process.execPath, ["--import", "tsx", FIXTURE], {
      env: {
        ...process.env,
        DATABASE_URL: withPort(database.url, stormProxy.port),
        LEASE_MS: String(LEASE_MS),
        PAD: String(pad),
        RETRY_AT_ONCE: retryAtOnce ? "1" : "0",
      },
    });
    const watched = replica;
    const report = (error: unknown): never => {
      if (process.env.STORM_LOG) writeFileSync(process.env.STORM_LOG, `${watched.output()}\n--- proxy\n${stormProxy.describe().join("\n")}\n`);
      const points = stormProxy.injections.map((injection) => `${injection.fault} #${injection.connection} ${injection.point}`);
      process.stderr.write(`injections (${points.length}): ${points.slice(-20).join("; ")}\nreplica output (last 6,000 characters):\n${watched.output().slice(-6_000)}\n`);
      throw error;
    };
    const exited = watched.exited.then((finished) => {
      throw new Error(`the replica ended (code ${finished.code}, signal ${finished.signal}) after ${stormProxy.injections.length} injected errors`);
    });
    // Raced below; ending it at the end of the test is no failure.
    exited.catch(() => undefined);
    await watched.waitFor(/^ready$/m, 60_000);
    await Promise.race([until("the load runs", () => acked(watched.output()).length >= 50, 30_000), exited]).catch(report);

    await Promise.race([stormProxy.storm({ cancels: EACH, terminations: EACH, everyMs: 25 }), exited]).catch(report);
    const stormEnded = Date.now();
    const cancels = stormProxy.injections.filter((injection) => injection.fault === "cancel");
    const terminations = stormProxy.injections.filter((injection) => injection.fault === "terminate");
    expect(cancels).toHaveLength(EACH);
    expect(terminations).toHaveLength(EACH);
    // At random points: mid-answer, waiting for it, idle (and during a startup, when one was under way).
    const points = new Set(stormProxy.injections.map((injection) => injection.point.replace(/[ ,].*/, "")));
    for (const point of ["before", "waiting", "idle"]) expect(points).toContain(point);

    // The next beat after the storm is written within one interval of its end.
    const beatAfterStorm = async () => {
      const [row] = await direct<{ at: number | null }[]>`select extract(epoch from max(heartbeat_at)) * 1000 as at from cronledger.workers`;
      return row?.at !== null && row?.at !== undefined && Number(row.at) > stormEnded ? Number(row.at) : undefined;
    };
    let beat: number | undefined;
    await Promise.race([until("a heartbeat after the storm", async () => (beat = await beatAfterStorm()) !== undefined, 30_000), exited]).catch(report);
    expect(beat! - stormEnded).toBeLessThanOrEqual(BEAT_MS + STATEMENT_SLACK_MS);

    // Every enqueue the database acknowledged runs to the end.
    watched.child.kill("SIGUSR2");
    await Promise.race([watched.waitFor(/^stopped$/m, 30_000), exited]).catch(report);
    const ids = acked(watched.output());
    expect(ids.length).toBeGreaterThan(100);
    let open: number[] = ids;
    await Promise.race([
      until(
        "every acknowledged enqueue is done",
        async () => {
          const done = await direct<{ id: number }[]>`select id::float8 as id from cronledger.jobs where id = any(${open}) and status = 'succeeded'`;
          const finished = new Set(done.map((row) => row.id));
          open = open.filter((id) => !finished.has(id));
          return open.length === 0;
        },
        60_000,
      ),
      exited,
    ]).catch(async (error: unknown) => {
      const rows = await direct`select id::float8 as id, status, attempts, locked_by, heartbeat_at, run_at, last_error from cronledger.jobs where id = any(${open.slice(0, 20)})`;
      const activity = await direct`select pid, state, wait_event, left(query, 60) as query, backend_xid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`;
      process.stderr.write(`${open.length} acknowledged jobs not done, the first: ${JSON.stringify(rows)}\nserver sessions: ${JSON.stringify(activity)}\nproxy sessions:\n${stormProxy.describe().join("\n")}\n`);
      report(error);
    });
    expect(watched.child.exitCode).toBeNull();
    expect(watched.output()).not.toMatch(/TypeError|uncaught|unhandled/i);
    process.stderr.write(
      `storm (${load}): ${cancels.length} cancels, ${terminations.length} terminations over ${stormProxy.injections.length > 0 ? stormEnded - stormProxy.injections[0]!.at : 0} ms; ` +
        `${ids.length} acknowledged enqueues all done; first beat ${beat! - stormEnded} ms after the storm\n`,
    );
  }, 240_000);
});

/** How long a statement and its retries may take to settle (they take milliseconds) before the test calls it a hang. */
const SETTLE_MS = 10_000;

function settled<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} neither succeeded nor failed within ${SETTLE_MS} ms`)), SETTLE_MS);
  });
  return Promise.race([promise, hung]).finally(() => clearTimeout(timer));
}

/**
 * The storm's failure, step by step: a statement of 1 KiB or more, retried at
 * once from the failure's handler, lands on the pool's connection whose
 * backend was just terminated. postgres.js writes such a chunk at once, from
 * inside `execute()`; cronledger's socket reported the end from inside that
 * write, postgres.js's pool then filed the closed connection as busy, and the
 * next statement on it waited forever or, if under 1 KiB, threw at
 * `Immediate.nextWrite` and ended the process.
 */
describe("a statement of 1 KiB or more retried at once on the connection a termination just ended", () => {
  const database = useTestDatabase("connection-storm-retry");
  const pad = "x".repeat(1_500);
  let admin: postgres.Sql;
  const pools: postgres.Sql[] = [];

  beforeAll(() => {
    admin = postgres(database.url, { max: 1, onnotice: () => {} });
  });

  afterAll(async () => {
    await Promise.all(pools.map((pool) => pool.end({ timeout: 1 })));
    await admin.end({ timeout: 1 });
  });

  it.each([
    { statement: "named, a 1,500-byte parameter", prepare: true, smallRetries: false },
    { statement: "unnamed, 1,500 bytes of text (prepare off, as behind PgBouncer)", prepare: false, smallRetries: false },
    { statement: "named, retried once as is, then as a small one", prepare: true, smallRetries: true },
  ])("a statement $statement: the retries settle and the connection works on", async ({ prepare, smallRetries }) => {
    // One connection, through cronledger's socket, as src/db/connection.ts opens its pools.
    const socket = { socket: guardedSockets(resolveTargets(database.url)) };
    const pool = postgres(database.url, { max: 1, prepare, fetch_types: false, onnotice: () => {}, ...socket });
    pools.push(pool);
    const large = async (seconds: number) =>
      prepare
        ? await pool<{ n: number }[]>`select length(${pad}::text) as n, pg_sleep(${seconds}::float8) as slept`
        : await pool.unsafe<{ n: number }[]>(`select length('${pad}') as n, pg_sleep(${seconds}) as slept`);
    const small = async () => await pool<{ n: number }[]>`select ${1_500}::int as n`;
    // Named now: the next run is a Bind and an Execute, written at once.
    expect((await large(0))[0]?.n).toBe(1_500);

    const failures: string[] = [];
    const withRetries = async (): Promise<number | undefined> => {
      for (let attempt = 0; attempt < 5; attempt += 1) {
        try {
          const rows = attempt === 0 ? await large(30) : smallRetries && attempt > 1 ? await small() : await large(0);
          return rows[0]?.n;
        } catch (error) {
          failures.push((error as { code?: string }).code ?? String(error));
        }
      }
      return undefined;
    };
    const running = settled("the statement and its retries", withRetries());
    await until("the statement sleeps on the server", async () => {
      const [row] = await admin<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where query like 'select length(%' and wait_event = 'PgSleep'`;
      return row?.n === 1;
    });
    await admin`select pg_terminate_backend(pid) from pg_stat_activity where query like 'select length(%' and wait_event = 'PgSleep'`;
    expect(await running).toBe(1_500);
    expect(failures[0]).toBe("57P01");
    for (let i = 0; i < 3; i += 1) expect((await settled("a later statement", large(0)))[0]?.n).toBe(1_500);
  });
});

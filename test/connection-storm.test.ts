import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger } from "../src/cronledger.js";
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
 * on live connections". Not covered yet: with PAD=1500 and RETRY_AT_ONCE=1 in the fixture (payloads over 1 KiB,
 * which postgres.js writes at once, and failed enqueues retried at once) two runs of two stalled after the storm
 * (claims unanswered for minutes, the proxy's connections idle): recorded there, unsolved.
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
  let proxy: StormProxy;
  let direct: postgres.Sql;
  let replica: Watched | undefined;

  beforeAll(async () => {
    const migrator = createCronledger({ database: { url: database.url, poolSize: 2 }, logger: silentLogger, metrics: false });
    await migrator.migrate();
    await migrator.close();
    direct = postgres(database.url, { max: 1, onnotice: () => {} });
    proxy = await startStormProxy(database.url);
  });

  afterAll(async () => {
    replica?.child.kill("SIGKILL");
    await proxy?.close();
    await direct?.end({ timeout: 1 });
  });

  it(`lives through ${EACH} of each: every acknowledged enqueue is done, and heartbeats resume within one interval`, async () => {
    replica = watch(process.execPath, ["--import", "tsx", FIXTURE], {
      env: { ...process.env, DATABASE_URL: withPort(database.url, proxy.port), LEASE_MS: String(LEASE_MS) },
    });
    const watched = replica;
    const report = (error: unknown): never => {
      if (process.env.STORM_LOG) writeFileSync(process.env.STORM_LOG, `${watched.output()}\n--- proxy\n${proxy.describe().join("\n")}\n`);
      const points = proxy.injections.map((injection) => `${injection.fault} #${injection.connection} ${injection.point}`);
      process.stderr.write(`injections (${points.length}): ${points.slice(-20).join("; ")}\nreplica output (last 6,000 characters):\n${watched.output().slice(-6_000)}\n`);
      throw error;
    };
    const exited = watched.exited.then((finished) => {
      throw new Error(`the replica ended (code ${finished.code}, signal ${finished.signal}) after ${proxy.injections.length} injected errors`);
    });
    // Raced below; ending it at the end of the test is no failure.
    exited.catch(() => undefined);
    await watched.waitFor(/^ready$/m, 60_000);
    await Promise.race([until("the load runs", () => acked(watched.output()).length >= 50, 30_000), exited]).catch(report);

    await Promise.race([proxy.storm({ cancels: EACH, terminations: EACH, everyMs: 25 }), exited]).catch(report);
    const stormEnded = Date.now();
    const cancels = proxy.injections.filter((injection) => injection.fault === "cancel");
    const terminations = proxy.injections.filter((injection) => injection.fault === "terminate");
    expect(cancels).toHaveLength(EACH);
    expect(terminations).toHaveLength(EACH);
    // At random points: mid-answer, waiting for it, idle (and during a startup, when one was under way).
    const points = new Set(proxy.injections.map((injection) => injection.point.replace(/[ ,].*/, "")));
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
      process.stderr.write(`${open.length} acknowledged jobs not done, the first: ${JSON.stringify(rows)}\nserver sessions: ${JSON.stringify(activity)}\nproxy sessions:\n${proxy.describe().join("\n")}\n`);
      report(error);
    });
    expect(watched.child.exitCode).toBeNull();
    expect(watched.output()).not.toMatch(/TypeError|uncaught|unhandled/i);
    process.stderr.write(
      `storm: ${cancels.length} cancels, ${terminations.length} terminations over ${proxy.injections.length > 0 ? stormEnded - proxy.injections[0]!.at : 0} ms; ` +
        `${ids.length} acknowledged enqueues all done; first beat ${beat! - stormEnded} ms after the storm\n`,
    );
  }, 240_000);
});

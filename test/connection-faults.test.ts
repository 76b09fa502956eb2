import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCronledger } from "../src/cronledger.js";
import { silentLogger } from "../src/log.js";
import { watch, type Watched } from "./support/child.js";
import { useTestDatabase } from "./support/database.js";
import { startFaultProxy, type FaultProxy } from "./support/fault-proxy.js";
import { withPort } from "./support/postgres-url.js";
import { until } from "./support/worker-processes.js";

const FIXTURE = fileURLToPath(new URL("./fixtures/proxied-worker.ts", import.meta.url));
/** Connections whose first statement is terminated, and as many whose first is cancelled (and whose second is terminated, so the next statement reconnects). */
const EACH = 100;

interface Probe {
  readonly n: number;
  readonly ok: boolean;
  readonly line: string;
}

function probes(output: string): Probe[] {
  return [...output.matchAll(/^probe (\d+) (ok|failed)(.*)$/gm)].map((match) => ({ n: Number(match[1]), ok: match[2] === "ok", line: match[0] }));
}

describe("a worker whose new connections' statements are terminated and cancelled by the server", () => {
  const database = useTestDatabase("connection-faults");
  let proxy: FaultProxy;
  let direct: postgres.Sql;
  let worker: Watched | undefined;

  beforeAll(async () => {
    const migrator = createCronledger({ database: { url: database.url, poolSize: 2 }, logger: silentLogger, metrics: false });
    await migrator.migrate();
    await migrator.close();
    direct = postgres(database.url, { max: 1, onnotice: () => {} });
    proxy = await startFaultProxy(database.url);
  });

  afterAll(async () => {
    worker?.child.kill("SIGKILL");
    await proxy?.close();
    await direct?.end({ timeout: 1 });
  });

  it(`lives through ${EACH} terminated and ${EACH} cancelled first statements; each error reaches only its own statement, and every later one succeeds`, async () => {
    worker = watch(process.execPath, ["--import", "tsx", FIXTURE], { env: { ...process.env, DATABASE_URL: withPort(database.url, proxy.port) } });
    await worker.waitFor(/^ready$/m, 60_000);
    const onFailure = (error: unknown) => {
      process.stderr.write(`worker output (last 4,000 characters):\n${worker?.output().slice(-4_000) ?? ""}\n`);
      throw error;
    };

    // Odd connections: the first statement is terminated. Even ones: the first is cancelled, the second terminated.
    proxy.arm((connection, statement) => {
      if (connection > 2 * EACH) return undefined;
      if (connection % 2 === 1) return statement === 1 ? "terminate" : undefined;
      return statement === 1 ? "cancel" : statement === 2 ? "terminate" : undefined;
    });
    const exited = worker.exited.then((finished) => {
      throw new Error(`the worker ended (code ${finished.code}, signal ${finished.signal}) after ${proxy.faults.length} faults`);
    });
    await Promise.race([until(`${2 * EACH} connections met their faults`, () => proxy.planned() > 2 * EACH, 120_000), exited]).catch(onFailure);
    const lastFault = Math.max(...probes(worker.output()).map((probe) => probe.n));

    // After the faults: 200 more probes, a job claimed and a slot fired, all on the same process.
    await Promise.race([until("200 probes after the faults", () => probes(worker!.output()).filter((probe) => probe.n > lastFault + 10).length >= 200, 60_000), exited]).catch(
      onFailure,
    );
    const [job] = await direct<{ id: number }[]>`insert into cronledger.job_queue (job_name) values ('faults.probe') returning id::float8 as id`;
    await until("the probe job is claimed", async () => {
      const [row] = await direct<{ done: boolean }[]>`select status = 'succeeded' as done from cronledger.jobs where id = ${job!.id}`;
      return row?.done === true;
    }).catch(onFailure);
    const armedAt = Date.now();
    await until("a slot fires after the faults", async () => {
      const [row] = await direct<{ n: number }[]>`select count(*)::int as n from cronledger.jobs where job_name = 'faults.every-second' and created_at > ${new Date(armedAt)}`;
      return (row?.n ?? 0) > 0;
    }).catch(onFailure);
    expect(worker.child.exitCode).toBeNull();

    const terminated = proxy.faults.filter((fault) => fault.fault === "terminate");
    const cancelled = proxy.faults.filter((fault) => fault.fault === "cancel");
    expect(terminated.length).toBeGreaterThanOrEqual(2 * EACH - 1);
    expect(cancelled.length).toBeGreaterThanOrEqual(EACH - 1);
    const swallowed = proxy.faults.flatMap((fault) => fault.statements).filter((text) => text.endsWith("::int as probe"));
    const output = worker.output();
    const all = probes(output);
    const failed = all.filter((probe) => !probe.ok);
    const sent = new Set([...output.matchAll(/^sent (\d+) on \d+$/gm)].map((match) => Number(match[1])));
    try {
      // Every failed probe had been sent on a connection, which failed it: no statement failed with the error of a
      // backend it was never sent to (postgres.js 3.4 fails the first statement after a reconnect with the old
      // backend's error, before sending it). Those failures are the statements the proxy swallowed, plus any that
      // postgres.js had pipelined on the same connection and could not write before the server closed it.
      expect(failed.filter((probe) => !sent.has(probe.n)).map((probe) => probe.line)).toEqual([]);
      const failedSet = new Set(failed.map((probe) => `select ${probe.n}::int as probe`));
      expect(swallowed.filter((text) => !failedSet.has(text))).toEqual([]);
      expect(failed.length).toBeGreaterThanOrEqual(swallowed.length);
      expect(failed.length).toBeLessThan(swallowed.length * 1.2 + 5);
      // Cancelled probes fail with the server's 57014, terminated ones with its 57P01.
      expect(new Set(failed.map((probe) => /failed (\S+)/.exec(probe.line)?.[1]))).toEqual(new Set(["57014", "57P01"]));
      // Every statement after the last fault succeeded.
      const lastFailed = Math.max(...failed.map((probe) => probe.n));
      expect(all.filter((probe) => probe.n > lastFailed && !probe.ok)).toEqual([]);
      expect(lastFailed).toBeLessThanOrEqual(lastFault + 10);
    } catch (error) {
      onFailure(error);
    }
    process.stderr.write(
      `faults: ${terminated.length} terminated, ${cancelled.length} cancelled; probes: ${all.length} sent, ${failed.length} failed, all after probe ${Math.max(...failed.map((probe) => probe.n))} succeeded\n`,
    );
  }, 240_000);
});

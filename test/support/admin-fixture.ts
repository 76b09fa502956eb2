import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { sql } from "drizzle-orm";
import { z } from "zod";
import type { AdminHandler } from "../../src/admin/handler.js";
import { startAdminServer, type AdminServer } from "../../src/admin/server.js";
import { createCronledger, type Cronledger } from "../../src/cronledger.js";
import { query } from "../../src/db/connection.js";
import { defineJob, noop, skip } from "../../src/jobs/define-job.js";
import type { Logger } from "../../src/log.js";
import { defineSchedule } from "../../src/schedule/define-schedule.js";
import { createTestDatabase } from "./database.js";

/** The secrets the failing job leaks into its error; no admin surface may show them. */
export const LEAKED_BEARER = "abc123";
export const LEAKED_PASSWORD = "hunter2-pw-secret";
/** A Redis URL's password with an empty user name, a named ciphertext and a bare base64 blob: also leaked by the failing job. */
export const LEAKED_URL_PASSWORD = "r3dis-only-pass";
export const LEAKED_CIPHERTEXT = "c1ph3rT3xtV4lu3";
export const LEAKED_BASE64 = "kR7vQ2mZ8xW4nL6pT0yB3cF5hJ9dS1gA";
/** Every secret above: no admin surface may show any of them. */
export const LEAKED_SECRETS = [LEAKED_BEARER, LEAKED_PASSWORD, LEAKED_URL_PASSWORD, LEAKED_CIPHERTEXT, LEAKED_BASE64] as const;

export const okJob = defineJob({ name: "report.ok", retry: "maintenance", run: () => undefined });
export const skipJob = defineJob({ name: "report.skip", retry: "maintenance", run: () => skip("nothing to report") });
export const noopJob = defineJob({ name: "report.noop", retry: "maintenance", run: () => noop("already sent") });
export const flakyJob = defineJob({
  name: "report.flaky",
  retry: "probe",
  run: () => {
    throw new Error("upstream timed out");
  },
});
export const chargeJob = defineJob({
  name: "billing.charge",
  retry: "maintenance",
  payload: z.object({ user: z.string(), password: z.string() }),
  run: (payload, ctx) => {
    // A careless handler: it logs its payload and the header it sent before failing with both in the message.
    ctx.log.warn(`posting with Authorization: Bearer ${LEAKED_BEARER}`, { payload, sent: { password: payload.password }, note: `password: ${payload.password}` });
    throw new Error(
      `charge failed: upstream said 401 to Authorization: Bearer ${LEAKED_BEARER} while posting payload ${JSON.stringify(payload)}\n` +
        `session cache redis://:${LEAKED_URL_PASSWORD}@cache.internal:6379/0 kept ciphertext: ${LEAKED_CIPHERTEXT}\nsealed box ${LEAKED_BASE64} dropped`,
    );
  },
});
/** Its inserts are rejected by a trigger, so every tick quarantines its entry. */
export const syncJob = defineJob({ name: "inventory.sync", retry: "maintenance", run: () => undefined });

export const SCHEDULE = defineSchedule([
  { job: okJob, cron: "*/15 * * * *" },
  { job: syncJob, cron: "0 * * * *", timezone: "Europe/Berlin" },
  // February 30th: loads with a never_matches warning, a broken entry on the status page.
  { job: okJob, cron: "0 0 30 2 *", key: "feb30" },
  { job: chargeJob, cron: "30 2 * * *", timezone: "America/New_York", payload: { user: "ann", password: LEAKED_PASSWORD } },
]);

export interface AdminFixture {
  readonly ledger: Cronledger;
  readonly server: AdminServer;
  readonly token: string;
  /** Every line the ledger logged, with its fields, as text. */
  readonly logs: string[];
  rows<T>(statement: ReturnType<typeof sql>): Promise<T[]>;
  /** Fetches an admin path with the token (unless `headers` replaces it). */
  get(path: string, init?: RequestInit): Promise<Response>;
  dispose(): Promise<void>;
}

function capturingLogger(lines: string[]): Logger {
  const write = (level: string) => (message: string, fields?: Record<string, unknown>) => {
    lines.push(`${level} ${message} ${fields === undefined ? "" : JSON.stringify(fields)}`);
  };
  return { debug: write("debug"), info: write("info"), warn: write("warn"), error: write("error") };
}

/**
 * A migrated ledger on a fresh database with the jobs above, a trigger that
 * rejects inventory.sync inserts, and the admin server on a free port.
 */
export async function createAdminFixture(label: string): Promise<AdminFixture> {
  const database = await createTestDatabase(label);
  const logs: string[] = [];
  const ledger = createCronledger({
    database: { url: database.url, poolSize: 4 },
    jobs: [okJob, skipJob, noopJob, flakyJob, chargeJob, syncJob],
    schedule: SCHEDULE,
    logger: capturingLogger(logs),
  });
  await ledger.migrate();
  await query(
    ledger.database.db,
    sql.raw(`create function public.reject_sync() returns trigger language plpgsql as $$
      begin raise exception 'inventory backend is read-only'; end $$;
      create trigger reject_sync before insert on cronledger.job_queue
      for each row when (new.job_name = 'inventory.sync') execute function public.reject_sync()`),
  );
  const token = randomBytes(24).toString("hex");
  const server = await startAdminServer(ledger, { port: 0, token });
  return {
    ledger,
    server,
    token,
    logs,
    rows: (statement) => query(ledger.database.db, statement),
    get: (path, init = {}) =>
      fetch(`${server.url}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, ...(init.headers as Record<string, string> | undefined) } }),
    async dispose() {
      await server.close();
      await ledger.close();
      await database.drop();
    },
  };
}

/**
 * Mounts `handler` at `prefix` on node:http the way Express `app.use(prefix, ...)` or Hono's `mount`
 * does: the prefix is stripped before the handler sees the request, and other paths never reach it.
 */
export async function serveStripped(handler: AdminHandler, prefix: string): Promise<AdminServer> {
  const server = createServer((message, out) => {
    const path = message.url ?? "/";
    if (!path.startsWith(`${prefix}/`)) {
      out.writeHead(404).end();
      return;
    }
    const headers = new Headers();
    for (const [name, value] of Object.entries(message.headers)) if (typeof value === "string") headers.set(name, value);
    handler(new Request(`http://${message.headers.host ?? "127.0.0.1"}${path.slice(prefix.length)}`, { method: message.method ?? "GET", headers }))
      .then(async (response) => {
        out.writeHead(response.status, Object.fromEntries(response.headers));
        out.end(Buffer.from(await response.arrayBuffer()));
      })
      .catch(() => out.writeHead(500).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${prefix}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

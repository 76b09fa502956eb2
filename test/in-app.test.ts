import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Console } from "node:console";
import { createServer } from "node:net";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Writable } from "node:stream";
import pino from "pino";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import winston from "winston";
import { z } from "zod";
// Like an application, from the package: the README's examples import "cronledger" too.
import { createCronledger, defineJob, defineSchedule, silentLogger, type Cronledger, type Logger } from "cronledger";
import { REPO_ROOT, watch } from "./support/child.js";
import { useTestDatabase } from "./support/database.js";

const TOKEN = "in-app-test-token-0123456789";
const SCRATCH = join(REPO_ROOT, `.scratch-in-app-${process.pid}`);

afterAll(() => rmSync(SCRATCH, { recursive: true, force: true }));

/** Collects what a logger writes, line by line. */
function sink(): { stream: Writable; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString().split("\n").filter((line) => line !== ""));
      done();
    },
  });
  return { stream, lines };
}

const logged = defineJob({
  name: "in-app.logged",
  payload: z.object({ orderId: z.number() }),
  async run({ orderId }, ctx) {
    ctx.log.info("handler line", { orderId });
    ctx.log.warn("handler warning", { orderId, apiKey: "sk-live-0123456789abcdef" });
  },
});

/** A README code block, by the name in its `<!-- tested by test/in-app.test.ts: NAME -->` marker. */
function readmeExample(name: string): { imports: string[]; body: string[] } {
  const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
  const marker = `<!-- tested by test/in-app.test.ts: ${name} -->\n`;
  const at = readme.indexOf(marker);
  if (at < 0) throw new Error(`README.md has no example marked ${name}`);
  // A `<!-- prelude: ... -->` line for test/doc-samples.test.ts may sit between the marker and the fence.
  const fence = "```ts\n";
  const start = readme.indexOf(fence, at) + fence.length;
  const lines = readme.slice(start, readme.indexOf("\n```", start)).split("\n");
  return { imports: lines.filter((line) => line.startsWith("import ")), body: lines.filter((line) => !line.startsWith("import ")) };
}

function writeScratch(name: string, text: string): string {
  mkdirSync(SCRATCH, { recursive: true });
  const file = join(SCRATCH, name);
  writeFileSync(file, text);
  return file;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (typeof address !== "object" || address === null) throw new Error("no port");
  return address.port;
}

describe("logger: the application's own, as it is", () => {
  const database = useTestDatabase(import.meta.url);

  /** A ledger logging through `logger` runs one job whose handler logs a line with fields and a warning. */
  async function runWith(logger: Logger): Promise<void> {
    const ledger = createCronledger({ database: { url: database.url, poolSize: 2 }, jobs: [logged], logger });
    try {
      await ledger.migrate();
      await ledger.enqueue(logged, { orderId: 7 });
      expect(await ledger.work({ once: true })).toMatchObject({ succeeded: 1 });
    } finally {
      await ledger.close();
    }
  }

  it("pino: fields arrive as fields, in pino's (fields, message) order", async () => {
    const { stream, lines } = sink();
    await runWith(pino({ level: "debug" }, stream));
    const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(entries.find((entry) => entry.msg === "handler line")).toMatchObject({ level: 30, job: "in-app.logged", attempt: 1, orderId: 7 });
    const warning = entries.find((entry) => entry.msg === "handler warning");
    expect(warning).toMatchObject({ level: 40, orderId: 7 });
    expect(JSON.stringify(warning)).not.toContain("sk-live-0123456789abcdef");
    expect(entries.some((entry) => typeof entry.msg === "string" && entry.msg.startsWith("using PostgreSQL"))).toBe(true);
  });

  it("winston: fields become the entry's metadata", async () => {
    const { stream, lines } = sink();
    await runWith(winston.createLogger({ level: "debug", format: winston.format.json(), transports: [new winston.transports.Stream({ stream })] }));
    const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(entries.find((entry) => entry.message === "handler line")).toMatchObject({ level: "info", job: "in-app.logged", attempt: 1, orderId: 7 });
    expect(entries.find((entry) => entry.message === "handler warning")).toMatchObject({ level: "warn", orderId: 7 });
  });

  it("console: message, then the fields", async () => {
    const { stream, lines } = sink();
    await runWith(new Console({ stdout: stream, stderr: stream }));
    expect(lines.find((line) => line.startsWith("handler line"))).toMatch(/^handler line \{ job: 'in-app\.logged', jobId: \d+, attempt: 1, orderId: 7 \}$/);
    expect(lines.some((line) => line.startsWith("handler warning") && !line.includes("sk-live-0123456789abcdef"))).toBe(true);
  });
});

const nightly = defineJob({ name: "in-app.nightly", run: () => {} });

/**
 * What the test adds to an example so the app reads bodies before the admin
 * routes: Express and Koa install their parsers in the README's examples
 * themselves, Fastify parses JSON by default; Hono has no body parser, so its
 * nearest, a middleware that reads the JSON body (an audit log, a validator),
 * is put in right after the app is made.
 */
const BODY_READERS: Readonly<Record<string, string>> = {
  hono: 'app.use(async (c, next) => { if ((c.req.header("content-type") ?? "").includes("json")) await c.req.json(); await next(); });',
};

describe("the README's admin routes in Express, Fastify, Koa and Hono, behind the app's body parser, over a real socket", () => {
  const database = useTestDatabase(import.meta.url);
  let ledger: Cronledger;

  beforeAll(async () => {
    const schedule = defineSchedule([{ job: nightly, cron: "0 3 * * *", key: "nightly" }]);
    ledger = createCronledger({ database: { url: database.url, poolSize: 2 }, jobs: [logged, nightly], schedule, logger: silentLogger });
    await ledger.migrate();
  });
  afterAll(async () => {
    await ledger?.close();
  });

  /** The example's lines, with the test's body reader after the line that makes the app. */
  function withBodyReader(framework: string, body: string[]): string[] {
    const reader = BODY_READERS[framework];
    if (reader === undefined) return body;
    const at = body.findIndex((line) => line.startsWith("const app ="));
    return [...body.slice(0, at + 1), reader, ...body.slice(at + 1)];
  }

  it.each(["express", "fastify", "koa", "hono"])("%s", async (framework) => {
    const { imports, body } = readmeExample(framework);
    const file = writeScratch(
      `${framework}.ts`,
      [
        ...imports,
        "export default async function mount(ledger: any, token: string, port: number) {",
        ...withBodyReader(framework, body).map((line) => `  ${line}`),
        "  return async () => {",
        "    // @ts-ignore: which of the two the example defines depends on the framework",
        "    if (typeof server !== 'undefined') { server.closeAllConnections?.(); await new Promise((resolve) => server.close(resolve)); } else await app.close();",
        "  };",
        "}",
      ].join("\n"),
    );
    const { default: mount } = (await import(pathToFileURL(file).href)) as { default: (ledger: Cronledger, token: string, port: number) => Promise<() => Promise<void>> };
    const port = await freePort();
    const close = await mount(ledger, TOKEN, port);
    try {
      const base = `http://127.0.0.1:${port}/ops`;
      const auth = { authorization: `Bearer ${TOKEN}` };
      const status = await fetch(`${base}/admin/scheduler/status`, { headers: auth });
      expect(status.status).toBe(200);
      expect(await status.json()).toMatchObject({ namespace: "default", entries: expect.any(Array) });
      expect((await fetch(`${base}/admin/scheduler/status`)).status).toBe(401);
      const page = await fetch(`${base}/admin/scheduler`, { headers: auth });
      expect(page.status).toBe(200);
      expect(page.headers.get("content-type")).toMatch(/text\/html/);
      // The page with or without a trailing slash: a browser without credentials is asked for them (Basic), then sent to the page.
      for (const path of ["/admin/scheduler", "/admin/scheduler/"]) {
        const challenged = await fetch(`${base}${path}`, { headers: { accept: "text/html" } });
        expect(challenged.status, path).toBe(401);
        expect(challenged.headers.get("www-authenticate"), path).toMatch(/^Basic realm=/);
      }
      const basic = { authorization: `Basic ${Buffer.from(`admin:${TOKEN}`).toString("base64")}` };
      const slashed = await fetch(`${base}/admin/scheduler/`, { headers: basic, redirect: "manual" });
      expect(slashed.status).toBe(308);
      expect(new URL(slashed.headers.get("location") ?? "", `${base}/admin/scheduler/`).pathname).toBe("/ops/admin/scheduler");
      expect((await fetch(`${base}/admin/scheduler/`, { headers: basic })).headers.get("content-type")).toMatch(/text\/html/);
      const metrics = await fetch(`${base}/metrics`, { headers: auth });
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toContain("cronledger_jobs_total");
      const retry = await fetch(`${base}/admin/scheduler/jobs/987654/retry`, { method: "POST", headers: auth });
      expect(retry.status).toBe(404);

      // JSON posts, read by the app's parser first: pause, trigger (twice with one request id), backfill, resume.
      const post = (path: string, document: unknown) =>
        fetch(`${base}/admin/scheduler/${path}`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify(document) });
      const paused = await post("entries/pause", { entry: "nightly", note: `from ${framework}`, by: "alice" });
      expect(paused.status, await paused.clone().text()).toBe(200);
      expect(await paused.json()).toMatchObject({ job: "in-app.nightly", paused: true, paused_by: "alice", note: `from ${framework}` });
      const requestId = `in-app-${framework}`;
      const triggered = await post("entries/trigger", { entry: "nightly", request_id: requestId });
      expect(triggered.status, await triggered.clone().text()).toBe(200);
      const first = (await triggered.json()) as { job_id: number; created: boolean };
      expect(first).toMatchObject({ job: "in-app.nightly", request_id: requestId, created: true });
      expect(await (await post("entries/trigger", { entry: "nightly", request_id: requestId })).json()).toMatchObject({ job_id: first.job_id, created: false });
      const backfill = await post("entries/nightly/backfill", { from: "2026-05-01T00:00:00Z", to: "2026-05-03T00:00:00Z", dry_run: true });
      expect(backfill.status, await backfill.clone().text()).toBe(200);
      expect(await backfill.json()).toMatchObject({ job: "in-app.nightly", dry_run: true, slots: [{ slot: "2026-05-01T03:00:00.000Z" }, { slot: "2026-05-02T03:00:00.000Z" }] });
      expect(await (await post("entries/resume", { entry: "nightly" })).json()).toMatchObject({ paused: false, changed: true });

      // The page's form (urlencoded, Basic credentials): back to the page, the entry paused with the form's note.
      const form = await fetch(`${base}/admin/scheduler/entries/pause`, {
        method: "POST",
        headers: { ...basic, accept: "text/html", "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ entry: "nightly", note: "from the form" }).toString(),
        redirect: "manual",
      });
      expect(form.status, await form.clone().text()).toBe(303);
      expect((await ledger.status()).entries.find((entry) => entry.jobName === "in-app.nightly")).toMatchObject({ pause: { note: "from the form" } });
      await ledger.resume("nightly");
    } finally {
      await close();
    }
  });
});

describe("the README's shutdown in the app's own SIGTERM handler", () => {
  const database = useTestDatabase(import.meta.url);

  it("with handleSignals: false, the app's handler closes its server and the ledger; the running job finishes", async () => {
    const { imports, body } = readmeExample("shutdown");
    const file = writeScratch(
      "shutdown.ts",
      [
        ...imports,
        'import { createServer } from "node:http";',
        'import { createCronledger, defineJob, silentLogger } from "cronledger";',
        "const job = defineJob({ name: 'in-app.slow', async run() { console.log('job started'); await new Promise((resolve) => setTimeout(resolve, 300)); console.log('job finished'); } });",
        "const ledger = createCronledger({ database: process.env.DATABASE_URL, jobs: [job], logger: silentLogger });",
        "const app = { listen: (port: number) => createServer((_request, response) => response.end('ok')).listen(port) };",
        "const port = 0;",
        ...body,
        "await ledger.enqueue(job);",
      ].join("\n"),
    );
    const child = watch(process.execPath, ["--import", "tsx", file], { env: { ...process.env, DATABASE_URL: database.url } });
    await child.waitFor(/job started/, 30_000);
    child.child.kill("SIGTERM");
    const finished = await child.exited;
    expect(finished.code).toBe(0);
    expect(finished.stdout).toMatch(/job started\njob finished/);
    const client = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      // Only the app's job: the reap chore fires every 15 s, and one fired just before the stop may be left queued (seen under CI load).
      expect(await client`select status from cronledger.jobs where job_name = 'in-app.slow'`).toEqual([{ status: "succeeded" }]);
    } finally {
      await client.end({ timeout: 1 });
    }
  });
});

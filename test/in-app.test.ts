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
import { createCronledger, defineJob, silentLogger, type Cronledger, type Logger } from "cronledger";
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

describe("the README's admin routes in Express, Fastify and Hono, over a real socket", () => {
  const database = useTestDatabase(import.meta.url);
  let ledger: Cronledger;

  beforeAll(async () => {
    ledger = createCronledger({ database: { url: database.url, poolSize: 2 }, jobs: [logged], logger: silentLogger });
    await ledger.migrate();
  });
  afterAll(async () => {
    await ledger?.close();
  });

  it.each(["express", "fastify", "hono"])("%s", async (framework) => {
    const { imports, body } = readmeExample(framework);
    const file = writeScratch(
      `${framework}.ts`,
      [
        ...imports,
        "export default async function mount(ledger: any, token: string, port: number) {",
        ...body.map((line) => `  ${line}`),
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
      expect(await client`select status from cronledger.jobs`).toEqual([{ status: "succeeded" }]);
    } finally {
      await client.end({ timeout: 1 });
    }
  });
});

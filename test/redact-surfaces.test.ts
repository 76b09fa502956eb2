import { createHash } from "node:crypto";
import { inspect } from "node:util";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdminHandler } from "../src/admin/handler.js";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { NonRetryableError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import { formatLogLine, type Logger } from "../src/log.js";
import { runCli } from "./support/child.js";
import { createTestDatabase } from "./support/database.js";
import { rows } from "./support/ledger.js";

/**
 * One job throws an error carrying every kind of secret the redaction
 * property test generates (test/redact-property.test.ts), wrapped in what an
 * operator must read; the error is then followed to every surface: the
 * stored row, GET failures, the Schedule page, `cronledger failures` (the
 * real binary) and the log lines the worker writes.
 */
const KEY_BYTES = Buffer.from("8f1a2b3c4d5e6f708192a3b4c5d6e7f80011223344556677", "hex");
const SECRETS = {
  hex: createHash("sha256").update("ciphertext").digest("hex"),
  base32: "JBSWY3DPEHPK3PXPGEZDGNBVGY3TQOJQ",
  shortBase64: "q8Zk3Pf0aLmN2x==",
  bufferPairs: "8f 1a 2b 3c",
  jwtSignature: "sflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
} as const;
const JWT = `eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.${SECRETS.jwtSignature}`;

const READABLE = {
  uuid: "3f2b1c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
  timestamp: "2026-12-02T10:00:00.000Z",
  sqlstate: "22P02",
  path: "/tmp/tmp.Xk29fLq0aB/src/jobs/token-session.ts:42:11",
  shortSha: "9f86d08",
  ledgerKey: "default|billing.decrypt||0 8 * * 1-5|Europe/Berlin",
} as const;

const message =
  `decrypt failed for request ${READABLE.uuid} at ${READABLE.timestamp} [${READABLE.sqlstate}] (build ${READABLE.shortSha}) ` +
  `for ledger key ${READABLE.ledgerKey}: ciphertext ${SECRETS.hex}, otp seed ${SECRETS.base32}, ` +
  `{"encryptionKey":"${SECRETS.shortBase64}"}, key bytes ${inspect(KEY_BYTES)}, session jwt ${JWT}\n    at decrypt (${READABLE.path})`;

const decryptJob = defineJob({
  name: "billing.decrypt",
  retry: "maintenance",
  run: () => {
    throw new NonRetryableError(message);
  },
});

let database: { url: string; drop: () => Promise<void> };
let ledger: Cronledger;
const logged: { raw: string; formatted: string }[] = [];
const TOKEN = "surfaces-token-0123456789";

function recorder(): Logger {
  const record = (text: string, fields?: Record<string, unknown>) => {
    // What the application's own logger receives, and the line cronledger's console logger would print.
    logged.push({ raw: `${text} ${JSON.stringify(fields ?? {})}`, formatted: formatLogLine(text, fields) });
  };
  return { debug: record, info: record, warn: record, error: record };
}

function expectRedacted(surface: string, text: string): void {
  for (const [kind, secret] of Object.entries(SECRETS)) expect(text, `${kind} on ${surface}`).not.toContain(secret);
  expect(text, `JWT payload on ${surface}`).not.toContain("eyJzdWIiOiIxMjM0NTY3ODkwIn0");
  for (const [kind, part] of Object.entries(READABLE)) expect(text, `${kind} kept on ${surface}`).toContain(part);
}

beforeAll(async () => {
  database = await createTestDatabase("redact_surfaces");
  ledger = createCronledger({ database: database.url, jobs: [decryptJob], logger: recorder() });
  await ledger.migrate();
  await ledger.enqueue(decryptJob, {});
  await ledger.work({ once: true });
}, 60_000);

afterAll(async () => {
  await ledger?.close();
  await database?.drop();
});

describe("a job's error with secrets in it, on every surface", () => {
  it("is sure the job failed with the secrets in its message", () => {
    for (const secret of Object.values(SECRETS)) expect(message).toContain(secret);
  });

  it("the stored last_error", async () => {
    const [row] = await rows<{ last_error: string }>(ledger, sql`select last_error from cronledger.jobs where job_name = 'billing.decrypt' and status = 'failed'`);
    expect(row?.last_error).toMatch(/^NonRetryableError \[non_retryable\]: decrypt failed/);
    expectRedacted("last_error", row?.last_error ?? "");
  });

  it("GET /admin/scheduler/failures and the Schedule page", async () => {
    const handler = createAdminHandler(ledger, { token: TOKEN });
    const headers = { authorization: `Bearer ${TOKEN}` };
    const failures = await handler(new Request("http://localhost/admin/scheduler/failures", { headers }));
    const body = (await failures.json()) as { failures: { last_error: string }[] };
    expect(body.failures).toHaveLength(1);
    expectRedacted("GET failures", body.failures[0]?.last_error ?? "");
    const page = await handler(new Request("http://localhost/admin/scheduler", { headers }));
    // The page escapes HTML; read it back as text.
    const html = (await page.text()).replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
    expect(html).toContain("decrypt failed");
    expectRedacted("the page", html);
  });

  it("cronledger failures", async () => {
    const listed = await runCli(["failures", "--job-type", "billing.decrypt"], { env: { ...process.env, DATABASE_URL: database.url } });
    expect(listed.code, listed.stderr).toBe(0);
    // The CLI indents the error's continuation lines; compare with single spaces.
    expectRedacted("cronledger failures", listed.stdout);
  });

  it("the worker's log line", () => {
    const failed = logged.filter((line) => line.raw.includes("job failed terminally"));
    expect(failed).toHaveLength(1);
    for (const { raw, formatted } of failed) {
      // The error field is JSON-escaped in both; the parts checked hold no character JSON escapes.
      expectRedacted("the application's logger", raw);
      expectRedacted("the console log line", formatted);
    }
  });
});

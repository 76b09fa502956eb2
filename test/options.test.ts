import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { openDatabase, resolveDatabaseSetting } from "../src/db/connection.js";
import { ConfigError, InvalidArgumentError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
import { resolveEnqueueOptions } from "../src/jobs/enqueue-options.js";
import { resolveMaxPayloadBytes } from "../src/jobs/payload-limit.js";
import { RETRY_CLASSES } from "../src/jobs/retry.js";
import { resolveWorkOptions } from "../src/jobs/work-options.js";
import { parseConfig, resolveCronledgerOptions } from "../src/options.js";
import { resolveStartOptions } from "../src/runtime/start-options.js";

// The one options model: every options object parsed strictly, resolved to milliseconds with defaults.
const job = defineJob({ name: "options.probe", run: () => {} });

describe("createCronledger options", () => {
  it("fills in the defaults, in milliseconds", () => {
    const resolved = resolveCronledgerOptions({});
    expect(resolved).toMatchObject({ namespace: "default", leaseMs: 30_000, jobs: [], schedule: [], hooks: [], metrics: {}, passTimeoutMs: 10_000 });
    expect(resolved.catchUpWindowMs).toBeUndefined();
    expect(resolved.chores).toEqual({
      when: "start",
      reapCron: "*/15 * * * * *",
      pruneCron: "7 * * * *",
      retention: { succeededMs: 7 * 86_400_000, failedMs: 7 * 86_400_000, batchSize: 1_000 },
      ledgerGraceMs: 7 * 86_400_000,
      failUnregisteredAfterMs: 7 * 86_400_000,
    });
  });

  it("resolves durations and the chores setting", () => {
    const resolved = resolveCronledgerOptions({ lease: "2s", chores: { retention: { succeeded: "1h", batchSize: 10 } } });
    expect(resolved.leaseMs).toBe(2_000);
    expect(resolved.chores.when).toBe("always");
    expect(resolved.chores.retention).toEqual({ succeededMs: 3_600_000, failedMs: 7 * 86_400_000, batchSize: 10 });
    expect(resolveCronledgerOptions({ chores: false }).chores.when).toBe("never");
    expect(resolveCronledgerOptions({ chores: { ledgerGrace: "2d", failUnregisteredAfter: false } }).chores).toMatchObject({ ledgerGraceMs: 2 * 86_400_000, failUnregisteredAfterMs: false });
    expect(resolveCronledgerOptions({ catchUpWindow: "1h", passTimeout: "3s" })).toMatchObject({ catchUpWindowMs: 3_600_000, passTimeoutMs: 3_000 });
    expect(() => resolveCronledgerOptions({ passTimeout: 0 })).toThrow(/passTimeout: must be at least 1 ms/);
    expect(resolveCronledgerOptions({ chores: true }).chores.when).toBe("always");
  });

  it("rejects an unknown option with the closest known one", () => {
    expect(() => resolveCronledgerOptions({ namespce: "x" } as never)).toThrow(ConfigError);
    expect(() => resolveCronledgerOptions({ namespce: "x" } as never)).toThrow(/unknown option "namespce" \(did you mean "namespace"\?\)/);
    expect(() => resolveCronledgerOptions({ chores: { retention: { batchsize: 5 } } } as never)).toThrow(/unknown option "chores\.retention\.batchsize" \(did you mean "batchSize"\?\)/);
    expect(() => resolveCronledgerOptions({ catchUpWindw: "1h" } as never)).toThrow(/unknown option "catchUpWindw" \(did you mean "catchUpWindow"\?\)/);
    expect(() => resolveCronledgerOptions({ database: { url: "postgres://x", reconectDelay: "1s" } } as never)).toThrow(/database/);
  });

  it("reports every bad value at once instead of replacing it with a default", () => {
    const attempt = () => resolveCronledgerOptions({ lease: "soon", namespace: "has space", chores: { retention: { batchSize: 0 } } } as never);
    expect(attempt).toThrow(/lease/);
    expect(attempt).toThrow(/namespace: must be 1-64 letters/);
    expect(attempt).toThrow(/chores\.retention\.batchSize: must be a positive integer/);
  });

  it("takes a config file's worker and admin blocks, so a config object can be passed as it is", () => {
    expect(() => resolveCronledgerOptions({ jobs: [job], worker: { concurrency: 4 }, admin: { port: 9464 } })).not.toThrow();
    expect(() => resolveCronledgerOptions({ worker: { concurency: 4 } } as never)).toThrow(/unknown option "worker\.concurency" \(did you mean "concurrency"\?\)/);
  });
});

describe("work() and start() options", () => {
  it("resolves defaults and durations", () => {
    expect(resolveWorkOptions({})).toMatchObject({ once: false, concurrency: 10, batchSize: 500, pollMs: 1_000, graceMs: 25_000, leaseMs: undefined, queues: undefined });
    expect(resolveWorkOptions({ once: true, pollInterval: "250ms", lease: "3s" })).toMatchObject({ once: true, pollMs: 250, leaseMs: 3_000 });
    expect(resolveStartOptions({ maxTickInterval: "5s", ticker: false })).toMatchObject({ maxTickMs: 5_000, ticker: false, workers: true, handleSignals: true });
  });

  it("rejects bad values and unknown keys, naming them", () => {
    expect(() => resolveWorkOptions({ concurrency: 0 })).toThrow(/concurrency: must be a positive integer/);
    expect(() => resolveWorkOptions({ queues: [] })).toThrow(/queues: needs at least one queue/);
    expect(() => resolveWorkOptions({ concurency: 3 } as never)).toThrow(/did you mean "concurrency"/);
    expect(() => resolveStartOptions({ once: true } as never)).toThrow(/unknown option "once"/);
    expect(() => resolveStartOptions({ maxTickIntervl: "1s" } as never)).toThrow(/did you mean "maxTickInterval"/);
  });
});

describe("config files", () => {
  it("accepts a config and rejects unknown keys and bad blocks, naming the file", () => {
    expect(parseConfig({ jobs: [job], worker: { concurrency: 2 } }, "cronledger.config.ts").worker).toEqual({ concurrency: 2 });
    expect(() => parseConfig({ jobs: [job], shedule: [] }, "cronledger.config.ts")).toThrow(/config file cronledger\.config\.ts: unknown option "shedule" \(did you mean "schedule"\?\)/);
    expect(() => parseConfig({ jobs: [job], admin: { port: 70_000 } }, "c.ts")).toThrow(/admin\.port: must be a port number/);
    expect(parseConfig({ jobs: [job], catchUpWindow: "10m" }, "c.ts").catchUpWindow).toBe(600_000);
    expect(() => parseConfig({ jobs: [job], catchupWindow: "10m" }, "c.ts")).toThrow(/unknown option "catchupWindow" \(did you mean "catchUpWindow"\?\)/);
    expect(() => parseConfig({ jobs: ["not a job"] }, "c.ts")).toThrow(/defineJob\(\) result/);
    expect(() => parseConfig({ schedule: [] }, "c.ts")).toThrow(/has no `jobs` array/);
  });
});

describe("the database setting, one schema for every entry point", () => {
  it("is resolved once, by the options schema, into what openDatabase opens", async () => {
    const database = (setting: unknown) => resolveCronledgerOptions({ database: setting } as never).database;
    expect(database("memory://")).toEqual({ kind: "embedded", url: "memory://", dataDir: undefined });
    expect(database({ url: "pglite:./data" })).toEqual({ kind: "embedded", url: "pglite:./data", dataDir: resolve("data") });
    expect(database("postgres://localhost/app")).toEqual({ kind: "postgres", setting: { url: "postgres://localhost/app", poolSize: 10, reconnectDelay: 2_000 } });
    expect(database({ url: "postgresql://localhost/app", poolSize: 3, reconnectDelay: "5s", pooler: "pgbouncer" })).toEqual({
      kind: "postgres",
      setting: { url: "postgresql://localhost/app", poolSize: 3, reconnectDelay: 5_000, pooler: "pgbouncer" },
    });
    expect(database("")).toBeUndefined();
    const open = openDatabase(resolveDatabaseSetting("memory://"), {});
    expect(database(open)).toEqual({ kind: "open", database: open });
    // An open Database passes through openDatabase as it is.
    expect(openDatabase({ kind: "open", database: open }, {})).toBe(open);
    await open.close();
    expect(() => database("mysql://u:secret@db/app")).toThrow(/^Invalid createCronledger options: database: Unsupported database "mysql:\/\/u:\*\*\*@db\/app": use a postgres:\/\/ URL/);
    expect(() => openDatabase(undefined, { DATABASE_URL: "mysql://db/app" })).toThrow(/^Invalid DATABASE_URL: Unsupported database/);
  });


  it("says what is wrong the same way in createCronledger, the config file and openDatabase", () => {
    const typo = { url: "postgres://localhost/app", reconectDelay: "1s" };
    expect(() => resolveCronledgerOptions({ database: typo } as never)).toThrow(/unknown option "database\.reconectDelay" \(did you mean "reconnectDelay"\?\)/);
    expect(() => parseConfig({ jobs: [job], database: typo }, "c.ts")).toThrow(/unknown option "database\.reconectDelay" \(did you mean "reconnectDelay"\?\)/);
    expect(() => openDatabase(resolveDatabaseSetting(typo as never), {})).toThrow(/unknown setting "reconectDelay" \(did you mean "reconnectDelay"\?\)/);
    const small = { url: "postgres://localhost/app", poolSize: 1 };
    expect(() => resolveCronledgerOptions({ database: small })).toThrow(/database\.poolSize: must be at least 2 \(got 1\): migrations hold one connection/);
    expect(() => openDatabase(resolveDatabaseSetting(small), {})).toThrow(/poolSize: must be at least 2 \(got 1\): migrations hold one connection/);
    const listen = { url: "postgres://localhost/app", pooler: "pgbouncer" as const, listenUrl: "localhost" };
    expect(() => resolveCronledgerOptions({ database: listen })).toThrow(/database\.listenUrl: must be a postgres:\/\/ URL of the server itself/);
    expect(() => resolveCronledgerOptions({ database: { url: "postgres://localhost/app", reconnectDelay: "soon" as never } })).toThrow(/database\.reconnectDelay: Invalid reconnectDelay "soon"/);
  });
});

describe("maxPayloadBytes", () => {
  it("is checked by one schema in createCronledger and validateSchedule, naming the limit and the default", () => {
    expect(() => resolveCronledgerOptions({ maxPayloadBytes: 0 })).toThrow(/maxPayloadBytes: must be a whole number of bytes from 1 to 268435455 \(PostgreSQL's jsonb limit\); the default is 1048576/);
    expect(() => resolveMaxPayloadBytes(1.5)).toThrow(/Invalid maxPayloadBytes 1\.5: use a whole number of bytes from 1 to 268435455/);
    expect(resolveMaxPayloadBytes(undefined)).toBe(1_048_576);
  });
});

describe("enqueue options", () => {
  it("resolve a request's options, the delay in milliseconds", () => {
    expect(resolveEnqueueOptions({ delay: "2s", priority: 3, retry: "probe" }, "mail.send")).toMatchObject({ delayMs: 2_000, priority: 3, retry: { maxAttempts: RETRY_CLASSES.probe.maxAttempts, stored: { class: "probe" } } });
    expect(resolveEnqueueOptions(undefined, "mail.send")).toMatchObject({ delayMs: 0, runAt: undefined, retry: undefined });
  });

  it("refuse an unknown key with the closest known one and the list, a misplaced db, and runAt with delay", () => {
    expect(() => resolveEnqueueOptions({ idempotencyKye: "k" }, "mail.send")).toThrow(InvalidArgumentError);
    expect(() => resolveEnqueueOptions({ idempotencyKye: "k" }, "mail.send")).toThrow(
      /^enqueue\(mail\.send\): unknown option "idempotencyKye" \(did you mean "idempotencyKey"\?\)\. Enqueue options are idempotencyKey, runAt, delay, queue, priority, retry and db\.$/,
    );
    expect(() => resolveEnqueueOptions({ db: {} }, "mail.send", 2)).toThrow(/^enqueueMany item 2 \(mail\.send\): unknown option "db"; pass db to the enqueueMany call itself/);
    expect(() => resolveEnqueueOptions({ runAt: new Date(), delay: "1s" }, "mail.send")).toThrow(/pass either runAt or delay, not both/);
    expect(() => resolveEnqueueOptions({ delay: "soon" }, "mail.send")).toThrow(/^enqueue\(mail\.send\): delay: /);
    expect(() => resolveEnqueueOptions({ priority: 1.5 }, "mail.send")).toThrow(/priority: must be an integer/);
    expect(() => resolveEnqueueOptions({ retry: "sometimes" }, "mail.send")).toThrow(/retry: must be "probe"/);
    expect(() => resolveEnqueueOptions({ retry: { maxAttemps: 2 } }, "mail.send")).toThrow(/unknown option "retry\.maxAttemps" \(did you mean "maxAttempts"\?\)/);
  });
});


describe("defineJob options", () => {
  const run = () => {};

  it("refuse an unknown key with the closest known one, or the list of them", () => {
    expect(() => defineJob({ name: "mail.send", run, retyr: "probe" } as never)).toThrow(ConfigError);
    expect(() => defineJob({ name: "mail.send", run, retyr: "probe" } as never)).toThrow(
      /^Invalid defineJob\("mail\.send"\) options: unknown option "retyr" \(did you mean "retry"\?\)\.$/,
    );
    expect(() => defineJob({ name: "mail.send", run, concurrency: 2 } as never)).toThrow(
      /unknown option "concurrency" \(defineJob takes name, payload, retry, timeout, queue, priority, run\)/,
    );
  });

  it("check the retry policy fully, by the schema enqueue's override uses", () => {
    const failure = (retry: unknown) => {
      try {
        defineJob({ name: "mail.send", run, retry } as never);
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as ConfigError).message;
      }
      throw new Error(`defineJob accepted retry ${JSON.stringify(retry)}`);
    };
    // Without delays a policy has no curve: retried at once, the delay NaN.
    expect(failure({ maxAttempts: 3 })).toMatch(/retry: needs baseMs and capMs, or a delayMs function/);
    expect(failure({ maxAttempts: 3, baseMs: -1, capMs: 10 })).toMatch(/retry\.baseMs: must not be negative/);
    expect(failure({ maxAttempts: 3, baseMs: 1_000, capMs: 10_000, jitter: 2 })).toMatch(/retry\.jitter: must be a number from 0 to 1/);
    expect(failure({ maxAttempts: 3, delayMs: () => 1, baseMs: 1 })).toMatch(/retry: takes either delayMs or baseMs, capMs and jitter, not both/);
    expect(failure({ maxAttemps: 3, baseMs: 1, capMs: 2 })).toMatch(/unknown option "retry\.maxAttemps" \(did you mean "maxAttempts"\?\)/);
    expect(failure("sometimes")).toMatch(/retry: must be "probe", "entity", "maintenance"/);
    // The same problem reads the same in an enqueue override.
    expect(() => resolveEnqueueOptions({ retry: { maxAttempts: 3, baseMs: -1, capMs: 10 } }, "mail.send")).toThrow(/retry\.baseMs: must not be negative/);
  });

  it("check every other option in the same pass, and keep what it was given", () => {
    expect(() => defineJob({ name: "mail send", run, queue: "a b", priority: 1.5 } as never)).toThrow(
      /name: must be 1-200 letters.*; queue: must be 1-100 letters, digits and \. _ : -; priority: must be an integer/,
    );
    const policy = { maxAttempts: 2, delayMs: (attempt: number) => attempt * 1_000 };
    const job = defineJob({ name: "mail.send", run, retry: policy, timeout: "30s" });
    expect(job.retry).toBe(policy);
    expect(job.run).toBe(run);
    expect(job).toMatchObject({ retryClass: "custom", timeoutMs: 30_000, queue: "default", priority: 0 });
    expect(defineJob({ name: "mail.send", run, retry: "probe" }).retry).toBe(RETRY_CLASSES.probe);
  });
});

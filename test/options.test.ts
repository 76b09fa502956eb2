import { describe, expect, it } from "vitest";
import { ConfigError } from "../src/errors.js";
import { defineJob } from "../src/jobs/define-job.js";
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

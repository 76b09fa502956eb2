import { type } from "arktype";
import * as v from "valibot";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import { z as zod4 } from "zod";
import { z as zod3 } from "zod3";
import { z as zod3v4 } from "zod3/v4";
import { ConfigError, PayloadValidationError } from "../src/errors.js";
import { defineJob, type JobDefinition } from "../src/jobs/define-job.js";
import type { StandardSchemaV1 } from "../src/jobs/standard-schema.js";
import { validateSchedule } from "../src/schedule/validate.js";
import { createTestStore, type TestStore } from "./support/ledger.js";

/**
 * Payload schemas are any Standard Schema validator: the application's own
 * validator and version, not cronledger's zod. Each one below defines the
 * same job; the handler's payload type is inferred from it, enqueue
 * validates with it before writing, and the worker validates the stored
 * payload with it again before the handler runs.
 */
const seen: Array<{ validator: string; payload: { invoiceId: number; note?: string | undefined } }> = [];

function invoiceJob<S extends StandardSchemaV1<{ invoiceId: number; note?: string | undefined }, { invoiceId: number; note?: string | undefined }>>(
  validator: string,
  payload: S,
): JobDefinition<S> {
  return defineJob({
    name: `invoice.remind.${validator}`,
    payload,
    run(value) {
      seen.push({ validator, payload: value });
    },
  });
}

const jobs = {
  "zod-4": invoiceJob("zod-4", zod4.object({ invoiceId: zod4.number().int(), note: zod4.string().optional() })),
  "zod-3-classic": invoiceJob("zod-3-classic", zod3.object({ invoiceId: zod3.number().int(), note: zod3.string().optional() })),
  "zod-3-v4": invoiceJob("zod-3-v4", zod3v4.object({ invoiceId: zod3v4.number().int(), note: zod3v4.string().optional() })),
  valibot: invoiceJob("valibot", v.object({ invoiceId: v.pipe(v.number(), v.integer()), note: v.optional(v.string()) })),
  arktype: invoiceJob("arktype", type({ invoiceId: "number.integer", "note?": "string" })),
};

describe("payload schemas from any Standard Schema validator", () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createTestStore("postgres", "standard_schema");
  });
  afterAll(async () => {
    await store.dispose();
  });

  it("infers payload types from the validator, without cronledger's zod in them", () => {
    expectTypeOf<Parameters<(typeof jobs)[keyof typeof jobs]["run"]>[0]>().toEqualTypeOf<{ invoiceId: number; note?: string | undefined }>();
    expectTypeOf<Parameters<(typeof jobs)["zod-3-classic"]["run"]>[0]>().toEqualTypeOf<{ invoiceId: number; note?: string | undefined }>();
    const job = defineJob({ name: "typed.valibot", payload: v.object({ day: v.string() }), run: (payload) => void payload.day.toUpperCase() });
    // @ts-expect-error valibot says day is a string
    defineJob({ name: "typed.valibot.wrong", payload: v.object({ day: v.string() }), run: (payload) => void payload.day.toFixed() });
    const arkJob = defineJob({ name: "typed.arktype", payload: type({ n: "number" }), run: (payload) => void payload.n.toFixed() });
    expectTypeOf(job).toEqualTypeOf<JobDefinition<v.ObjectSchema<{ readonly day: v.StringSchema<undefined> }, undefined>>>();
    expect(job.name).toBe("typed.valibot");
    expectTypeOf<Parameters<typeof arkJob.run>[0]>().toEqualTypeOf<{ n: number }>();
    expect(arkJob.payload["~standard"].vendor).toBe("arktype");
    // A job without a schema takes nothing or any object.
    const untyped = defineJob({ name: "typed.none", run: (payload) => void payload });
    expectTypeOf<Parameters<typeof untyped.run>[0]>().toEqualTypeOf<Record<string, unknown> | undefined>();
    expect(untyped.payload["~standard"].validate(undefined)).toEqual({ value: undefined });
  });

  it.each(Object.keys(jobs) as Array<keyof typeof jobs>)("%s: enqueue validates, the worker runs the handler with the parsed payload", async (validator) => {
    const job: JobDefinition = jobs[validator];
    const ledger = await store.open({ jobs: [job] });
    await ledger.enqueue(job, { invoiceId: 7, note: "second reminder" });
    // Both of enqueue's checks name the field: the value given, before anything is written.
    const refused = await ledger.enqueue(job, { invoiceId: "7" } as never).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(PayloadValidationError);
    expect((refused as PayloadValidationError).message).toMatch(/invoiceId: /);
    expect(await ledger.work({ once: true })).toMatchObject({ succeeded: 1, failed: 0 });
    expect(seen.filter((entry) => entry.validator === validator)).toEqual([{ validator, payload: { invoiceId: 7, note: "second reminder" } }]);
  });

  it("validateSchedule checks schedule payloads with the job's validator", () => {
    const problems = validateSchedule(
      [
        { job: jobs.valibot, cron: "0 9 * * *", payload: { invoiceId: 1 } },
        { job: jobs.arktype, cron: "0 9 * * *", key: "wrong", payload: { invoiceId: 1.5 } as never },
      ],
      Object.values(jobs),
    );
    expect(problems.map((problem) => [problem.code, problem.index])).toEqual([["invalid_payload", 1]]);
    expect(problems[0]?.message).toMatch(/invoiceId: .*integer/);
  });

  it("refuses a schema that validates asynchronously, and a payload that is no validator", async () => {
    const slow = defineJob({ name: "async.refine", payload: zod4.object({ n: zod4.number() }).refine(async () => true), run: () => {} });
    const ledger = await store.open({ jobs: [slow] });
    await expect(ledger.enqueue(slow, { n: 1 })).rejects.toThrow(/validates asynchronously; cronledger validates payloads synchronously/);
    expect(() => defineJob({ name: "not.a.schema", payload: { parse: () => ({}) } as never, run: () => {} })).toThrow(ConfigError);
    expect(() => defineJob({ name: "not.a.schema", payload: { parse: () => ({}) } as never, run: () => {} })).toThrow(/not a Standard Schema validator.*zod 3\.24/);
  });
});

import { describe, expectTypeOf, it } from "vitest";
import { z } from "zod";
import type { Cronledger } from "../src/cronledger.js";
import { defineJob, type EnqueueArgs, type EnqueuedJob, type EnqueueRequest, type JobContext } from "../src/jobs/define-job.js";
import type { EnqueueOptions } from "../src/jobs/enqueue-options.js";

/**
 * Payload types at every enqueue: a payload of the wrong shape, or none
 * where the job's schema requires one, does not compile, for
 * `ledger.enqueue`, `ledger.enqueueMany`, `ctx.enqueue` and `ctx.enqueueMany`.
 * `npm run typecheck` (tsconfig.json includes test/) fails when an
 * `@ts-expect-error` below stops finding its error; the calls sit in
 * functions never called, so nothing runs against a database.
 */
const charge = defineJob({ name: "orders.charge", payload: z.object({ orderId: z.number() }), run: () => undefined });
const optional = defineJob({ name: "orders.sweep", payload: z.object({ dryRun: z.boolean() }).optional(), run: () => undefined });
const bare = defineJob({ name: "orders.rollup", run: () => undefined });

function ledgerCalls(ledger: Cronledger) {
  void ledger.enqueue(charge, { orderId: 2 });
  void ledger.enqueue(charge, { orderId: 2 }, { idempotencyKey: "order-2" });
  // @ts-expect-error orderId is a number in the job's schema
  void ledger.enqueue(charge, { orderId: "2" });
  // @ts-expect-error the job's schema requires a payload
  void ledger.enqueue(charge);
  void ledger.enqueue(optional);
  void ledger.enqueue(bare);
  void ledger.enqueue(bare, { any: "object" });
  // A job by name is checked at run time, by the registered job's schema.
  void ledger.enqueue("orders.charge", { orderId: "2" });

  void ledger.enqueueMany([{ job: charge, payload: { orderId: 2 } }, { job: bare }, { job: "orders.charge", payload: {} }]);
  // @ts-expect-error orderId is a number in the job's schema
  void ledger.enqueueMany([{ job: charge, payload: { orderId: "2" } }]);
  // @ts-expect-error the job's schema requires a payload
  void ledger.enqueueMany([{ job: bare }, { job: charge }]);
  // @ts-expect-error the second request's payload has the first job's shape
  void ledger.enqueueMany([{ job: charge, payload: { orderId: 1 } }, { job: optional, payload: { orderId: 1 } }]);
  // Built elsewhere, the requests keep their job's payload type.
  const orders = [1, 2, 3].map((orderId) => ({ job: charge, payload: { orderId } }));
  void ledger.enqueueMany(orders);
  const wrong = [1, 2, 3].map((orderId) => ({ job: charge, payload: { orderId: String(orderId) } }));
  // @ts-expect-error strings where the schema says a number
  void ledger.enqueueMany(wrong);
  // Typed loosely on purpose, a request is checked at run time only.
  const loose: EnqueueRequest[] = [{ job: charge, payload: { orderId: "2" } }];
  void ledger.enqueueMany(loose);
}

function handlerCalls(ctx: JobContext) {
  void ctx.enqueue(charge, { orderId: 2 });
  // @ts-expect-error orderId is a number in the job's schema
  void ctx.enqueue(charge, { orderId: "2" });
  // @ts-expect-error the job's schema requires a payload
  void ctx.enqueue(charge);
  void ctx.enqueueMany([{ job: charge, payload: { orderId: 2 } }]);
  // @ts-expect-error orderId is a number in the job's schema
  void ctx.enqueueMany([{ job: charge, payload: { orderId: "2" } }]);
  // @ts-expect-error the job's schema requires a payload
  void ctx.enqueueMany([{ job: charge }]);
}

describe("enqueue payload types", () => {
  it("exports what enqueue takes after the job: a required payload for a job that requires one", () => {
    expectTypeOf<EnqueueArgs<typeof charge.payload>>().toEqualTypeOf<[payload: { orderId: number }, options?: EnqueueOptions]>();
    expectTypeOf<EnqueueArgs<typeof bare.payload>>().toEqualTypeOf<[payload?: Record<string, unknown> | undefined, options?: EnqueueOptions]>();
    expectTypeOf<Cronledger["enqueue"]>().returns.toEqualTypeOf<Promise<EnqueuedJob>>();
    expectTypeOf(ledgerCalls).toBeFunction();
    expectTypeOf(handlerCalls).toBeFunction();
  });
});

// One replica of the soak (bench/soak/orchestrate.ts): ticker, worker and chores behind the replica's fault
// proxy, as an application runs cronledger. Its handlers append their side effects to SOAK_EFFECTS, one JSON line
// each: `start` when an attempt begins, `end` when it ends (`ok` false when it threw, `aborted` when its signal
// fired), with the job's id and the attempt's number, so the checker can explain each by a recorded attempt.
//
// SOAK_PLANT names planted bugs (comma-separated) for the checker's own test, each hitting every tenth job:
// `double-effect`, its side effect written twice by one attempt, as a handler (or a worker running it twice)
// would; `drop-success`, an attempt that ended well reported as a failure, as a worker that skipped the
// completion write and let the lease fail the job would (issue 31's lost success: the job runs again, and its
// last attempt's success ends as `failed`).
import { appendFileSync } from "node:fs";
import { createCronledger } from "../../src/cronledger.js";
import { DatabaseUnavailableError } from "../../src/errors.js";
import { defineJob, type JobContext } from "../../src/jobs/define-job.js";
import type { Logger } from "../../src/log.js";
import { OVERLAP_ENTRIES, SOAK_CRON, WORK_JOB, workPayload } from "./shape.js";

const effects = process.env.SOAK_EFFECTS ?? "";
const replica = process.env.SOAK_REPLICA ?? "r?";
const plants = new Set((process.env.SOAK_PLANT ?? "").split(",").filter((name) => name !== ""));
const leaseMs = Number(process.env.SOAK_LEASE_MS ?? 3_000);

const say = (text: string) => process.stdout.write(`${new Date().toISOString()} ${text}\n`);
const line = (level: string) => (text: string, fields?: Record<string, unknown>) => say(`[${level}] ${text} ${JSON.stringify(fields ?? {})}`);
const logger: Logger = { debug: () => {}, info: line("info"), warn: line("warn"), error: line("error") };

function effect(kind: "start" | "end", job: string, ctx: JobContext, extra: Record<string, unknown> = {}): void {
  const record = JSON.stringify({ e: kind, job, id: ctx.jobId, attempt: ctx.attempt, t: Date.now(), replica, pid: process.pid, ...extra }) + "\n";
  appendFileSync(effects, record);
  if (plants.has("double-effect") && kind === "end" && extra.ok === true && ctx.jobId % 10 === 0) appendFileSync(effects, record);
}

/** Sleeps `ms`, or less when the attempt's signal fires (cancel_other asks the running job to stop). */
function work(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve(true)), { once: true });
  });
}

const enqueued = defineJob({
  name: WORK_JOB,
  payload: workPayload,
  retry: "probe",
  run: async ({ ms, failFirst }, ctx) => {
    effect("start", WORK_JOB, ctx);
    const aborted = await work(ms, ctx.signal);
    const ok = !(failFirst && ctx.attempt === 1) && !aborted;
    effect("end", WORK_JOB, ctx, { ok, aborted });
    if (!ok) throw new Error(aborted ? "aborted" : "the first attempt fails, as planned");
    if (plants.has("drop-success") && ctx.jobId % 10 === 0) throw new Error("planted bug: a success dropped");
  },
});

const scheduled = OVERLAP_ENTRIES.map(({ job, overlap }) => ({
  overlap,
  definition: defineJob({
    name: job,
    retry: "probe",
    run: async (_payload, ctx) => {
      effect("start", job, ctx, { slot: ctx.scheduledFor?.getTime() ?? null });
      // 0.4-3 s, drawn from the job's id: against a 2 s entry, about half the runs overlap the next slot.
      const aborted = await work(400 + ((ctx.jobId * 2_654_435_761) % 2_600), ctx.signal);
      effect("end", job, ctx, { ok: !aborted, aborted, slot: ctx.scheduledFor?.getTime() ?? null });
    },
  }),
}));

const ledger = createCronledger({
  database: process.env.DATABASE_URL ?? "",
  jobs: [enqueued, ...scheduled.map((entry) => entry.definition)],
  schedule: scheduled.map(({ definition, overlap }) => ({ job: definition, cron: SOAK_CRON, overlap })),
  lease: `${leaseMs}ms`,
  chores: { reapCron: "* * * * * *" },
  logger,
  metrics: false,
});

process.on("uncaughtException", (error) => (say(`died: uncaught ${String(error)}`), process.exit(2)));
process.on("unhandledRejection", (error) => (say(`died: unhandled ${String(error)}`), process.exit(2)));

// A replica started while its database is out of reach is restarted by its orchestrator: here, by this loop.
// Anything else start() throws ends the process, and the soak counts it as a death.
for (;;) {
  try {
    await ledger.start();
    break;
  } catch (error) {
    if (!(error instanceof DatabaseUnavailableError)) throw error;
    say(`start-retry ${error.message}`);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
}
say("ready");

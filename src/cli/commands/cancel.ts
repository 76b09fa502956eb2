import { hostname, userInfo } from "node:os";
import type { CancelledJob } from "../../operators/operations.js";
import { cancelledDocument } from "../../wire/jobs.js";
import { UsageError } from "../args.js";
import { CONFIG_OPTION, JSON_OPTION, type Command } from "../command.js";
import { assertMigrated, withLedger } from "../open-ledger.js";

/** Who the CLI says asked: `cli:<user>@<host>`, or `--by`. */
function operator(given: string | undefined): string {
  if (given !== undefined && given.trim() !== "") return given.trim();
  let user = "unknown";
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry (a container's arbitrary uid): the host still says where.
  }
  return `cli:${user}@${hostname()}`;
}

function describe(result: CancelledJob): string {
  const { stop } = result;
  if (stop !== null) {
    const who = `${stop.requestedBy}${stop.reason ? ` (${stop.reason})` : ""}`;
    const grace = `if its handler still runs ${stop.graceMs / 1000} s after its worker sees the request, the job is failed as killed`;
    return result.was === "stopping"
      ? `Job ${result.id} (${result.jobName}) had already been asked to stop by ${who} at ${stop.requestedAt.toISOString()}; the first request stands.`
      : `Asked running job ${result.id} (${result.jobName}) to stop: its worker aborts its signal and it ends cancelled when its handler returns, never retried; ${grace}.`;
  }
  if (!result.cancelled) return `Job ${result.id} (${result.jobName}) was already cancelled; nothing changed.`;
  const was = result.was === "retrying" ? `waiting for a retry after ${result.attempts}/${result.maxAttempts} attempts` : "queued, never run";
  return `Cancelled job ${result.id} (${result.jobName}), which was ${was}: it will not run.`;
}

export const cancel: Command = {
  name: "cancel",
  summary: "cancel a job: one waiting to run ends cancelled and never runs; a running one is asked to stop",
  details:
    "A running job's worker aborts its ctx.signal (with who asked and why) within about a second; the job ends cancelled when\n" +
    "its handler returns, never retried, or is failed as killed if the handler ignores the signal for the stop grace\n" +
    "(createCronledger's `stopGrace`, default 30 s). A finished job cannot be cancelled; repeating a cancel changes nothing.\n" +
    "Find ids with `cronledger failures`, on the Schedule page (\"Running\", \"Waiting for a retry\") or in the status's latest runs.",
  argument: { name: "<id>", description: "the job's id" },
  options: [
    CONFIG_OPTION,
    { name: "reason", type: "string", value: "<text>", description: "why: stored with a running job's stop request, and read by its handler" },
    { name: "by", type: "string", value: "<who>", description: "who asks (default cli:<user>@<host>)" },
    JSON_OPTION,
  ],
  run: async (args, io) => {
    const id = args.argument;
    if (id === undefined || !/^\d{1,15}$/.test(id)) {
      throw new UsageError(`\`cronledger cancel\` needs the job's id, a positive integer: cronledger cancel 42${id === undefined ? "" : ` (got ${JSON.stringify(id)})`}.`);
    }
    const reason = args.string("reason");
    return withLedger(args, io, "database", async (ledger) => {
      await assertMigrated(ledger);
      const result = await ledger.cancelJob(Number(id), { by: operator(args.string("by")), ...(reason === undefined ? {} : { reason }) });
      io.stdout(args.boolean("json") ? JSON.stringify(cancelledDocument(result), null, 2) : describe(result));
      return 0;
    });
  },
};

import { MAX_FAILURES_LIMIT, type FailurePage } from "../../operators/failures.js";
import { failuresDocument } from "../../wire/jobs.js";
import { integerOption } from "../args.js";
import { CONFIG_OPTION, JSON_OPTION, type Command } from "../command.js";
import { assertMigrated, withLedger } from "../open-ledger.js";
import { isoOrDash, table } from "../format.js";

export const failures: Command = {
  name: "failures",
  summary: "list failure tickets (jobs that failed for good), newest first, errors redacted",
  details: "Payloads are never shown; errors are redacted and bounded as on the admin page.",
  options: [
    CONFIG_OPTION,
    { name: "job-type", type: "string", value: "<name>", description: "only failures of this job name" },
    { name: "limit", type: "string", value: "<n>", description: `at most this many tickets (default 50, at most ${MAX_FAILURES_LIMIT})` },
    { name: "before", type: "string", value: "<cursor>", description: "the next page: the cursor the previous page printed" },
    JSON_OPTION,
  ],
  run: (args, io) =>
    withLedger(args, io, "database", async (ledger) => {
      await assertMigrated(ledger);
      const jobType = args.string("job-type");
      const limit = integerOption(args, "limit", 1, MAX_FAILURES_LIMIT);
      const before = args.string("before");
      const page = await ledger.failures({
        ...(jobType === undefined ? {} : { jobType }),
        ...(limit === undefined ? {} : { limit }),
        ...(before === undefined ? {} : { before }),
      });
      if (args.boolean("json")) io.stdout(JSON.stringify(failuresDocument(page), null, 2));
      else for (const line of describeFailures(page, jobType)) io.stdout(line);
      return 0;
    }),
};

function describeFailures(page: FailurePage, jobType: string | undefined): string[] {
  const tickets = page.failures;
  if (tickets.length === 0) return [`No failures${jobType === undefined ? "" : ` of ${jobType}`}.`];
  const lines = table([
    ["ID", "JOB", "ATTEMPTS", "FAILED AT", "SCHEDULED FOR", "RETRIED AS"],
    ...tickets.map((ticket) => [
      String(ticket.id),
      ticket.jobType,
      `${ticket.attempts}/${ticket.maxAttempts}${ticket.retryOverride ? ` (retry: ${ticket.retryOverride})` : ""}`,
      isoOrDash(ticket.failedAt),
      isoOrDash(ticket.scheduledFor),
      ticket.retriedAs ? `#${ticket.retriedAs.id} (${ticket.retriedAs.status})` : "-",
    ]),
  ]);
  const header = lines[0] ?? "";
  const rows = lines.slice(1).flatMap((line, index) => [line, `    ${(tickets[index]?.lastError ?? "(no error recorded)").replace(/\n/g, "\n    ")}`]);
  const more = page.nextBefore === null ? [] : [`Older failures: add --before ${page.nextBefore}`];
  return [header, ...rows, ...more];
}

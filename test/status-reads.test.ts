import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdminHandler } from "../src/admin/handler.js";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import type { ScheduleEntry } from "../src/schedule/define-schedule.js";
import { useTestDatabase } from "./support/database.js";
import { insertFinishedJobs } from "./support/history.js";

const job = defineJob({ name: "reads.yearly", retry: "maintenance", run: () => undefined });
const TOKEN = "status-reads-token-0123456789";
const RUNS = 4;

const database = useTestDatabase(import.meta.url);
/** The same schedule shape at two sizes, in two namespaces of one database. */
const ledgers = new Map<number, Cronledger>();

function scheduleOf(size: number): ScheduleEntry[] {
  return Array.from({ length: size }, (_, index) => ({ job, cron: "0 0 1 1 *", key: `e${index}` }));
}

/** The statements `read` sends through the ledger's own database. */
async function statementsOf(ledger: Cronledger, read: () => Promise<unknown>): Promise<number> {
  const before = ledger.database.statements.count;
  await read();
  return ledger.database.statements.count - before;
}

beforeAll(async () => {
  for (const size of [3, 240]) {
    const ledger = createCronledger({ database: { url: database.url, poolSize: 4 }, namespace: `n${size}`, chores: false, jobs: [job], schedule: scheduleOf(size), logger: silentLogger });
    if (ledgers.size === 0) await ledger.migrate();
    await ledger.tick();
    // RUNS past runs of every entry, its last RUNS slots (1 January of this year and the years before); every entry's newest one
    // failed in the larger ledger's second half. At its slots: a strip reads the history from its last slots' days on.
    const keys = ledger.entries.map((entry) => entry.ledgerKey);
    const thisYear = new Date().getUTCFullYear();
    await insertFinishedJobs(
      ledger.database.db,
      Array.from({ length: RUNS }, (_, run) => run + 1).flatMap((s) =>
        keys.map((key, index) => {
          const at = new Date(Date.UTC(thisYear - s + 1, 0, 1));
          const failed = s === 1 && index + 1 > Math.floor(size / 2);
          return {
            jobName: job.name,
            status: failed ? ("failed" as const) : ("succeeded" as const),
            scheduleKey: key,
            scheduledFor: at,
            createdAt: at,
            startedAt: at,
            finishedAt: at,
            lastError: failed ? "Error: upstream said 503" : null,
          };
        }),
      ),
    );
    ledgers.set(size, ledger);
  }
});

afterAll(async () => {
  await Promise.all([...ledgers.values()].map((ledger) => ledger.close()));
});

const small = () => ledgers.get(3) as Cronledger;
const large = () => ledgers.get(240) as Cronledger;

describe("the status reads the database a constant number of times", () => {
  it("status() sends five statements for 3 entries and for 240: the ledger with its clock, the counts, the runs, the jobs waiting for a worker, the dynamic entries' counts", async () => {
    expect(await statementsOf(small(), () => small().status())).toBe(5);
    expect(await statementsOf(large(), () => large().status())).toBe(5);
    // A page of dynamic entries is one more, whatever is stored.
    expect(await statementsOf(large(), () => large().status({ dynamic: { limit: 100 } }))).toBe(6);
  });

  it("reads a page's strips with the newest runs of the others, and one more statement when the page is filtered by state", async () => {
    const page = { limit: 3, page: 2, perPage: 100 };
    for (const ledger of [small(), large()]) {
      expect(await statementsOf(ledger, () => ledger.status({ runs: page }))).toBeLessThanOrEqual(6);
      expect(await statementsOf(ledger, () => ledger.status({ runs: { ...page, state: "failing" } }))).toBeLessThanOrEqual(6);
    }
  });

  it("serves the Schedule page in at most eleven statements, whatever the number of entries (its dynamic entries' counts; their page and its runs only when some are stored)", async () => {
    for (const ledger of [small(), large()]) {
      const handler = createAdminHandler(ledger, { token: TOKEN });
      const get = () => handler(new Request("http://127.0.0.1/admin/scheduler", { headers: { authorization: `Bearer ${TOKEN}` } })).then((response) => response.text());
      // The status (four statements; five when the strips' page is not the whole schedule), the failures (two), the retrying jobs,
      // the running jobs (their Stop buttons).
      expect(await statementsOf(ledger, get)).toBeLessThanOrEqual(11);
    }
  });
});

describe("the recent runs of a page of entries", () => {
  it("come newest first for the entries of that page only; the others carry their latest run", async () => {
    const status = await large().status({ runs: { limit: 3, page: 2, perPage: 100 } });
    const withRuns = status.entries.filter((entry) => entry.recentRuns !== null);
    expect(withRuns.map((entry) => entry.key)).toEqual(status.entries.slice(100, 200).map((entry) => entry.key));
    for (const entry of withRuns) {
      const runs = entry.recentRuns ?? [];
      expect(runs).toHaveLength(3);
      expect(runs[0]).toEqual(entry.latestRun);
      expect(runs.map((run) => run.scheduledFor.getTime())).toEqual([...runs].map((run) => run.scheduledFor.getTime()).sort((a, b) => b - a));
    }
    expect(status.entries.every((entry) => entry.latestRun !== null)).toBe(true);
  });

  it("filtered by state, page through the entries in that state", async () => {
    const status = await large().status({ runs: { limit: RUNS, page: 1, perPage: 50, state: "failing" } });
    const failing = status.entries.filter((entry) => entry.state === "failing");
    expect(failing).toHaveLength(120);
    const withRuns = status.entries.filter((entry) => entry.recentRuns !== null);
    expect(withRuns.map((entry) => entry.key)).toEqual(failing.slice(0, 50).map((entry) => entry.key));
    expect(withRuns.every((entry) => entry.recentRuns?.length === RUNS && entry.recentRuns[0]?.kind === "failed")).toBe(true);
  });

  it("keep a page past the last one on the last page", async () => {
    const status = await small().status({ runs: { limit: 2, page: 9, perPage: 2 } });
    expect(status.entries.map((entry) => entry.recentRuns?.length ?? null)).toEqual([null, null, 2]);
  });
});

describe("a strip reads the history from its entry's last slots on", () => {
  it("leaves out runs finished before its `limit`-th slot back, and still shows the entry's last finished run", async () => {
    const minutely = defineJob({ name: "reads.minutely", run: () => undefined });
    const ledger = createCronledger({ database: { url: database.url, poolSize: 2 }, namespace: "floor", chores: false, jobs: [minutely], schedule: [{ job: minutely, cron: "* * * * *", key: "m" }], logger: silentLogger });
    try {
      await ledger.tick();
      const key = ledger.entries[0]?.ledgerKey as string;
      const minute = 60_000;
      const now = Math.floor(Date.now() / minute) * minute;
      const run = (at: number, status: "succeeded" | "failed") => ({ jobName: minutely.name, status, scheduleKey: key, scheduledFor: new Date(at), createdAt: new Date(at), startedAt: new Date(at), finishedAt: new Date(at + 1_000) });
      // Three runs two days ago (the newest of them failed), then one in the last minutes: a strip of 3 reaches back 3 minutes and an hour.
      await insertFinishedJobs(ledger.database.db, [run(now - 2 * 86_400_000 - 2 * minute, "succeeded"), run(now - 2 * 86_400_000 - minute, "succeeded"), run(now - 2 * 86_400_000, "failed")]);
      let status = await ledger.status({ runs: { limit: 3, page: 1, perPage: 10 } });
      expect(status.entries[0]?.recentRuns?.map((entryRun) => [entryRun.kind, entryRun.scheduledFor.getTime()])).toEqual([["failed", now - 2 * 86_400_000]]);
      await insertFinishedJobs(ledger.database.db, [run(now - 2 * minute, "succeeded")]);
      status = await ledger.status({ runs: { limit: 3, page: 1, perPage: 10 } });
      expect(status.entries[0]?.recentRuns?.map((entryRun) => entryRun.scheduledFor.getTime())).toEqual([now - 2 * minute]);
    } finally {
      await ledger.close();
    }
  });
});

import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { useTestDatabase } from "./support/database.js";
import { until } from "./support/worker-processes.js";

const report = defineJob({ name: "grace.report", run: () => {} });

describe("the prune chore's grace", () => {
  const database = useTestDatabase(import.meta.url);
  const opened: Cronledger[] = [];
  const open = (keys: readonly string[]) => {
    const ledger = createCronledger({
      database: { url: database.url, poolSize: 2 },
      jobs: [report],
      // A yearly entry: its row is written when created and then once a year, so only the reports keep it.
      schedule: keys.map((key) => ({ job: report, cron: "0 0 1 1 *", key })),
      logger: silentLogger,
      metrics: false,
      chores: false,
    });
    opened.push(ledger);
    return ledger;
  };
  const run = <T>(ledger: Cronledger, statement: ReturnType<typeof sql>) => query<T>(ledger.database.db, statement);

  afterAll(async () => {
    await Promise.all(opened.map((ledger) => ledger.close()));
  });

  it("keeps a row no pass wrote within the grace while a running version reports it, and deletes it once no version has for the grace", async () => {
    const a = open(["rare", "kept"]);
    await a.migrate();
    await a.tick();
    const rare = a.entries[0]!.ledgerKey;
    // A runs (start() reports its schedule); its rows age as if last written 8 days ago.
    await a.start({ ticker: false, workers: false, handleSignals: false });
    await until("A reported its schedule", async () => (await run(a, sql`select 1 from cronledger.schedule_versions`)).length === 1);
    await run(a, sql`update cronledger.schedule_state set updated_at = now() - interval '8 days'`);

    // B, the next version, no longer has `rare`; its prune keeps it while A reports it.
    const b = open(["kept"]);
    expect(await b.pruneLedger()).toBe(0);
    expect(await run(b, sql`select 1 from cronledger.schedule_state where key = ${rare}`)).toHaveLength(1);

    // A stops; its last report ages past the grace (7 days by default) too: now nobody has evaluated `rare` for the grace.
    await a.stop();
    await run(a, sql`update cronledger.schedule_versions set reported_at = now() - interval '8 days'`);
    expect(await b.pruneLedger()).toBe(1);
    expect(await run(b, sql`select key from cronledger.schedule_state order by key`)).toEqual([{ key: b.entries[0]!.ledgerKey }]);
    // The stale version is forgotten with it.
    expect(await run(b, sql`select 1 from cronledger.schedule_versions`)).toEqual([]);
  });

  it("counts the entries of a process that only ticks (no start(), as `cronledger tick --once`) as evaluated: its ticks report its schedule", async () => {
    const c = open(["ticked-only"]);
    const cKey = c.entries[0]!.ledgerKey;
    await c.tick();
    // Its row ages past the grace, as a yearly entry's does between its slots; the process keeps ticking.
    await run(c, sql`update cronledger.schedule_state set updated_at = now() - interval '8 days' where key = ${cKey}`);
    await c.tick();
    const pruner = open(["something-else"]);
    const rowOfC = () => run(c, sql`select 1 from cronledger.schedule_state where key = ${cKey}`);
    await pruner.pruneLedger();
    expect(await rowOfC()).toHaveLength(1);
    // Once its reports age past the grace too (it stopped ticking), the row goes.
    await run(c, sql`update cronledger.schedule_versions set reported_at = now() - interval '8 days'`);
    await pruner.pruneLedger();
    expect(await rowOfC()).toHaveLength(0);
  });
});

import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { createAdminHandler } from "../src/admin/handler.js";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { runCli } from "./support/child.js";
import { useTestDatabase } from "./support/database.js";

/**
 * A quarantine cleared by an operator (the API, the CLI, `clearQuarantine`)
 * ends at the next pass of every replica, including one that cached the
 * quarantine's instant (src/schedule/tick.ts, watchQuarantined).
 */
const broken = defineJob({ name: "unq.broken", run: () => {} });
const fine = defineJob({ name: "unq.fine", run: () => {} });
const MINUTE = 60_000;
const TOKEN = "a-token-of-sixteen-chars";
const GOOD_JS = fileURLToPath(new URL("./fixtures/cli/good.config.mjs", import.meta.url));

describe("clearing a quarantine", () => {
  const database = useTestDatabase(import.meta.url);
  const replicas: Cronledger[] = [];

  afterAll(async () => {
    for (const replica of replicas) await replica.close();
  });

  const replica = () => {
    const ledger = createCronledger({
      database: { url: database.url, poolSize: 2 },
      jobs: [broken, fine],
      schedule: [
        { job: broken, cron: "* * * * *" },
        { job: fine, cron: "* * * * *" },
      ],
      logger: silentLogger,
      metrics: false,
      chores: false,
    });
    replicas.push(ledger);
    return ledger;
  };

  it("takes effect at the next pass of a replica that cached it, well before the quarantine's instant, by API, CLI and the Schedule page", async () => {
    const start = Math.ceil(Date.now() / MINUTE) * MINUTE + 10 * MINUTE;
    const at = (ms: number) => new Date(start + ms);
    const a = replica();
    const b = replica();
    await a.migrate();
    const run = (text: string) => query(a.database.db, sql.raw(text));
    await run(`create function public.reject_broken() returns trigger language plpgsql as $$ begin raise exception 'reports table is read-only'; end $$`);
    const breakIt = () => run(`create trigger reject_broken before insert on cronledger.job_queue for each row when (new.job_name = 'unq.broken') execute function public.reject_broken()`);
    const fixIt = () => run(`drop trigger reject_broken on cronledger.job_queue`);
    await breakIt();
    const key = a.entries[0]!.ledgerKey;
    await a.tick({ now: at(0) });
    await b.tick({ now: at(0) });

    // Replica a quarantines the entry until start + 2 min; replica b reads the quarantine and caches its instant.
    const failed = await a.tick({ now: at(MINUTE) });
    expect(failed.quarantined.map((slot) => slot.key)).toEqual([key]);
    expect(failed.quarantined[0]?.until).toEqual(at(2 * MINUTE));
    const seen = await b.tick({ now: at(MINUTE + 1_000) });
    expect(seen.enqueued).toEqual([]);

    // The cause is fixed and the quarantine cleared through the admin API: b's next pass fires the slot.
    await fixIt();
    const handler = createAdminHandler(a, { token: TOKEN });
    const response = await handler(new Request(`http://localhost/admin/scheduler/quarantine/clear?key=${encodeURIComponent(key)}`, { method: "POST", headers: { authorization: `Bearer ${TOKEN}` } }));
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ version: 1, cleared: true, key, job: "unq.broken", was_quarantined: true });
    const next = await b.tick({ now: at(MINUTE + 2_000) });
    expect(next.enqueued.map((slot) => [slot.key, slot.slot])).toEqual([[key, at(MINUTE)]]);
    // Replica a, which quarantined it, has nothing left to fire for that slot.
    expect((await a.tick({ now: at(MINUTE + 3_000) })).enqueued).toEqual([]);

    // Again at the next minute, cleared by the CLI this time: both replicas had cached the new quarantine.
    await breakIt();
    expect((await b.tick({ now: at(2 * MINUTE) })).quarantined.map((slot) => slot.key)).toEqual([key]);
    expect((await a.tick({ now: at(2 * MINUTE + 1_000) })).enqueued).toEqual([]);
    await fixIt();
    const cli = await runCli(["unquarantine", key, "--config", GOOD_JS], { env: { ...process.env, DATABASE_URL: database.url } });
    expect(cli.stderr).not.toMatch(/error/i);
    expect(cli.stdout).toContain("Cleared the quarantine of unq.broken");
    expect(cli.code).toBe(0);
    const fired = await a.tick({ now: at(2 * MINUTE + 2_000) });
    expect(fired.enqueued.map((slot) => [slot.key, slot.slot])).toEqual([[key, at(2 * MINUTE)]]);
    const jobs = await query<{ n: number }>(a.database.db, sql`select count(*)::int as n from cronledger.jobs where job_name = 'unq.broken'`);
    expect(jobs[0]?.n).toBe(2);


    // Once more from the Schedule page: the quarantined entry has a button whose form posts its key; the post comes back to the page.
    await breakIt();
    expect((await a.tick({ now: at(3 * MINUTE) })).quarantined.map((slot) => slot.key)).toEqual([key]);
    await fixIt();
    const auth = { authorization: `Bearer ${TOKEN}` };
    const page = await (await handler(new Request("http://localhost/admin/scheduler", { headers: auth }))).text();
    const form = /<form method="post" action="scheduler\/quarantine\/clear"><input type="hidden" name="key" value="([^"]*)">/.exec(page);
    expect(form?.[1]?.replace(/&#124;|&amp;|&quot;/g, (entity) => ({ "&#124;": "|", "&amp;": "&", "&quot;": '"' })[entity]!)).toBe(key);
    expect(page.match(/Clear the quarantine/g)).toHaveLength(1);
    const posted = await handler(
      new Request("http://localhost/admin/scheduler/quarantine/clear", {
        method: "POST",
        headers: { ...auth, accept: "text/html", "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ key }).toString(),
      }),
    );
    expect(posted.status).toBe(303);
    expect(posted.headers.get("location")).toBe("../../scheduler?unquarantined=unq.broken");
    const after = await (await handler(new Request("http://localhost/admin/scheduler?unquarantined=unq.broken", { headers: auth }))).text();
    expect(after).toContain("Quarantine of unq.broken cleared");
    expect(after).not.toContain("Clear the quarantine");
    expect((await b.tick({ now: at(3 * MINUTE + 1_000) })).enqueued.map((slot) => [slot.key, slot.slot])).toEqual([[key, at(3 * MINUTE)]]);

    // A key no row has: 404 from the API, exit 1 from the CLI.
    const missing = await handler(new Request("http://localhost/admin/scheduler/quarantine/clear?key=nope", { method: "POST", headers: { authorization: `Bearer ${TOKEN}` } }));
    expect(missing.status).toBe(404);
    const unknown = await runCli(["unquarantine", "nope", "--config", GOOD_JS], { env: { ...process.env, DATABASE_URL: database.url } });
    expect(unknown.code).toBe(1);
  });
});

// Backfill: one job per missed slot of an entry, with the live ticker and other backfills running in
// other OS processes against a real PostgreSQL; and the planning of the slots (DST notes, bounds, cap).
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdminHandler } from "../src/admin/handler.js";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { query } from "../src/db/connection.js";
import { BackfillTooLargeError, EntryNotFoundError, InvalidArgumentError } from "../src/errors.js";
import { defineJob, type JobSchedule } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { BACKFILL_CAP, describeSlot, planBackfill } from "../src/schedule/backfill.js";
import { loadSchedule } from "../src/schedule/validate.js";
import type { BackfillDocument } from "../src/wire/backfill.js";
import { runCli, watch } from "./support/child.js";
import { createTestDatabase } from "./support/database.js";

const CONFIG = fileURLToPath(new URL("./fixtures/cli/backfill.config.ts", import.meta.url));
const TICKER = fileURLToPath(new URL("./fixtures/backfill-ticker.ts", import.meta.url));
const MINUTE = 60_000;
const START = Date.parse("2026-05-01T09:00:00.000Z");
const at = (hhmm: string) => Date.parse(`2026-05-01T${hhmm}:00.000Z`);
const iso = (ms: number) => new Date(ms).toISOString();

const seen: JobSchedule[] = [];
const report = defineJob({
  name: "backfill.report",
  run: (_payload, ctx) => {
    if (ctx.schedule) seen.push(ctx.schedule);
  },
});
const ENTRY = { job: report, cron: "*/10 * * * *", key: "bf-report", catchUpWindow: "15m" } as const;

describe("planning a backfill", () => {
  const resolve = (cron: string, timezone = "UTC") => {
    const [entry] = loadSchedule([{ job: report, cron, timezone }], [report]).entries;
    if (entry === undefined) throw new Error("no entry");
    return entry;
  };

  it("lists the range's slots from the ticker's calendar, inclusive at both ends", () => {
    const { slots, omitted } = planBackfill(resolve("*/10 * * * *"), at("09:00"), at("12:00"));
    expect(slots.map(iso)).toEqual(Array.from({ length: 19 }, (_, index) => iso(at("09:00") + index * 10 * MINUTE)));
    expect(omitted).toBe(0);
  });

  it("notes a wall time shifted out of the spring-forward gap, and a repeated one at fall-back", () => {
    const nightly = resolve("30 2 * * *", "America/New_York");
    const spring = planBackfill(nightly, Date.parse("2026-03-07T00:00:00Z"), Date.parse("2026-03-10T00:00:00Z")).slots;
    const notes = spring.map((slot) => describeSlot(nightly, slot));
    expect(notes.map((note) => note.wallTime)).toEqual(["2026-03-07 02:30 UTC-05:00", "2026-03-08 03:30 UTC-04:00", "2026-03-09 02:30 UTC-04:00"]);
    expect(notes[1]?.dstNote).toBe("shifted: 2026-03-08 02:30 did not exist (DST gap), so this slot fires at 2026-03-08 03:30");
    expect(notes[0]?.dstNote).toBeNull();
    expect(notes[2]?.dstNote).toBeNull();

    const early = resolve("30 1 * * *", "America/New_York");
    const fall = planBackfill(early, Date.parse("2026-11-01T00:00:00Z"), Date.parse("2026-11-02T00:00:00Z")).slots;
    expect(fall.map(iso)).toEqual(["2026-11-01T05:30:00.000Z"]);
    expect(describeSlot(early, fall[0] ?? 0).dstNote).toBe("repeated wall time 2026-11-01 01:30 (DST fall-back): its first occurrence; the second occurrence is not a slot");

    const halfHourly = resolve("30 * * * *", "America/New_York");
    const both = planBackfill(halfHourly, Date.parse("2026-11-01T05:00:00Z"), Date.parse("2026-11-01T07:00:00Z")).slots;
    expect(both.map((slot) => describeSlot(halfHourly, slot))).toEqual([
      { wallTime: "2026-11-01 01:30 UTC-04:00", dstNote: "repeated wall time 2026-11-01 01:30 (DST fall-back): its first occurrence; both occurrences are slots" },
      { wallTime: "2026-11-01 01:30 UTC-05:00", dstNote: "repeated wall time 2026-11-01 01:30 (DST fall-back): its second occurrence; both occurrences are slots" },
    ]);
  });

  it("bounds a range with max (earliest) and latest, refuses more than the cap unless forced", () => {
    const everySecond = resolve("* * * * * *");
    const from = at("09:00");
    const to = from + 3_599_000;
    expect(() => planBackfill(everySecond, from, to)).toThrow(BackfillTooLargeError);
    expect(() => planBackfill(everySecond, from, to)).toThrow(`more than ${BACKFILL_CAP} slots`);
    expect(planBackfill(everySecond, from, to, { force: true }).slots).toHaveLength(3_600);
    expect(planBackfill(everySecond, from, to, { max: 5 })).toEqual({ slots: [0, 1, 2, 3, 4].map((s) => from + s * 1_000), omitted: 3_595 });
    expect(planBackfill(everySecond, from, to, { max: 3, latest: true }).slots).toEqual([to - 2_000, to - 1_000, to]);
    expect(planBackfill(everySecond, from, to, { latest: true }).slots).toEqual([to]);
    expect(() => planBackfill(everySecond, from, to, { max: BACKFILL_CAP + 1 })).toThrow(BackfillTooLargeError);
    expect(() => planBackfill(everySecond, to, from)).toThrow(InvalidArgumentError);
  });

  it("refuses with the counts and names the switch of each surface: force: true, --force, \"force\": true", () => {
    const everySecond = resolve("* * * * * *");
    const from = at("09:00");
    let refusal: unknown;
    try {
      planBackfill(everySecond, from, from + 3_599_000);
    } catch (error) {
      refusal = error;
    }
    if (!(refusal instanceof BackfillTooLargeError)) throw new Error(`expected a BackfillTooLargeError, got ${String(refusal)}`);
    expect(refusal).toMatchObject({ code: "backfill_too_large", slots: BACKFILL_CAP + 1, limit: BACKFILL_CAP, forced: false });
    expect(refusal.message).toContain("force it with force: true.");
    expect(refusal.message).toContain("dry run (dryRun: true)");
    expect(refusal.on("cli").message).toContain("force it with --force.");
    expect(refusal.on("cli").message).toContain("dry run (--dry-run), bound it with --max <n> (and --latest)");
    expect(refusal.on("cli")).toMatchObject({ code: "backfill_too_large", slots: BACKFILL_CAP + 1, limit: BACKFILL_CAP });
    expect(refusal.on("http").message).toContain('force it with "force": true in the body.');
    expect(refusal.on("http").message).toContain('dry run ("dry_run": true)');
    // Beyond the hard limit forcing does not help: the message says to split the range.
    const forced = (() => {
      try {
        planBackfill(everySecond, from, from + 100_000_000, { force: true });
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(forced).toMatchObject({ forced: true, limit: 100_000 });
    expect((forced as BackfillTooLargeError).on("cli").message).toBe("A backfill covers at most 100000 slots even with --force (this range has more); split the range.");
  });
});

describe("backfill against PostgreSQL", () => {
  let database: { url: string; drop: () => Promise<void> };
  let ledger: Cronledger;
  const env = () => ({ ...process.env, DATABASE_URL: database.url });
  const cli = async (...args: string[]) => {
    const result = await runCli(["backfill", ...args, "--config", CONFIG], { env: env() });
    expect(result.code, result.stderr).toBe(0);
    return result;
  };
  const cliJson = async (...args: string[]) => JSON.parse((await cli(...args, "--json")).stdout) as BackfillDocument;

  beforeAll(async () => {
    database = await createTestDatabase(import.meta.url);
    ledger = createCronledger({ database: { url: database.url, poolSize: 4 }, jobs: [report], schedule: [ENTRY], logger: silentLogger, metrics: false, chores: false });
    await ledger.migrate();
  });

  afterAll(async () => {
    await ledger?.close();
    await database?.drop();
  });

  it("backfills a 3-hour range of an every-10-minutes entry while the live ticker runs: every slot once, live and backfilled together; the dry run lists the same slots; a second backfill adds none", async () => {
    // The entry is first seen at 09:00:01; an outage follows, longer than its 15-minute catch-up window: at 11:30 only 11:30 fires.
    expect((await ledger.tick({ now: new Date(START + 1_000) })).created).toBe(1);
    const caughtUp = await ledger.tick({ now: new Date(at("11:30") + 1_000) });
    expect(caughtUp.enqueued.map((slot) => iso(slot.slot.getTime()))).toEqual([iso(at("11:30"))]);

    const dry = await cliJson("bf-report", "--from", iso(at("09:00")), "--to", iso(at("12:00")), "--dry-run");
    expect(dry.slots).toHaveLength(19);
    expect(dry).toMatchObject({ dry_run: true, enqueued: 15, existing: 1, ahead: 3, ledger_at: iso(at("11:30")) });
    expect(dry.slots.filter((slot) => slot.outcome === "would_enqueue").map((slot) => slot.slot)).toEqual(
      Array.from({ length: 15 }, (_, index) => iso(at("09:00") + index * 10 * MINUTE)),
    );
    expect((await query<{ n: number }>(ledger.database.db, sql`select count(*)::int as n from cronledger.jobs`))[0]?.n).toBe(1);
    const text = (await cli("bf-report", "--from", iso(at("09:00")), "--to", iso(at("09:20")), "--dry-run")).stdout;
    expect(text).toContain("Dry run: backfill of bf-report from 2026-05-01T09:00:00.000Z to 2026-05-01T09:20:00.000Z: 3 slots, 3 would enqueue");
    expect(text).toMatch(/2026-05-01T09:10:00\.000Z {2}2026-05-01 09:10 UTC\+00:00 +would enqueue/);

    // The live ticker runs on through 12:05 in its own process while two CLI backfills of overlapping ranges and one
    // from this process run at the same time.
    const ticker = watch(process.execPath, ["--import", "tsx", TICKER], {
      env: { ...env(), FROM_MS: String(at("11:31") + 1_000), TO_MS: String(at("12:05") + 1_000), PACE_MS: "250" },
    });
    await ticker.waitFor(/ticked/, 30_000);
    // Besides, this process backfills the whole range again and again until the ticker is done, so some of its
    // backfills read the ledger as the ticker moves it past 11:40, 11:50 and 12:00.
    const ledgersSeen = new Set<string>();
    const repeated = (async () => {
      let enqueued = 0;
      while (!/done/.test(ticker.output())) {
        const result = await ledger.backfill("bf-report", { from: iso(at("09:00")), to: iso(at("12:00")) });
        enqueued += result.enqueued;
        ledgersSeen.add(result.ledgerAt?.toISOString() ?? "none");
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      return enqueued;
    })();
    const backfills = await Promise.all([
      cliJson("bf-report", "--from", iso(at("09:00")), "--to", iso(at("12:00"))),
      cliJson("bf-report", "--from", iso(at("10:00")), "--to", iso(at("12:00"))),
      ledger.backfill("backfill.report", { from: iso(at("09:30")), to: iso(at("11:45")) }),
    ]);
    await ticker.waitFor(/done/, 60_000);
    const repeatedEnqueued = await repeated;
    console.log(`ledger values the repeated backfills read while the ticker ran: ${[...ledgersSeen].sort().join(", ")}`);
    expect(ledgersSeen.size).toBeGreaterThan(1);
    expect(backfills.reduce((sum, result) => sum + result.enqueued, 0) + repeatedEnqueued).toBe(15);

    const again = await cliJson("bf-report", "--from", iso(at("10:00")), "--to", iso(at("12:00")));
    expect(again).toMatchObject({ enqueued: 0, existing: 13, ahead: 0 });

    const perSlot = await query<{ slot: string; n: number; backfilled: number }>(
      ledger.database.db,
      sql`select to_char(scheduled_for at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as slot, count(*)::int as n,
                 count(*) filter (where idempotency_key like 'backfill:%')::int as backfilled
          from cronledger.jobs where scheduled_for between ${iso(at("09:00"))}::timestamptz and ${iso(at("12:00"))}::timestamptz
          group by 1 order by 1`,
    );
    expect(perSlot.map((row) => row.slot)).toEqual(dry.slots.map((slot) => slot.slot));
    expect(perSlot.every((row) => row.n === 1)).toBe(true);
    expect(perSlot.filter((row) => row.backfilled === 1).map((row) => row.slot)).toEqual(dry.slots.filter((slot) => slot.outcome === "would_enqueue").map((slot) => slot.slot));

    // Each backfilled run knows it was backfilled, and for which slot; the live ones do not.
    await ledger.work({ once: true });
    const runs = seen.filter((schedule) => schedule.slot.getTime() <= at("12:00")).sort((a, b) => a.slot.getTime() - b.slot.getTime());
    expect(runs.map((schedule) => [iso(schedule.slot.getTime()), schedule.backfilled])).toEqual(perSlot.map((row) => [row.slot, row.backfilled === 1]));
    expect(runs[0]).toMatchObject({ entryKey: "bf-report", backfilled: true });
  }, 180_000);

  it("backfills through the admin HTTP API, in the same document as the CLI's", async () => {
    const token = "backfill-test-token-0123456789";
    const handler = createAdminHandler(ledger, { token });
    const post = async (entry: string, body: unknown) => {
      const response = await handler(
        new Request(`http://localhost/admin/scheduler/entries/${encodeURIComponent(entry)}/backfill`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        }),
      );
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    // 08:00-08:20: before the entry was first seen, so behind its ledger and never fired.
    const range = { from: iso(at("08:00")), to: iso(at("08:20")) };
    expect(await post("bf-report", { ...range, dry_run: true })).toMatchObject({ status: 200, body: { version: 1, dry_run: true, enqueued: 3, existing: 0 } });
    expect(await post("bf-report", range)).toMatchObject({ status: 200, body: { dry_run: false, enqueued: 3 } });
    expect(await post("bf-report", range)).toMatchObject({ status: 200, body: { enqueued: 0, existing: 3 } });
    expect(await post("bf-reprot", range)).toMatchObject({ status: 404, body: { error: "entry_not_found" } });
    expect(await post("bf-report", { from: range.from })).toMatchObject({ status: 400, body: { error: "invalid_argument" } });
    // Ten days of an every-10-minutes entry is 1,440 slots: the refusal names the body's field, not the API's option.
    const tooLarge = await post("bf-report", { from: iso(at("08:00") - 10 * 24 * 60 * MINUTE), to: iso(at("08:00")) });
    expect(tooLarge).toMatchObject({ status: 400, body: { error: "backfill_too_large" } });
    expect(tooLarge.body["message"]).toContain('force it with "force": true in the body.');
  });

  it("refuses a too-large backfill naming --force on the CLI and force: true in the API", async () => {
    const range = { from: iso(at("08:00") - 10 * 24 * 60 * MINUTE), to: iso(at("08:00")) };
    await expect(ledger.backfill("bf-report", range)).rejects.toThrow(/force it with force: true\.$/);
    const refused = await runCli(["backfill", "bf-report", "--from", range.from, "--to", range.to, "--config", CONFIG], { env: env() });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("backfill_too_large");
    expect(refused.stderr).toContain("force it with --force.");
    expect(refused.stderr).not.toContain("force: true");
  });

  it("names an unknown entry with a did-you-mean, and refuses instants without an offset", async () => {
    await expect(ledger.backfill("bf-reprot", { from: iso(START), to: iso(START) })).rejects.toThrow(EntryNotFoundError);
    const typo = await runCli(["backfill", "bf-reprot", "--from", iso(START), "--to", iso(START), "--config", CONFIG], { env: env() });
    expect(typo.code).not.toBe(0);
    expect(typo.stderr).toContain('No schedule entry "bf-reprot" here. Did you mean "bf-report"?');
    await expect(ledger.backfill("bf-report", { from: "2026-05-01T09:00", to: iso(START) })).rejects.toThrow(/offset or Z/);
  });
});

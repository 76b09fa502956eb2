import { sql } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { EntryNotFoundError, InvalidArgumentError } from "../src/errors.js";
import { defineJob, type JobSchedule } from "../src/jobs/define-job.js";
import { createAdminHandler } from "../src/admin/handler.js";
import { BACKENDS, createTestStore, rows, type TestStore } from "./support/ledger.js";

const MINUTE = 60_000;
const T0 = Date.parse("2026-03-02T10:00:00.000Z");
const at = (minute: number) => new Date(T0 + minute * MINUTE + 1_000);

const seen: { payload: unknown; schedule: JobSchedule | null }[] = [];
const report = defineJob({
  name: "trigger.report",
  payload: z.object({ region: z.string() }),
  run: (payload, ctx) => {
    seen.push({ payload, schedule: ctx.schedule });
  },
});

describe.each(BACKENDS)("run now on %s", (backend) => {
  let store: TestStore;
  afterEach(async () => {
    await store?.dispose();
    store = undefined as unknown as TestStore;
    seen.length = 0;
  });

  it("runs the entry with its payload once per request id, and the handler sees who triggered it", async () => {
    store = await createTestStore(backend, `trigger_${backend}`);
    const ledger = await store.open({ jobs: [report], schedule: [{ job: report, cron: "0 3 * * *", key: "nightly", payload: { region: "eu" } }] });
    const first = await ledger.trigger("nightly", { by: "alice", requestId: "req-1" });
    expect(first).toMatchObject({ jobName: "trigger.report", requestId: "req-1", by: "alice", created: true, skipped: null });
    // A double click: the same request id gives the same job, and nothing new.
    const second = await ledger.trigger("nightly", { by: "alice", requestId: "req-1" });
    expect(second).toMatchObject({ jobId: first.jobId, created: false });
    const [count] = await rows<{ n: number }>(ledger, sql`select count(*)::int as n from cronledger.jobs where job_name = ${report.name}`);
    expect(count?.n).toBe(1);

    await ledger.work({ once: true });
    expect(seen).toEqual([
      {
        payload: { region: "eu" },
        schedule: expect.objectContaining({ identity: ledger.entries[0]?.identity, entryKey: "nightly", trigger: { by: "alice", requestId: "req-1" } }),
      },
    ]);
    // A scheduled run is not a run-now.
    await ledger.tick({ now: new Date(T0) });
    await ledger.tick({ now: new Date(T0 + 17 * 3_600_000 + 1_000) });
    await ledger.work({ once: true });
    expect(seen[1]?.schedule?.trigger).toBeNull();

    await expect(ledger.trigger("nightli")).rejects.toThrow(EntryNotFoundError);
    await expect(ledger.trigger("nightly", { requestId: "has spaces" })).rejects.toThrow(InvalidArgumentError);
  });

  it("lets the request id alone decide, per entry: another `by`, or none, gets the first request's job; another entry gets its own", async () => {
    store = await createTestStore(backend, `trigger_request_id_${backend}`);
    const ledger = await store.open({
      jobs: [report],
      schedule: [
        { job: report, cron: "0 3 * * *", key: "nightly", payload: { region: "eu" } },
        { job: report, cron: "0 4 * * *", key: "early", payload: { region: "us" } },
      ],
    });
    const first = await ledger.trigger("nightly", { by: "alice", requestId: "req-9" });
    expect(first).toMatchObject({ created: true });
    for (const options of [{ by: "bob", requestId: "req-9" }, { requestId: "req-9" }]) {
      expect(await ledger.trigger("nightly", options), JSON.stringify(options)).toMatchObject({ jobId: first.jobId, created: false });
    }
    // Requests racing each other with one id and different senders: one job between them.
    const racing = await Promise.all(["carol", "dave", "erin"].map((by) => ledger.trigger("nightly", { by, requestId: "req-10" })));
    expect(new Set(racing.map((run) => run.jobId)).size).toBe(1);
    expect(racing.filter((run) => run.created)).toHaveLength(1);
    // The same id on another entry is that entry's own request.
    const other = await ledger.trigger("early", { by: "bob", requestId: "req-9" });
    expect(other).toMatchObject({ created: true });
    expect(other.jobId).not.toBe(first.jobId);
    const [count] = await rows<{ n: number }>(ledger, sql`select count(*)::int as n from cronledger.jobs where job_name = ${report.name}`);
    expect(count?.n).toBe(3);
    // The job says who asked first.
    await ledger.work({ once: true });
    const triggers = seen.map((run) => run.schedule?.trigger);
    expect(triggers).toEqual(expect.arrayContaining([{ by: "alice", requestId: "req-9" }, { by: "bob", requestId: "req-9" }]));
    expect(triggers).toHaveLength(3);
  });

  it("applies the entry's overlap policy: skip records the run-now as skipped while a job is live; cancel_other supersedes it", async () => {
    store = await createTestStore(backend, `trigger_overlap_${backend}`);
    const ledger = await store.open({
      jobs: [report],
      schedule: [
        { job: report, cron: "* * * * *", key: "skipper", payload: { region: "us" }, overlap: "skip" },
        { job: report, cron: "* * * * *", key: "replacer", payload: { region: "ap" }, overlap: "cancel_other" },
      ],
    });
    await ledger.tick({ now: at(0) });
    const fired = await ledger.tick({ now: at(1) });
    const replaced = fired.enqueued.find((slot) => slot.key.includes("replacer"))?.jobId;
    const skipped = await ledger.trigger("skipper", { by: "bob" });
    expect(skipped.jobId).toBeNull();
    expect(skipped.skipped).toMatchObject({ reason: "overlap", detail: expect.stringContaining("overlap policy skip: job #") });
    const superseding = await ledger.trigger("replacer", { by: "bob" });
    expect(superseding).toMatchObject({ created: true, skipped: null });
    const [old] = await rows<{ status: string; outcome: string | null }>(ledger, sql`select status, outcome from cronledger.jobs where id = ${replaced ?? 0}`);
    expect(old).toEqual({ status: "cancelled", outcome: "overlap" });
  });

  it("is served by the admin API, a double post making one job", async () => {
    store = await createTestStore(backend, `trigger_http_${backend}`);
    const ledger = await store.open({ jobs: [report], schedule: [{ job: report, cron: "0 3 * * *", key: "nightly", payload: { region: "eu" } }] });
    const handler = createAdminHandler(ledger, { allowUnauthenticatedLocalhost: true });
    const post = async () => {
      const response = await handler(
        new Request("http://127.0.0.1/admin/scheduler/entries/trigger", {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", host: "127.0.0.1" },
          body: new URLSearchParams({ entry: "nightly", request_id: "page-7f3a", by: "carol" }),
        }),
      );
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    const first = await post();
    const second = await post();
    expect(first).toMatchObject({ status: 200, body: { version: 1, job: "trigger.report", request_id: "page-7f3a", by: "carol", created: true } });
    expect(second.body).toMatchObject({ job_id: first.body.job_id, created: false });
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdminHandler } from "../src/admin/handler.js";
import { escapeHtml } from "../src/admin/page.js";
import { upcomingList, UPCOMING_COUNT } from "../src/admin/page-upcoming.js";
import { createCronledger, type Cronledger } from "../src/cronledger.js";
import { defineJob } from "../src/jobs/define-job.js";
import { silentLogger } from "../src/log.js";
import { upcomingSlots } from "../src/schedule/upcoming.js";
import { createTestDatabase } from "./support/database.js";

const TOKEN = "upcoming-page-token-0123456789";
const job = defineJob({ name: "page.upcoming", run: () => {} });

/** The `<details class="upcoming">` of the row of `identity`, or null. */
function upcomingOf(html: string, identity: string): string | null {
  const row = html.indexOf(`data-identity="${escapeHtml(identity)}"`);
  if (row < 0) return null;
  const end = html.indexOf("</tr>", row);
  const cell = html.slice(row, end);
  const start = cell.indexOf(`<details class="upcoming">`);
  return start < 0 ? null : cell.slice(start, cell.indexOf("</details>", start) + "</details>".length);
}

describe("the Schedule page's upcoming list", () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let ledger: Cronledger;

  beforeAll(async () => {
    database = await createTestDatabase("admin_page_upcoming");
    ledger = createCronledger({
      database: { url: database.url, poolSize: 2 },
      jobs: [job],
      schedule: [
        { job, key: "berlin", cron: "30 2 * * *", timezone: "Europe/Berlin" },
        { job, key: "jittered", cron: "*/20 * * * * *", timezone: "America/New_York", jitter: "5s", catchUpWindow: "2m" },
        { job, key: "yearly", cron: "0 1 1 11 *", timezone: "America/New_York", catchUpWindow: "1h" },
      ],
      logger: silentLogger,
      metrics: false,
    });
    await ledger.migrate();
    await ledger.tick();
  });

  afterAll(async () => {
    await ledger.close();
    await database.drop();
  });

  it("lists, in each entry's row, the fire times upcomingSlots gives from the database clock, in its zone and UTC, with the notes", async () => {
    const handler = createAdminHandler(ledger, { token: TOKEN });
    const response = await handler(new Request("http://localhost/admin/scheduler", { headers: { authorization: `Bearer ${TOKEN}` } }));
    expect(response.status).toBe(200);
    const html = await response.text();
    const clock = /database clock <time datetime="([^"]+)">/.exec(html)?.[1];
    expect(clock).toBeDefined();
    const nowMs = Date.parse(clock ?? "");

    for (const entry of ledger.entries) {
      const list = upcomingOf(html, entry.identity);
      expect(list, entry.identity).not.toBeNull();
      const expected = upcomingSlots(entry, nowMs, UPCOMING_COUNT);
      const slots = [...(list ?? "").matchAll(/<li data-slot="([^"]+)">/g)].map((match) => match[1]);
      expect(slots).toEqual(expected.slots.map((slot) => new Date(slot.slotMs).toISOString()));
      for (const slot of expected.slots) {
        expect(list).toContain(`<time datetime="${new Date(slot.slotMs).toISOString()}">${escapeHtml(slot.local)}</time>`);
        if (slot.fireMs !== slot.slotMs) expect(list).toContain(`fires ${new Date(slot.fireMs).toISOString()}`);
        for (const note of slot.notes) expect(list).toContain(escapeHtml(note.message));
      }
      for (const note of expected.notes) expect(list).toContain(`<div class="note">${escapeHtml(note.message)}</div>`);
    }
    const jittered = upcomingOf(html, ledger.entries[1]?.identity ?? "") ?? "";
    expect(jittered).toContain("each slot fires 0 to 5s after it (jitter)");
    const yearly = upcomingOf(html, ledger.entries[2]?.identity ?? "") ?? "";
    expect(yearly).toContain("the catch-up window (1h) is shorter than the gap between slots");
  });

  it("renders a DST change's notes, escaped, and nothing for an entry the process has not loaded", () => {
    const berlin = ledger.entries[0];
    const list = upcomingList(berlin, new Date("2026-03-28T12:00:00Z"), escapeHtml, 2);
    expect(list.startsWith(`<details class="upcoming"><summary>upcoming</summary><ol>`)).toBe(true);
    expect(list).toContain(`<li data-slot="2026-03-29T01:30:00.000Z"><time datetime="2026-03-29T01:30:00.000Z">2026-03-29T03:30:00+02:00</time>`);
    expect(list).toContain("<div class=\"note\">02:30 does not exist on 2026-03-29 in Europe/Berlin (clocks jump from 02:00 to 03:00): fires at 03:30+02:00 instead</div>");
    const fallBack = upcomingList(ledger.entries[2], new Date("2026-10-01T00:00:00Z"), escapeHtml, 1);
    expect(fallBack).toContain("01:00 happens twice on 2026-11-01 in America/New_York (-04:00, then -05:00): fires once, at the first (-04:00)");
    expect(upcomingList(undefined, new Date(), escapeHtml)).toBe("");
  });
});

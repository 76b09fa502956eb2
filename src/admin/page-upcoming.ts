// The Schedule page's "upcoming" list: each entry's next fire times, in its zone and UTC, with the notes `cronledger
// next` prints, in a <details> that opens without script. Rendered from upcomingSlots (src/schedule/upcoming.ts), the
// function the CLI and the deploy plan use, from the database clock the status was read at.
import { upcomingSlots } from "../schedule/upcoming.js";
import type { ResolvedEntry } from "../schedule/validate.js";

/** Fire times listed per entry. */
export const UPCOMING_COUNT = 5;

export const UPCOMING_STYLE =
  "details.upcoming{margin-top:4px;font-size:12px}details.upcoming summary{cursor:pointer;color:var(--muted)}" +
  "details.upcoming ol{margin:4px 0 0;padding-left:18px}details.upcoming li{margin:2px 0}" +
  "details.upcoming .note{color:var(--muted);font-size:11px}details.upcoming .utc{font:11px ui-monospace,monospace;color:var(--muted)}";

/** The loaded entries by ledger key, for the rows of the status (which knows entries by key). */
export function upcomingIndex(entries: readonly ResolvedEntry[] | undefined): ReadonlyMap<string, ResolvedEntry> {
  return new Map((entries ?? []).map((entry) => [entry.ledgerKey, entry]));
}

/**
 * An entry's upcoming fire times after `now`, as an expandable list; empty
 * for an entry this process has not loaded. `escape` is the page's own
 * HTML escaping.
 */
export function upcomingList(entry: ResolvedEntry | undefined, now: Date, escape: (value: unknown) => string, count = UPCOMING_COUNT): string {
  if (entry === undefined) return "";
  const upcoming = upcomingSlots(entry, now.getTime(), count);
  if (upcoming.slots.length === 0) return "";
  const note = (message: string) => `<div class="note">${escape(message)}</div>`;
  const items = upcoming.slots.map((slot) => {
    const fires = slot.fireMs === slot.slotMs ? "" : ` · fires ${new Date(slot.fireMs).toISOString()}`;
    const utc = new Date(slot.slotMs).toISOString();
    return `<li data-slot="${utc}"><time datetime="${utc}">${escape(slot.local)}</time> <span class="utc">${utc}${fires}</span>${slot.notes.map((item) => note(item.message)).join("")}</li>`;
  });
  return `<details class="upcoming"><summary>upcoming</summary>${upcoming.notes.map((item) => note(item.message)).join("")}<ol>${items.join("")}</ol></details>`;
}

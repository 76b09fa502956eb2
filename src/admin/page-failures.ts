// Recent failures on the Schedule page, grouped by job: an entry failing every 10 s is one group, not a wall of cards.
import type { FailureTicket } from "../operators/failures.js";
import { escapeHtml } from "./html.js";
import { instant } from "./page-times.js";

/**
 * The tickets (newest first) in groups of one job each, the group with the
 * newest failure first. A job that failed once shows its card; a job that
 * failed several times shows how often, its first and last failure, and its
 * newest ticket open, the older ones folded under it (each still has its
 * `failure-<id>` anchor, which the browser unfolds when it is the target).
 */
export function groupFailures(failures: readonly FailureTicket[], now: Date, card: (failure: FailureTicket) => string): string {
  const groups = new Map<string, FailureTicket[]>();
  for (const failure of failures) {
    const group = groups.get(failure.jobType);
    if (group === undefined) groups.set(failure.jobType, [failure]);
    else group.push(failure);
  }
  return [...groups.values()].map((tickets) => groupHtml(tickets, now, card)).join("\n");
}

function groupHtml(tickets: readonly FailureTicket[], now: Date, card: (failure: FailureTicket) => string): string {
  const [newest, ...older] = tickets;
  if (newest === undefined) return "";
  if (older.length === 0) return card(newest);
  const times = tickets.map((ticket) => ticket.failedAt.getTime());
  const first = new Date(Math.min(...times));
  const last = new Date(Math.max(...times));
  return `<section class="failure-group" data-job="${escapeHtml(newest.jobType)}" data-count="${tickets.length}">
<p class="group-head"><strong>${escapeHtml(newest.jobType)}</strong> failed <strong class="count">${tickets.length} times</strong> · first ${instant(first, now)} · last ${instant(last, now)}</p>
${card(newest)}
<details class="older"><summary>${older.length} earlier failure${older.length === 1 ? "" : "s"} of ${escapeHtml(newest.jobType)}</summary>
${older.map(card).join("\n")}
</details>
</section>`;
}

/** The styles of the groups, the reasons' times, the identities and the phone layout of the Queues table. */
export const READABILITY_STYLE = `
.failure-group{border:1px solid var(--line);border-left:4px solid var(--warn);border-radius:6px;padding:.3rem .6rem;margin:.5rem 0;background:color-mix(in srgb,var(--warnbg) 35%,var(--bg))}
.failure-group .group-head{margin:.2rem 0}.failure-group .card{margin:.4rem 0}.failure-group details.older>summary{cursor:pointer;color:var(--muted);margin:.3rem 0}
.reason time,.group-head time{text-decoration:underline dotted;cursor:help}
.identity{word-break:normal}.identity .token{display:inline-block;max-width:100%;overflow-wrap:anywhere;white-space:pre-wrap}
@media (max-width:700px){
#queues thead{display:none}#queues,#queues tbody{display:block;width:100%}
#queues tr{display:grid;grid-template-columns:repeat(auto-fit,minmax(4rem,1fr));border:1px solid var(--line);border-radius:6px;margin:.4rem 0;padding:.2rem 0}
#queues td{border:0;padding:.15rem .4rem;overflow-wrap:anywhere}#queues td:first-child{grid-column:1/-1;font-weight:600}
#queues td.num::before{content:attr(data-label);display:block;font-size:11px;color:var(--muted);text-align:right}}`;

import type { FailureTicket } from "../jobs/failures.js";
import { redact } from "../redact.js";
import type { AdminStatus, EntryProblemView } from "./status.js";

const HTML_ESCAPES: Readonly<Record<string, string>> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (char) => HTML_ESCAPES[char] ?? char);
}

/** "in 4m", "3h ago": the page is read at a glance; the exact instant is in the title attribute. */
function relative(targetIso: string, nowIso: string): string {
  const deltaS = Math.round((Date.parse(targetIso) - Date.parse(nowIso)) / 1000);
  const size = Math.abs(deltaS);
  const amount =
    size < 60 ? `${size}s` : size < 3_600 ? `${Math.round(size / 60)}m` : size < 172_800 ? `${Math.round(size / 3_600)}h` : `${Math.round(size / 86_400)}d`;
  return deltaS >= 0 ? `in ${amount}` : `${amount} ago`;
}

function instant(value: string | null, nowIso: string): string {
  if (value === null) return `<span class="muted">never</span>`;
  return `<time datetime="${escapeHtml(value)}" title="${escapeHtml(value)}">${escapeHtml(relative(value, nowIso))}</time>`;
}

function problemList(problems: readonly EntryProblemView[]): string {
  return `<ul class="problems">${problems
    .map((problem) => `<li class="${problem.severity}"><code>${escapeHtml(problem.code)}</code> ${escapeHtml(redact(problem.message))}</li>`)
    .join("")}</ul>`;
}

const CHORE_BADGE = `<span class="badge chore" title="cronledger's own chore, fired once per slot by whichever replica runs start()">chore</span>`;

function entriesSection(status: AdminStatus): string {
  if (status.entries.length === 0) return `<p class="muted">No schedule entries are loaded in this process.</p>`;
  const rows = status.entries
    .map(
      (entry) => `<tr class="${[entry.problems.length > 0 ? "broken" : "", entry.chore ? "chore" : ""].join(" ").trim()}" data-identity="${escapeHtml(entry.identity)}">
  <td><strong>${escapeHtml(entry.job)}</strong>${entry.chore ? ` ${CHORE_BADGE}` : ""}<div class="identity">${escapeHtml(entry.identity)}</div></td>
  <td><code>${escapeHtml(entry.cron)}</code></td>
  <td>${escapeHtml(entry.timezone)}</td>
  <td>${instant(entry.last_enqueued_slot, status.database_now)}</td>
  <td>${instant(entry.next_run_at, status.database_now)}</td>
  <td>${entry.quarantine !== null ? `<span class="badge error" title="${escapeHtml(`until ${entry.quarantine.until}, ${entry.quarantine.count} failure(s)`)}">quarantined</span>` : entry.problems.length > 0 ? `<span class="badge error">broken</span>` : `<span class="badge ok">ok</span>`}</td>
</tr>`,
    )
    .join("\n");
  return `<table id="entries"><thead><tr><th>Job</th><th>Cron</th><th>Timezone</th><th>Last slot</th><th>Next run</th><th>State</th></tr></thead><tbody>
${rows}
</tbody></table>`;
}

function brokenSection(status: AdminStatus): string {
  if (status.broken.length === 0) return `<p class="muted">Nothing is broken.</p>`;
  return status.broken
    .map(
      (broken) => `<div class="card broken-entry" data-identity="${escapeHtml(broken.identity ?? "")}">
  <strong>${escapeHtml(broken.job ?? "(unknown job)")}</strong> <span class="identity">${escapeHtml(broken.identity ?? "")}</span>
  ${problemList(broken.problems)}
</div>`,
    )
    .join("\n");
}

function waitingSection(status: AdminStatus): string {
  if (status.waiting_for_worker.length === 0) return "";
  const rows = status.waiting_for_worker
    .map((row) => `<tr><td>${escapeHtml(row.job)}</td><td class="num">${escapeHtml(row.count)}</td><td>${instant(row.oldest_since, status.database_now)}</td></tr>`)
    .join("\n");
  return `<h2 id="waiting">Waiting for a worker</h2>
<p class="muted">Ready jobs that no running worker can run: none that serves their queue has registered their name (a rolling deploy's new jobs, until its workers are up).</p>
<table id="waiting-for-worker"><thead><tr><th>Job</th><th class="num">Jobs</th><th>Oldest ready since</th></tr></thead><tbody>
${rows}
</tbody></table>`;
}

function queuesSection(status: AdminStatus): string {
  const queues = Object.entries(status.queues);
  const columns = Object.keys(status.totals);
  const row = (name: string, counts: Readonly<Record<string, number>>) =>
    `<tr><td>${escapeHtml(name)}</td>${columns.map((column) => `<td class="num">${escapeHtml(counts[column] ?? 0)}</td>`).join("")}</tr>`;
  return `<table id="queues"><thead><tr><th>Queue</th>${columns.map((column) => `<th class="num">${escapeHtml(column)}</th>`).join("")}</tr></thead><tbody>
${queues.map(([name, counts]) => row(name, counts)).join("\n")}
${row("all queues", status.totals)}
</tbody></table>`;
}

function failuresSection(failures: readonly FailureTicket[], nowIso: string): string {
  if (failures.length === 0) return `<p class="muted">No failed jobs.</p>`;
  return failures
    .map(
      (failure) => `<div class="card failure" id="failure-${failure.id}">
  <div><strong>${escapeHtml(failure.jobType)}</strong> #${failure.id} · failed ${instant(failure.failedAt.toISOString(), nowIso)}
    · ${failure.attempts}/${failure.maxAttempts} attempts${failure.scheduledFor ? ` · slot ${escapeHtml(failure.scheduledFor.toISOString())}` : ""}
    ${failure.idempotency ? ` · key <code>${escapeHtml(failure.idempotency)}</code>` : ""}</div>
  <pre>${escapeHtml(redact(failure.lastError ?? "(no error recorded)"))}</pre>
  <form method="post" action="scheduler/jobs/${failure.id}/retry"><button type="submit">Retry as a new job</button></form>
</div>`,
    )
    .join("\n");
}

const STYLE = `
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:1rem 1.5rem;color:#1d2330;background:#fafbfc}
h1{font-size:1.4rem;margin:.2rem 0}h2{font-size:1.1rem;margin-top:1.8rem;border-bottom:1px solid #dde1e6;padding-bottom:.2rem}
table{border-collapse:collapse;width:100%;background:#fff}th,td{text-align:left;padding:.35rem .6rem;border-bottom:1px solid #eceff3;vertical-align:top}
th{font-weight:600;color:#4a5468}.num{text-align:right}.identity{font:11px ui-monospace,monospace;color:#6b7485;word-break:break-all}
tr.broken{background:#fff2f2}.badge{border-radius:8px;padding:.05rem .5rem;font-size:12px}.badge.ok{background:#e3f6e8;color:#17612e}
.badge.error{background:#fde2e2;color:#a11}.badge.chore{background:#e6ebf5;color:#34466b}tr.chore td{color:#4a5468}.muted{color:#6b7485}.card{background:#fff;border:1px solid #e3e6eb;border-radius:6px;padding:.6rem .8rem;margin:.5rem 0}
.broken-entry{border-left:4px solid #d33}.failure{border-left:4px solid #e08a00}pre{white-space:pre-wrap;word-break:break-word;background:#f4f5f7;padding:.5rem;margin:.4rem 0}
.problems{margin:.3rem 0;padding-left:1.2rem}.problems .warning{color:#8a5a00}.problems .error{color:#a11}
button{font:inherit;padding:.2rem .7rem;cursor:pointer}`;

/**
 * The Schedule page: one self-contained HTML document, no scripts, every dynamic value escaped.
 * Its URLs are relative to the page's own address, so they keep whatever prefix the browser used:
 * the handler's basePath, a mount prefix the framework stripped before the handler saw the request,
 * or a reverse proxy's. A URL built from basePath would be wrong in the last two cases.
 */
export function renderSchedulePage(status: AdminStatus, failures: readonly FailureTicket[]): string {
  const chores = status.entries.filter((entry) => entry.chore).length;
  const entries = status.entries.length - chores;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Schedule · cronledger · ${escapeHtml(status.namespace)}</title>
<style>${STYLE}</style>
</head>
<body>
<h1>Schedule</h1>
<p class="muted">Namespace <code>${escapeHtml(status.namespace)}</code> · database clock <time datetime="${escapeHtml(status.database_now)}">${escapeHtml(status.database_now)}</time>
· ${entries} entr${entries === 1 ? "y" : "ies"}${chores > 0 ? ` + ${chores} chore${chores === 1 ? "" : "s"}` : ""} · ${status.broken.length} broken
· JSON: <a href="scheduler/status">status</a>, <a href="scheduler/failures">failures</a></p>
<h2>Entries</h2>
${entriesSection(status)}
<h2 id="broken">Broken entries</h2>
${brokenSection(status)}
<h2>Queues</h2>
${queuesSection(status)}
${waitingSection(status)}
<h2 id="failures">Recent failures</h2>
${failuresSection(failures, status.database_now)}
</body>
</html>
`;
}

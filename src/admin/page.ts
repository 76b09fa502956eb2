// The Schedule page as one HTML string: no template engine, no client framework, one small inline
// script allowed by a CSP hash. Longer than most files because the markup, its escaping and its
// stylesheet (light/dark, desktop/phone) must be read together; the data is the status model
// (src/status/model.ts), rendered as it is.
import { createHash } from "node:crypto";
import { dynamicEntryActions, ENTRY_ACTION_NOTICE_PARAMS, ENTRY_ACTIONS_STYLE, entryActions } from "./page-entry-actions.js";
import type { FailureTicket } from "../operators/failures.js";
import type { RetryingJob, RunningJob } from "../operators/operations.js";
import { redact } from "../redact.js";
import { clearQuarantineForm } from "./page-quarantine.js";
import { ENTRY_STATES, type EntryRun, type EntryState } from "../status/health.js";
import { pageOf, type DynamicEntryStatus, type EntryProblem, type EntryStatus, type SchedulerStatus } from "../status/model.js";
import type { ResolvedEntry } from "../schedule/validate.js";
import { dynamicEntryState } from "../schedule/schedules.js";
import { upcomingIndex, upcomingList, UPCOMING_STYLE } from "./page-upcoming.js";
import { documentHead, escapeHtml } from "./html.js";
import { RUNNING_STYLE, runningSection } from "./page-running.js";
import { groupFailures, READABILITY_STYLE } from "./page-failures.js";
import { instant, textWithInstants, wrappable } from "./page-times.js";

export { escapeHtml };

function problemList(problems: readonly EntryProblem[]): string {
  return `<ul class="problems">${problems
    .map((problem) => `<li class="${problem.severity}"><code>${escapeHtml(problem.code)}</code> ${escapeHtml(redact(problem.message))}</li>`)
    .join("")}</ul>`;
}

const CHORE_BADGE = `<span class="badge chore" title="cronledger's own chore, fired once per slot by whichever replica runs start()">chore</span>`;

/**
 * What the page shows besides the status and the failures: retrying jobs, the view it is on and what
 * an action just did. The entries' strips are their `recentRuns` (`status({ runs })`).
 */
export interface SchedulePageExtras {
  /** Running jobs (each with a Stop button): src/admin/page-running.ts. */
  readonly running?: readonly RunningJob[];
  /** Jobs waiting for a retry (each with a Cancel button). */
  readonly retrying?: readonly RetryingJob[];
  /** Only entries in this state. */
  readonly state?: EntryState | null;
  /** 1-based page of entries. */
  readonly page?: number;
  /** What the action that led here did, in words ("Job #12 retried: ..."). */
  readonly notice?: string | null;
  /** Seconds between the page's own refreshes; 0 turns them off. */
  readonly refreshSeconds?: number;
  /** The loaded entries: each row lists its upcoming fire times (src/admin/page-upcoming.ts). */
  readonly upcoming?: readonly ResolvedEntry[];
}

/** Entries per page: the strip query and the HTML stay small whatever the size of the schedule. */
export const PAGE_ENTRIES = 100;
/** The page refreshes itself this often by default (in place, keeping the scroll position). */
export const PAGE_REFRESH_SECONDS = 15;

const STATE_LABELS: Readonly<Record<EntryState, string>> = {
  ok: "ok",
  late: "late",
  locked: "locked",
  never_fired: "never fired",
  failing: "failing",
  retrying: "retrying",
  running: "running",
  quarantined: "quarantined",
  paused: "paused",
  waiting_for_worker: "waiting for worker",
};

function stateBadge(state: EntryState): string {
  return `<span class="badge state-${state}">${escapeHtml(STATE_LABELS[state])}</span>`;
}

const RUN_LABELS: Readonly<Record<EntryRun["kind"], string>> = {
  succeeded: "succeeded",
  skipped: "skipped",
  failed: "failed",
  retrying: "waiting for a retry",
  running: "running",
  queued: "queued",
  held: "held until the entry's running job ends",
  cancelled: "cancelled",
};

/** One run as a cell of the strip; its times and outcome are in its title (shown on hover). */
function runCell(run: EntryRun): string {
  const lines = [
    `job #${run.jobId}: ${run.kind === "skipped" ? (run.finishedAt !== null && run.attempts === 0 ? `skipped (${run.outcome ?? "?"}), never run` : `ended as ${run.outcome ?? "skip"}`) : RUN_LABELS[run.kind]}${run.late ? ", started late" : ""}`,
    `slot ${run.scheduledFor.toISOString()}`,
    ...(run.startedAt ? [`started ${run.startedAt.toISOString()}`] : []),
    ...(run.finishedAt ? [`finished ${run.finishedAt.toISOString()}`] : run.kind === "retrying" ? [`next attempt ${run.runAt.toISOString()}`] : []),
    `attempts ${run.attempts}/${run.maxAttempts}`,
    ...(run.error ? [redact(run.error)] : []),
  ];
  const classes = ["run", `run-${run.kind}`, run.late ? "late" : "", run.retried ? "retried" : ""].filter(Boolean).join(" ");
  return `<span class="${classes}" data-job="${run.jobId}" title="${escapeHtml(lines.join("\n"))}"></span>`;
}

/** The entry's recent runs, oldest on the left, so time runs left to right like the slots. */
function strip(runs: readonly EntryRun[] | null): string {
  if (runs === null || runs.length === 0) return `<span class="strip empty muted">no runs yet</span>`;
  const counts = new Map<string, number>();
  for (const run of runs) counts.set(run.kind, (counts.get(run.kind) ?? 0) + 1);
  const label = `last ${runs.length} runs: ${[...counts].map(([kind, count]) => `${count} ${RUN_LABELS[kind as EntryRun["kind"]]}`).join(", ")}`;
  return `<span class="strip" role="img" aria-label="${escapeHtml(label)}">${[...runs].reverse().map(runCell).join("")}</span>`;
}

function lastSlot(entry: EntryStatus, now: Date): string {
  if (entry.lastEnqueuedSlot !== null) return instant(entry.lastEnqueuedSlot, now);
  if (entry.createdAt !== null) return `<span class="muted">never fired</span> · created ${instant(entry.createdAt, now)}`;
  return `<span class="muted">not seen by a scheduler yet</span>`;
}

/** When it fires next, with its upcoming slots; a paused entry fires none until it is resumed, so it shows none. */
function nextRun(entry: EntryStatus, now: Date, loaded: ResolvedEntry | undefined): string {
  if (entry.pause !== null) return `<span class="muted">none while paused</span>`;
  return `${instant(entry.nextRunAt, now)}${upcomingList(loaded, now, escapeHtml)}`;
}

/** Broken: a problem that stops an entry or its slots (an error); a warning alone (never_matches, no upcoming slot) is not. */
const isBroken = (broken: { readonly problems: readonly EntryProblem[] }) => broken.problems.some((problem) => problem.severity === "error");

function brokenCount(status: SchedulerStatus): string {
  const broken = status.broken.filter(isBroken).length;
  const warned = status.broken.length - broken;
  return `${broken} broken${warned > 0 ? ` · ${warned} with warnings` : ""}`;
}

function entryRow(entry: EntryStatus, now: Date, loaded?: ResolvedEntry): string {
  const classes = [isBroken(entry) ? "broken" : entry.problems.length > 0 ? "warned" : "", entry.chore ? "chore" : "", `state-${entry.state}`].filter(Boolean).join(" ");
  return `<tr class="${classes}" data-identity="${escapeHtml(entry.identity)}" data-state="${entry.state}">
  <td data-label="Job"><strong>${escapeHtml(entry.jobName)}</strong>${entry.chore ? ` ${CHORE_BADGE}` : ""}<div class="identity">${wrappable(entry.identity)}</div></td>
  <td data-label="Schedule"><code>${escapeHtml(entry.cron)}</code> <span class="muted">${escapeHtml(entry.timezone)}</span></td>
  <td data-label="State">${stateBadge(entry.state)}<div class="reason">${textWithInstants(redact(entry.reason), now)}</div>${clearQuarantineForm(entry, escapeHtml)}${entryActions(entry)}</td>
  <td data-label="Recent runs">${strip(entry.recentRuns)}</td>
  <td data-label="Last slot">${lastSlot(entry, now)}</td>
  <td data-label="Next run">${nextRun(entry, now, loaded)}</td>
</tr>`;
}

function pageLink(state: EntryState | null, page: number, text: string): string {
  const params = new URLSearchParams();
  if (state !== null) params.set("state", state);
  if (page > 1) params.set("page", String(page));
  const query = params.toString();
  return `<a href="scheduler${query === "" ? "" : `?${query}`}">${text}</a>`;
}

function stateSummary(status: SchedulerStatus, current: EntryState | null): string {
  const counts = new Map<EntryState, number>();
  for (const entry of status.entries) counts.set(entry.state, (counts.get(entry.state) ?? 0) + 1);
  const parts = ENTRY_STATES.filter((state) => (counts.get(state) ?? 0) > 0).map((state) => {
    const text = `${stateBadge(state)} ${counts.get(state) ?? 0}`;
    return state === current ? `<strong class="current">${text}</strong>` : pageLink(state, 1, text);
  });
  const invalid = status.invalid.length > 0 ? [`<a href="#broken"><span class="badge state-invalid">invalid</span> ${status.invalid.length}</a>`] : [];
  const all = current === null ? `<strong class="current">all ${status.entries.length}</strong>` : pageLink(null, 1, `all ${status.entries.length}`);
  return `<nav class="states" aria-label="entries by state">${[all, ...parts, ...invalid].join(" ")}</nav>`;
}

function entriesSection(status: SchedulerStatus, extras: SchedulePageExtras): string {
  const state = extras.state ?? null;
  const shown = state === null ? status.entries : status.entries.filter((entry) => entry.state === state);
  if (status.entries.length === 0) return `<p class="muted">No schedule entries are loaded in this process.</p>`;
  const { items, page, pages } = pageOf(shown, extras.page ?? 1, PAGE_ENTRIES);
  const loaded = upcomingIndex(extras.upcoming);
  const rows = items.map((entry) => entryRow(entry, status.databaseNow, loaded.get(entry.key))).join("\n");
  const pager =
    pages === 1
      ? ""
      : `<p class="pager">Page ${page} of ${pages} · ${page > 1 ? pageLink(state, page - 1, "previous") : ""} ${page < pages ? pageLink(state, page + 1, "next") : ""}</p>`;
  return `${stateSummary(status, state)}
<table id="entries"><thead><tr><th>Job</th><th>Schedule</th><th>State</th><th>Recent runs</th><th>Last slot</th><th>Next run</th></tr></thead><tbody>
${rows}
</tbody></table>
<p class="legend muted"><span class="run run-succeeded"></span> succeeded <span class="run run-skipped"></span> skipped / no-op
<span class="run run-failed"></span> failed <span class="run run-retrying"></span> waiting for a retry <span class="run run-running"></span> running
<span class="run run-queued"></span> queued <span class="run run-held"></span> held <span class="run run-cancelled"></span> cancelled <span class="run run-succeeded retried"></span> retried
<span class="run run-succeeded late"></span> started late · hover a run for its times</p>
${pager}`;
}

/** Dynamic entries per page: a page of a million entries is this many rows, and the next page is a link. */
export const PAGE_DYNAMIC = 50;

function dynamicLink(prefix: string, after: string | null, text: string): string {
  const params = new URLSearchParams();
  if (prefix !== "") params.set("prefix", prefix);
  if (after !== null) params.set("after", after);
  const query = params.toString();
  return `<a href="scheduler${query === "" ? "" : `?${query}`}#dynamic">${text}</a>`;
}

function dynamicRow(entry: DynamicEntryStatus, now: Date, prefix: string): string {
  const state = dynamicEntryState(entry);
  const lastRun = entry.lastRun === null ? `<span class="muted">no run yet</span>` : `${escapeHtml(entry.lastRun.status)}${entry.lastRun.slot === null ? "" : ` · slot ${instant(entry.lastRun.slot, now)}`}`;
  return `<tr data-key="${escapeHtml(entry.key)}" data-state="${state}">
  <td data-label="Key"><strong>${wrappable(entry.key)}</strong><div class="identity">${wrappable(entry.ledgerKey)}</div></td>
  <td data-label="Job">${escapeHtml(entry.jobName)}</td>
  <td data-label="Schedule"><code>${escapeHtml(entry.cron)}</code> <span class="muted">${escapeHtml(entry.timezone)}</span></td>
  <td data-label="State"><span class="badge dynamic-${state}">${escapeHtml(state)}</span>${dynamicEntryActions(entry, prefix)}</td>
  <td data-label="Recent runs">${strip(entry.recentRuns)}</td>
  <td data-label="Next fire">${instant(entry.nextFireAt, now)}</td>
  <td data-label="Last run">${lastRun}</td>
</tr>`;
}

/** The dynamic entries (`ledger.schedules`): counts by state, a key prefix search and one keyset page, never all of them. */
function dynamicSection(status: SchedulerStatus): string {
  const { counts, prefix, page } = status.dynamic;
  const summary = `<p id="dynamic-counts">${counts.total} stored · ${counts.due} due · ${counts.paused} paused · ${counts.quarantined} quarantined · ${counts.never} never firing again</p>`;
  if (counts.total === 0 && (page === null || page.entries.length === 0) && prefix === "") {
    return `<p class="muted">No dynamic entries are stored (<code>ledger.schedules.upsert</code> creates them).</p>`;
  }
  const search = `<form method="get" action="scheduler#dynamic" role="search" class="dynamic-search"><label>Key prefix <input name="prefix" value="${escapeHtml(prefix)}" placeholder="tenant:42:" maxlength="200"></label> <button type="submit">Search</button>${prefix === "" ? "" : ` ${dynamicLink("", null, "all keys")}`}</form>`;
  if (page === null) return `${summary}\n${search}`;
  if (page.entries.length === 0) return `${summary}\n${search}\n<p class="muted">No key starts with <code>${escapeHtml(prefix)}</code>.</p>`;
  const rows = page.entries.map((entry) => dynamicRow(entry, status.databaseNow, prefix)).join("\n");
  const pager = `<p class="pager">${page.entries.length} entries from <code>${escapeHtml(page.entries[0]!.key)}</code>${page.next === null ? " · last page" : ` · ${dynamicLink(prefix, page.next, "next page")}`}</p>`;
  return `${summary}
${search}
<table id="dynamic-entries"><thead><tr><th>Key</th><th>Job</th><th>Schedule</th><th>State</th><th>Recent runs</th><th>Next fire</th><th>Last run</th></tr></thead><tbody>
${rows}
</tbody></table>
${pager}`;
}

function brokenSection(status: SchedulerStatus): string {
  if (status.broken.length === 0) return `<p class="muted">Nothing is broken.</p>`;
  return status.broken
    .map((broken) => {
      const where =
        broken.invalidIndex !== null
          ? ` <span class="badge state-invalid">invalid: schedule[${broken.invalidIndex}], not running</span>`
          : isBroken(broken)
            ? ""
            : ` <span class="badge warning">warning: it still runs</span>`;
      return `<div class="card broken-entry${broken.invalidIndex === null ? "" : " invalid"}${isBroken(broken) ? "" : " warning-only"}" data-identity="${escapeHtml(broken.identity ?? "")}">
  <strong>${escapeHtml(broken.jobName ?? "(unknown job)")}</strong>${where} <span class="identity">${wrappable(broken.identity ?? "")}</span>
  ${problemList(broken.problems)}
</div>`;
    })
    .join("\n");
}

function waitingSection(status: SchedulerStatus): string {
  if (status.waitingForWorker.length === 0) return "";
  const rows = status.waitingForWorker
    .map((row) => `<tr><td>${escapeHtml(row.jobName)}</td><td class="num">${escapeHtml(row.count)}</td><td>${instant(row.oldestSince, status.databaseNow)}</td></tr>`)
    .join("\n");
  return `<h2 id="waiting">Waiting for a worker</h2>
<p class="muted">Ready jobs that no running worker can run: none that serves their queue has registered their name (a rolling deploy's new jobs, until its workers are up).</p>
<table id="waiting-for-worker"><thead><tr><th>Job</th><th class="num">Jobs</th><th>Oldest ready since</th></tr></thead><tbody>
${rows}
</tbody></table>`;
}

function queuesSection(status: SchedulerStatus): string {
  const queues = Object.entries(status.queues);
  const columns = Object.keys(status.totals);
  const row = (name: string, counts: Readonly<Record<string, number>>) =>
    `<tr><td>${escapeHtml(name)}</td>${columns.map((column) => `<td class="num" data-label="${escapeHtml(column)}">${escapeHtml(counts[column] ?? 0)}</td>`).join("")}</tr>`;
  return `<div class="scroll"><table id="queues"><thead><tr><th>Queue</th>${columns.map((column) => `<th class="num">${escapeHtml(column)}</th>`).join("")}</tr></thead><tbody>
${queues.map(([name, counts]) => row(name, counts)).join("\n")}
${row("all queues", status.totals)}
</tbody></table></div>`;
}

function retryingSection(retrying: readonly RetryingJob[] | undefined, now: Date): string {
  if (retrying === undefined || retrying.length === 0) return `<p class="muted">No job is waiting for a retry.</p>`;
  return retrying
    .map(
      (job) => `<div class="card retrying" id="retrying-${job.id}">
  <div><strong>${escapeHtml(job.jobType)}</strong> #${job.id} · attempt ${job.attempts}/${job.maxAttempts} failed · next attempt ${instant(job.nextAttemptAt, now)}
    ${job.scheduledFor ? ` · slot ${escapeHtml(job.scheduledFor.toISOString())}` : ""}${job.retryOverride ? ` · retry policy <code>${escapeHtml(job.retryOverride)}</code> (given at enqueue)` : ""}</div>
  <pre>${escapeHtml(redact(job.lastError ?? "(no error recorded)"))}</pre>
  <form method="post" action="scheduler/jobs/${job.id}/cancel"><button type="submit" class="danger">Cancel this job</button></form>
</div>`,
    )
    .join("\n");
}

function failuresSection(failures: readonly FailureTicket[], now: Date): string {
  if (failures.length === 0) return `<p class="muted">No failed jobs.</p>`;
  return groupFailures(failures, now, (failure) => {
      const action =
        failure.retriedAs === null
          ? `<form method="post" action="scheduler/jobs/${failure.id}/retry"><button type="submit">Retry as a new job</button></form>`
          : `<p class="retried">Retried as job #${failure.retriedAs.id} (${escapeHtml(failure.retriedAs.status)}).</p>`;
      return `<div class="card failure${failure.retriedAs === null ? "" : " was-retried"}" id="failure-${failure.id}">
  <div><strong>${escapeHtml(failure.jobType)}</strong> #${failure.id} · failed ${instant(failure.failedAt, now)}
    · ${failure.attempts}/${failure.maxAttempts} attempts${failure.retryOverride ? ` (retry policy <code>${escapeHtml(failure.retryOverride)}</code>, given at enqueue)` : ""}${failure.scheduledFor ? ` · slot ${escapeHtml(failure.scheduledFor.toISOString())}` : ""}
    ${failure.idempotency ? ` · key <code>${wrappable(failure.idempotency)}</code>` : ""}</div>
  <pre>${escapeHtml(redact(failure.lastError ?? "(no error recorded)"))}</pre>
  ${action}
</div>`;
  });
}

export const STYLE = `
:root{color-scheme:light dark;--bg:#fafbfc;--fg:#1d2330;--muted:#6b7485;--card:#fff;--line:#e3e6eb;--soft:#eceff3;--head:#4a5468;--pre:#f4f5f7;
--ok:#2f9e55;--okbg:#e3f6e8;--okfg:#17612e;--bad:#d33;--badbg:#fde2e2;--badfg:#a11;--warn:#e08a00;--warnbg:#fff1d6;--warnfg:#7a4b00;
--info:#2f6fd6;--infobg:#e2ecfb;--infofg:#1d4a94;--grey:#9aa3b2;--greybg:#eceff3;--greyfg:#4a5468;--violetbg:#efe4fb;--violetfg:#5b2a93}
@media (prefers-color-scheme:dark){:root{--bg:#14171c;--fg:#e4e7ec;--muted:#98a1b1;--card:#1c2027;--line:#2e343e;--soft:#262b33;--head:#b5bdcb;--pre:#111418;
--okbg:#173d25;--okfg:#8fdcaa;--badbg:#4a1c1c;--badfg:#ffb0b0;--warnbg:#4a3610;--warnfg:#ffd58a;--infobg:#1a2f52;--infofg:#a9c7ff;--greybg:#2a3039;--greyfg:#c2c9d4;
--violetbg:#33234a;--violetfg:#d7bcff}}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1400px;padding:1rem 1.5rem;color:var(--fg);background:var(--bg)}
a{color:var(--info)}h1{font-size:1.4rem;margin:.2rem 0}h2{font-size:1.1rem;margin-top:1.8rem;border-bottom:1px solid var(--line);padding-bottom:.2rem}
table{border-collapse:collapse;width:100%;background:var(--card)}th,td{text-align:left;padding:.35rem .6rem;border-bottom:1px solid var(--soft);vertical-align:top}
th{font-weight:600;color:var(--head)}.num{text-align:right}.identity{font:11px ui-monospace,monospace;color:var(--muted);word-break:break-all}
.reason{font-size:12px;color:var(--muted);margin-top:.2rem;max-width:34rem;overflow-wrap:anywhere}
tr.broken{background:color-mix(in srgb,var(--badbg) 45%,var(--card))}tr.chore td{color:var(--head)}.muted{color:var(--muted)}
.badge{display:inline-block;border-radius:8px;padding:.05rem .5rem;font-size:12px;white-space:nowrap}
.badge.ok,.state-ok.badge{background:var(--okbg);color:var(--okfg)}.badge.error,.state-failing.badge,.state-late.badge,.state-locked.badge,.state-invalid.badge{background:var(--badbg);color:var(--badfg)}
.state-retrying.badge,.state-waiting_for_worker.badge{background:var(--warnbg);color:var(--warnfg)}.state-running.badge{background:var(--infobg);color:var(--infofg)}
.state-never_fired.badge{background:var(--greybg);color:var(--greyfg)}.state-quarantined.badge{background:var(--violetbg);color:var(--violetfg)}
.badge.chore{background:var(--infobg);color:var(--infofg)}
.dynamic-active.badge{background:var(--okbg);color:var(--okfg)}.dynamic-paused.badge,.dynamic-finished.badge{background:var(--greybg);color:var(--greyfg)}.dynamic-quarantined.badge{background:var(--violetbg);color:var(--violetfg)}
.card{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:.6rem .8rem;margin:.5rem 0}
.broken-entry{border-left:4px solid var(--bad)}.broken-entry.warning-only{border-left-color:var(--warn)}.badge.warning{background:var(--warnbg);color:var(--warnfg)}.failure{border-left:4px solid var(--warn)}.failure.was-retried{border-left-color:var(--grey)}.retrying{border-left:4px solid var(--warn)}
pre{white-space:pre-wrap;word-break:break-word;background:var(--pre);padding:.5rem;margin:.4rem 0}
.problems{margin:.3rem 0;padding-left:1.2rem}.problems .warning{color:var(--warnfg)}.problems .error{color:var(--badfg)}
button{font:inherit;padding:.2rem .7rem;cursor:pointer}button.danger{color:var(--badfg)}
.notice{background:var(--okbg);color:var(--okfg);border-radius:6px;padding:.5rem .8rem;margin:.6rem 0}
.states{display:flex;flex-wrap:wrap;gap:.4rem .9rem;margin:.4rem 0 .6rem}.states a{text-decoration:none;color:inherit}.pager{margin:.5rem 0}
.strip{display:inline-flex;flex-wrap:wrap;gap:2px;min-width:14rem;max-width:16rem}
.run{display:inline-block;width:9px;height:18px;border-radius:2px;background:var(--grey);vertical-align:middle}
.run-succeeded{background:var(--ok)}.run-skipped{background:color-mix(in srgb,var(--ok) 45%,var(--card))}.run-failed{background:var(--bad)}
.run-retrying{background:var(--warn)}.run-running{background:var(--info)}.run-queued{background:var(--card);border:1px solid var(--grey)}.run-held{background:var(--card);border:1px dashed var(--info)}.run-cancelled{background:var(--greybg);border:1px dashed var(--grey)}
.run.retried{box-shadow:inset 0 -5px 0 var(--warn)}.run.late{box-shadow:inset 0 5px 0 var(--fg)}.run.late.retried{box-shadow:inset 0 5px 0 var(--fg),inset 0 -5px 0 var(--warn)}
.legend .run{margin:0 .15rem 0 .5rem}.scroll{overflow-x:auto}#refresh-status{font-size:12px}
@media (max-width:700px){body{padding:.6rem .7rem}
#entries thead,#dynamic-entries thead{display:none}#entries,#entries tbody,#entries tr,#entries td,#dynamic-entries,#dynamic-entries tbody,#dynamic-entries tr,#dynamic-entries td{display:block;width:100%}
#entries tr,#dynamic-entries tr{border:1px solid var(--line);border-radius:6px;margin:.5rem 0;padding:.3rem 0;background:var(--card)}
#entries td,#dynamic-entries td{border:0;padding:.2rem .6rem}#entries td::before,#dynamic-entries td::before{content:attr(data-label);display:block;font-size:11px;color:var(--muted);text-transform:uppercase;letter-spacing:.03em}
#entries td[data-label="Schedule"]::before,#entries td[data-label="Last slot"]::before,#entries td[data-label="Next run"]::before,#dynamic-entries td[data-label="Schedule"]::before,#dynamic-entries td[data-label="Next fire"]::before{display:inline;margin-right:.5rem}
.strip{max-width:100%;min-width:0}.reason{max-width:none}}`;

/**
 * The page's one script: it drops the one-off notice from the address (so a
 * reload does not repeat it), then refreshes the page in place every few
 * seconds: it fetches the same URL and swaps <main>, so the scroll position
 * and the browser history stay as they are. Allowed by its hash in the CSP;
 * without it the page is complete, only static.
 */
const SCRIPT = `(() => {
  const url = new URL(location.href);
  const oneOff = ["retried", "as", "created", "cancelled", "was", "refused", "job", "code", "unquarantined", ${ENTRY_ACTION_NOTICE_PARAMS.map((name) => JSON.stringify(name)).join(", ")}];
  if (oneOff.some((name) => url.searchParams.has(name))) {
    for (const name of oneOff) url.searchParams.delete(name);
    history.replaceState(history.state, "", url.pathname + url.search + url.hash);
  }
  const every = Number(document.body.dataset.refresh || "0") * 1000;
  if (!every) return;
  const say = (text) => {
    const status = document.getElementById("refresh-status");
    if (status) status.textContent = text;
  };
  const later = () => setTimeout(refresh, every);
  async function refresh() {
    // An open confirmation (a note being typed) is not swapped away under the operator.
    if (document.hidden || document.querySelector("main details[open]")) return later();
    try {
      const response = await fetch(location.pathname + location.search, { headers: { accept: "text/html" }, credentials: "same-origin", cache: "no-store" });
      if (!response.ok) throw new Error("HTTP " + response.status);
      const next = new DOMParser().parseFromString(await response.text(), "text/html").querySelector("main");
      const current = document.querySelector("main");
      if (next && current) {
        const x = window.scrollX, y = window.scrollY;
        current.replaceWith(document.adoptNode(next));
        window.scrollTo(x, y);
      }
      say("updated " + new Date().toLocaleTimeString());
    } catch (error) {
      say("could not refresh (" + (error && error.message) + "); trying again");
    }
    later();
  }
  later();
})();`;

/** The CSP source that allows SCRIPT and nothing else. */
export const PAGE_SCRIPT_HASH = `'sha256-${createHash("sha256").update(SCRIPT, "utf8").digest("base64")}'`;

/**
 * The Schedule page: one self-contained HTML document, every dynamic value escaped, one script (allowed by its hash).
 * Its URLs are relative to the page's own address, so they keep whatever prefix the browser used:
 * the handler's basePath, a mount prefix the framework stripped before the handler saw the request,
 * or a reverse proxy's. A URL built from basePath would be wrong in the last two cases.
 */
export function renderSchedulePage(status: SchedulerStatus, failures: readonly FailureTicket[], extras: SchedulePageExtras = {}): string {
  const chores = status.entries.filter((entry) => entry.chore).length;
  const entries = status.entries.length - chores;
  const refresh = extras.refreshSeconds ?? PAGE_REFRESH_SECONDS;
  return `${documentHead(`Schedule · cronledger · ${status.namespace}`, STYLE + READABILITY_STYLE + RUNNING_STYLE + UPCOMING_STYLE + ENTRY_ACTIONS_STYLE)}
<body data-refresh="${refresh}">
<h1>Schedule</h1>
${extras.notice ? `<p class="notice" role="status">${escapeHtml(extras.notice)}</p>` : ""}
<main>
<p class="muted">Namespace <code>${escapeHtml(status.namespace)}</code> · database clock <time datetime="${status.databaseNow.toISOString()}">${status.databaseNow.toISOString()}</time>
· ${entries} entr${entries === 1 ? "y" : "ies"}${chores > 0 ? ` + ${chores} chore${chores === 1 ? "" : "s"}` : ""} · ${brokenCount(status)}
· JSON: <a href="scheduler/status">status</a>, <a href="scheduler/failures">failures</a>${refresh > 0 ? ` · <span id="refresh-status">refreshes every ${refresh}s</span>` : ""}</p>
<h2>Entries</h2>
${entriesSection(status, extras)}
<h2 id="dynamic">Dynamic entries</h2>
${dynamicSection(status)}
<h2 id="broken">Broken entries</h2>
${brokenSection(status)}
<h2>Queues</h2>
${queuesSection(status)}
${runningSection(extras.running, status.databaseNow)}
<h2 id="retrying">Waiting for a retry</h2>
${retryingSection(extras.retrying, status.databaseNow)}
${waitingSection(status)}
<h2 id="failures">Recent failures</h2>
${failuresSection(failures, status.databaseNow)}
</main>
<script>${SCRIPT}</script>
</body>
</html>
`;
}

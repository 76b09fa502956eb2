import { randomUUID } from "node:crypto";
import type { EntryStatus } from "../status/model.js";

/**
 * The Schedule page's buttons on an entry: run now, and pause (with a note
 * and who) or resume. Each opens a confirmation first (a <details> holding a
 * form: no script needed, as the page's CSP allows only its own refresh,
 * which waits while a confirmation is open), then posts to the admin API's
 * entry routes (src/admin/entry-actions.ts), which send the browser back to
 * the page saying what was done. A run-now form carries a request id made
 * for this rendering, so a double click makes one job. The chores have no
 * buttons: they cannot be paused or run by hand.
 */

/** The buttons of one entry's row; empty for a chore. */
export function entryActions(entry: EntryStatus): string {
  return entry.chore ? "" : actionButtons({ name: entry.identity, jobName: entry.jobName, paused: entry.pause !== null });
}

/**
 * The same buttons on a dynamic entry's row, named by its key (the admin routes resolve a dynamic key as any entry's
 * name). They carry the key prefix searched, so the page comes back to the same search after the action.
 */
export function dynamicEntryActions(entry: { readonly key: string; readonly jobName: string; readonly paused: unknown }, prefix: string): string {
  return actionButtons({ name: entry.key, jobName: entry.jobName, paused: entry.paused !== null }, { [RETURN_PREFIX_FIELD]: prefix });
}

/** The form field a dynamic row's buttons send their page's key prefix in (src/admin/entry-actions.ts reads it back). */
export const RETURN_PREFIX_FIELD = "return_prefix";

function actionButtons(entry: { readonly name: string; readonly jobName: string; readonly paused: boolean }, back: Record<string, string> = {}): string {
  const name = escapeHtml(entry.name);
  const job = escapeHtml(entry.jobName);
  const hidden = [`<input type="hidden" name="entry" value="${name}">`, ...Object.entries(back).map(([field, value]) => `<input type="hidden" name="${field}" value="${escapeHtml(value)}">`)].join("");
  const runNow = `<details class="confirm"><summary>Run now…</summary>
<form method="post" action="scheduler/entries/trigger">${hidden}<input type="hidden" name="request_id" value="${randomUUID()}">
<p>Run <strong>${job}</strong> now, with its payload? Its overlap policy applies.</p>
<button type="submit">Confirm: run now</button></form></details>`;
  const pauseOrResume =
    !entry.paused
      ? `<details class="confirm"><summary>Pause…</summary>
<form method="post" action="scheduler/entries/pause">${hidden}
<p>Pause <strong>${job}</strong>? Every replica records its slots as skipped until it is resumed; queued and running jobs are left alone.</p>
<label>Note (optional) <input name="note" maxlength="500" placeholder="why, e.g. the incident"></label>
<label>Your name <input name="by" maxlength="64" placeholder="who pauses it"></label>
<button type="submit" class="danger">Confirm: pause</button></form></details>`
      : `<details class="confirm"><summary>Resume…</summary>
<form method="post" action="scheduler/entries/resume">${hidden}
<p>Resume <strong>${job}</strong>? Its next slot fires as usual; the paused slots stay skipped.</p>
<label>Your name <input name="by" maxlength="64" placeholder="who resumes it"></label>
<button type="submit">Confirm: resume</button></form></details>`;
  return `<div class="entry-actions">${pauseOrResume}${runNow}</div>`;
}

/** The notice parameters the entry actions send the page back with: one-off, dropped from the address by the page's script. */
export const ENTRY_ACTION_NOTICE_PARAMS = ["paused", "resumed", "changed", "triggered", "skipped"] as const;

export const ENTRY_ACTIONS_STYLE = `
.entry-actions{display:flex;flex-wrap:wrap;gap:.3rem .8rem;margin-top:.35rem;font-size:12px}
.entry-actions summary{cursor:pointer;color:var(--info)}.entry-actions details[open]{flex-basis:100%}
.entry-actions form{background:var(--soft);border-radius:6px;padding:.4rem .6rem;margin-top:.3rem;display:flex;flex-direction:column;gap:.35rem;max-width:26rem}
.entry-actions p{margin:0}.entry-actions label{display:flex;flex-direction:column;gap:.1rem}.entry-actions input{font:inherit;padding:.2rem .3rem}
.state-paused.badge{background:var(--warnbg);color:var(--warnfg)}tr.state-paused{background:color-mix(in srgb,var(--warnbg) 35%,var(--card))}`;

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

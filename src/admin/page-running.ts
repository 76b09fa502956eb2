// The Schedule page's "Running" section (each running job with a Stop button) and the page that
// confirms a stop, asking why. The confirmation is a page of its own, not a script's dialog: the
// Schedule page allows one script (its refresh, by hash), and a dialog or a form inside <main> would
// be swept away by that refresh while the operator types the reason.
import type { RunningJob } from "../operators/operations.js";
import { redact } from "../redact.js";
import { documentHead, escapeHtml } from "./html.js";

/** Added to the page's stylesheet: the running cards and a link drawn as a button. */
export const RUNNING_STYLE = `
.running{border-left:4px solid var(--info)}.running.stopping{border-left-color:var(--bad)}
a.button{display:inline-block;border:1px solid var(--line);border-radius:4px;padding:.2rem .7rem;text-decoration:none;background:var(--soft);color:inherit}
a.button.danger,.stopping .stop-note{color:var(--badfg)}
.confirm label{display:block;margin:.6rem 0 .2rem}.confirm input[type=text]{font:inherit;width:100%;max-width:36rem;padding:.3rem}
.confirm .actions{display:flex;flex-wrap:wrap;gap:.6rem;align-items:center;margin-top:.8rem}`;

function when(value: Date | null, now: Date): string {
  if (value === null) return `<span class="muted">unknown</span>`;
  const seconds = Math.max(0, Math.round((now.getTime() - value.getTime()) / 1000));
  const amount = seconds < 60 ? `${seconds}s` : seconds < 3_600 ? `${Math.round(seconds / 60)}m` : `${Math.round(seconds / 3_600)}h`;
  return `<time datetime="${value.toISOString()}" title="${value.toISOString()}">${amount} ago</time>`;
}

/** One line about a running job: what, which attempt, since when, where, for which slot. */
function describeJob(job: RunningJob, now: Date): string {
  return `<strong>${escapeHtml(job.jobType)}</strong> #${job.id} · attempt ${job.attempts}/${job.maxAttempts} · started ${when(job.startedAt, now)}
    · worker <code>${escapeHtml(job.worker ?? "?")}</code>${job.scheduledFor ? ` · slot ${escapeHtml(job.scheduledFor.toISOString())}` : ""}`;
}

function stopNote(stop: NonNullable<RunningJob["stop"]>, now: Date): string {
  return `<p class="stop-note">Asked to stop by ${escapeHtml(stop.requestedBy)} ${when(stop.requestedAt, now)}${stop.reason ? `: ${escapeHtml(redact(stop.reason))}` : ""}.
  It ends cancelled when its handler returns, or is failed as killed after the stop grace.</p>`;
}

/** The page's "Running" section: longest-running first, each with a link to confirm a stop (or the stop already asked). */
export function runningSection(running: readonly RunningJob[] | undefined, now: Date): string {
  const heading = `<h2 id="running">Running</h2>`;
  if (running === undefined || running.length === 0) return `${heading}\n<p class="muted">No job is running.</p>`;
  const cards = running.map(
    (job) => `<div class="card running${job.stop ? " stopping" : ""}" id="running-${job.id}">
  <div>${describeJob(job, now)}</div>
  ${job.stop ? stopNote(job.stop, now) : `<a class="button danger" href="scheduler/jobs/${job.id}/stop">Stop this job…</a>`}
</div>`,
  );
  return `${heading}\n${cards.join("\n")}`;
}

/**
 * The confirmation of a stop, at `.../scheduler/jobs/:id/stop`: what the job is, what stopping does, a
 * reason field, and the button that posts the cancel (relative `cancel`, next to this page's address).
 */
export function renderStopConfirmation(id: number, job: RunningJob | undefined, now: Date, style: string): string {
  const back = `<a class="button" href="../../../scheduler#running">Keep it running</a>`;
  let body: string;
  if (job === undefined) {
    body = `<p>Job #${id} is not running (it finished, or never started); there is nothing to stop.</p>\n<p><a href="../../../scheduler#running">Back to the Schedule page</a></p>`;
  } else if (job.stop !== null) {
    body = `<div class="card running stopping"><div>${describeJob(job, now)}</div>${stopNote(job.stop, now)}</div>\n<p>${back.replace("Keep it running", "Back")}</p>`;
  } else {
    body = `<div class="card running"><div>${describeJob(job, now)}</div></div>
<form class="confirm" method="post" action="cancel">
  <p>Its worker aborts the handler's signal within about a second. The job ends <strong>cancelled</strong> when the handler returns,
  and is not retried; a handler that ignores the signal is failed as killed after the stop grace.</p>
  <label for="reason">Why (stored with the request; the handler can read it)</label>
  <input type="text" id="reason" name="reason" maxlength="500" placeholder="runaway import, INC-123">
  <div class="actions"><button type="submit" class="danger">Stop job #${job.id}</button> ${back}</div>
</form>`;
  }
  return `${documentHead(`Stop job #${id} · cronledger`, style + RUNNING_STYLE)}
<body>
<h1>Stop job #${id}?</h1>
${body}
</body>
</html>
`;
}

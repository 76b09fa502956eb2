// Times on the Schedule page: relative ("in 4m", "3h ago") to read at a glance, the exact instant on hover.
import { escapeHtml } from "./html.js";

/** "in 4m", "3h ago", relative to the database clock the page was read at. */
export function relative(target: Date, now: Date): string {
  const deltaS = Math.round((target.getTime() - now.getTime()) / 1000);
  const size = Math.abs(deltaS);
  // Within the second the page was read: "in 0s" reads as a countdown that ran out.
  if (size === 0) return "due now";
  return deltaS >= 0 ? `in ${span(size)}` : `${span(size)} ago`;
}

function span(seconds: number): string {
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3_600) return `${Math.round(seconds / 60)}m`;
  if (seconds < 172_800) return `${Math.round(seconds / 3_600)}h`;
  return `${Math.round(seconds / 86_400)}d`;
}

function timeElement(iso: string, text: string): string {
  return `<time datetime="${iso}" title="${iso}">${escapeHtml(text)}</time>`;
}

export function instant(value: Date | null, now: Date): string {
  if (value === null) return `<span class="muted">never</span>`;
  return timeElement(value.toISOString(), relative(value, now));
}

// An ISO instant as the status model writes it into reasons (toISOString), with the word before it.
const INSTANT_IN_TEXT = /\b(?:(at|since|until|for) )?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)/g;

/** How an instant reads after its preposition: "due at <t>" becomes "due in 4m", "ready since <t>" "ready for 10m". */
function phrase(preposition: string | undefined, when: Date, now: Date): string {
  const future = when.getTime() >= now.getTime();
  const seconds = Math.abs(Math.round((when.getTime() - now.getTime()) / 1000));
  // Within the second the page was read: "slot due now", "due at <t>" as "due now", "since <t>" as "just now".
  if (seconds === 0) return preposition === undefined ? "due now" : preposition === "since" ? "just now" : "now";
  const size = span(seconds);
  if (preposition === "since" && !future) return `for ${size}`;
  if (preposition === "until" && future) return `for another ${size}`;
  if (preposition === "since" || preposition === "until") return `${preposition} ${relative(when, now)}`;
  return relative(when, now);
}

/**
 * A reason (or any text) as HTML, its ISO instants shown relative to `now`
 * with the exact instant in a title (hover) and a datetime attribute.
 * Everything else is escaped; the caller redacts first.
 */
export function textWithInstants(text: string, now: Date): string {
  let html = "";
  let from = 0;
  for (const match of text.matchAll(INSTANT_IN_TEXT)) {
    const iso = match[2] ?? "";
    const when = new Date(iso);
    if (Number.isNaN(when.getTime())) continue;
    html += escapeHtml(text.slice(from, match.index)) + timeElement(when.toISOString(), phrase(match[1], when, now));
    from = match.index + match[0].length;
  }
  return html + escapeHtml(text.slice(from));
}

/**
 * An identity (`job|key|cron|timezone`) or other token list as HTML that
 * wraps at its separators, never inside a job name, a key or a cron field:
 * each token is an inline block that moves to the next line whole (so the
 * browser does not break it at its hyphens), and breaks inside only when it
 * is longer than a line itself.
 */
export function wrappable(text: string): string {
  return text
    .split(/(?<=[|/:,;@ ])/)
    .map((part) => `<span class="token">${escapeHtml(part)}</span>`)
    .join("<wbr>");
}

import type { EntryPauseResult, TriggeredRun } from "../operators/operations.js";
import { InvalidArgumentError } from "../errors.js";
import { RETURN_PREFIX_FIELD } from "./page-entry-actions.js";
import { entryPauseDocument, triggeredDocument, type EntryPauseDocument, type TriggeredDocument } from "../wire/entries.js";

/**
 * The admin API's actions on a schedule entry: `POST
 * /admin/scheduler/entries/pause`, `.../resume` and `.../trigger` (run now;
 * `request_id` makes a double click one job), with the entry named in
 * the body (JSON or a form: an entry's identity holds `|` and `/`, which do
 * not belong in a path). The handler (src/admin/handler.ts) authenticates,
 * refuses cross-site posts and answers errors; this module reads the body,
 * calls the ledger and says what to answer.
 */

/** What the entry actions need of a ledger; a Cronledger has it. */
export interface EntryActionsLedger {
  pause(entry: string, options?: { note?: string | null; by?: string }): Promise<EntryPauseResult>;
  resume(entry: string, options?: { by?: string }): Promise<EntryPauseResult>;
  trigger(entry: string, options?: { by?: string; requestId?: string }): Promise<TriggeredRun>;
}

export const ENTRY_ACTION_PATH = /^\/admin\/scheduler\/entries\/(pause|resume|trigger)$/;

/** Who an admin request says it is: the body's `by`, else the surface. Bounded by the ledger. */
const ADMIN_OPERATOR = "admin";

/** The JSON body each action reads, for the error that says what to send. */
const BODY_EXAMPLES: Readonly<Record<string, string>> = {
  pause: '{"entry": "<key>", "note": "...", "by": "..."}',
  resume: '{"entry": "<key>", "by": "..."}',
  trigger: '{"entry": "<key>", "request_id": "...", "by": "..."}',
};

/** The body's fields, from JSON or a form post. */
async function bodyFields(request: Request, verb: string): Promise<Record<string, string>> {
  const type = request.headers.get("content-type") ?? "";
  if (type.includes("application/json")) {
    const parsed: unknown = await request.json().catch(() => {
      throw new InvalidArgumentError(`The request body is not valid JSON; send ${BODY_EXAMPLES[verb] ?? BODY_EXAMPLES.pause}.`);
    });
    if (typeof parsed !== "object" || parsed === null) throw new InvalidArgumentError("The request body must be a JSON object.");
    return Object.fromEntries(Object.entries(parsed).filter((pair): pair is [string, string] => typeof pair[1] === "string"));
  }
  return Object.fromEntries(new URLSearchParams(await request.text()));
}

/** What an entry action did, for the handler to answer as JSON or as a redirect back to the page. */
export interface EntryActionResult {
  readonly document: EntryPauseDocument | TriggeredDocument;
  /** The query the page shows the outcome with (and the key prefix a dynamic row's button was pressed under). */
  readonly pageQuery: string;
  /** Where on the page to come back to: the static entries, or the dynamic ones when a dynamic row's button was pressed. */
  readonly anchor: "entries" | "dynamic";
}

export async function runEntryAction(ledger: EntryActionsLedger, verb: string, request: Request): Promise<EntryActionResult> {
  const fields = await bodyFields(request, verb);
  const back = backTo(fields);
  const entry = fields.entry?.trim() ?? "";
  if (entry === "") throw new InvalidArgumentError("Name the entry: send `entry` (its key, job name or identity, as the status lists them).");
  const by = fields.by?.trim() || ADMIN_OPERATOR;
  if (verb === "trigger") {
    const requestId = fields.request_id?.trim();
    const run = await ledger.trigger(entry, { by, ...(requestId ? { requestId } : {}) });
    const outcome: Record<string, string> = run.skipped === null ? { triggered: run.identity, job: String(run.jobId ?? ""), created: run.created ? "1" : "0" } : { triggered: run.identity, skipped: run.skipped.detail };
    return { document: triggeredDocument(run), pageQuery: new URLSearchParams({ ...outcome, ...back.query }).toString(), anchor: back.anchor };
  }
  const result = verb === "pause" ? await ledger.pause(entry, { note: fields.note ?? null, by }) : await ledger.resume(entry, { by });
  const pageQuery = new URLSearchParams({ [result.paused ? "paused" : "resumed"]: result.identity, changed: result.changed ? "1" : "0", ...back.query }).toString();
  return { document: entryPauseDocument(result), pageQuery, anchor: back.anchor };
}

/** A dynamic row's button sends the key prefix its page was searched with: the page comes back to that search. */
function backTo(fields: Record<string, string>): { query: Record<string, string>; anchor: "entries" | "dynamic" } {
  const prefix = fields[RETURN_PREFIX_FIELD];
  if (prefix === undefined) return { query: {}, anchor: "entries" };
  return { query: prefix === "" ? {} : { prefix }, anchor: "dynamic" };
}

/** The notice the Schedule page shows after a pause or resume posted from it; null when the query holds none. */
export function entryActionNotice(params: URLSearchParams): string | null {
  const triggered = params.get("triggered");
  if (triggered !== null) {
    const skipped = params.get("skipped");
    if (skipped !== null) return `Run now of ${triggered} was skipped by its overlap policy: ${skipped}.`;
    return params.get("created") === "0"
      ? `Run now of ${triggered} had already been requested: job #${params.get("job") ?? "?"}; nothing new was queued.`
      : `Run now of ${triggered}: job #${params.get("job") ?? "?"} queued.`;
  }
  const paused = params.get("paused");
  const resumed = params.get("resumed");
  const changed = params.get("changed") === "1";
  if (paused !== null) return changed ? `Paused ${paused}: its slots are recorded as skipped until it is resumed.` : `${paused} was already paused; its note was updated.`;
  if (resumed !== null) return changed ? `Resumed ${resumed}: its next slot fires as usual.` : `${resumed} was not paused; nothing changed.`;
  return null;
}

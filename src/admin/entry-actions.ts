import type { EntryPauseResult } from "../operators/operations.js";
import { InvalidArgumentError } from "../errors.js";
import { entryPauseDocument } from "../wire/entries.js";

/**
 * The admin API's actions on a schedule entry: `POST
 * /admin/scheduler/entries/pause` and `.../resume`, with the entry named in
 * the body (JSON or a form: an entry's identity holds `|` and `/`, which do
 * not belong in a path). The handler (src/admin/handler.ts) authenticates,
 * refuses cross-site posts and answers errors; this module reads the body,
 * calls the ledger and says what to answer.
 */

/** What the entry actions need of a ledger; a Cronledger has it. */
export interface EntryActionsLedger {
  pause(entry: string, options?: { note?: string | null; by?: string }): Promise<EntryPauseResult>;
  resume(entry: string, options?: { by?: string }): Promise<EntryPauseResult>;
}

export const ENTRY_ACTION_PATH = /^\/admin\/scheduler\/entries\/(pause|resume)$/;

/** Who an admin request says it is: the body's `by`, else the surface. Bounded by the ledger. */
const ADMIN_OPERATOR = "admin";

/** The body's fields, from JSON or a form post. */
async function bodyFields(request: Request): Promise<Record<string, string>> {
  const type = request.headers.get("content-type") ?? "";
  if (type.includes("application/json")) {
    const parsed: unknown = await request.json().catch(() => {
      throw new InvalidArgumentError("The request body is not valid JSON; send {\"entry\": \"<key>\", \"note\": \"...\", \"by\": \"...\"}.");
    });
    if (typeof parsed !== "object" || parsed === null) throw new InvalidArgumentError("The request body must be a JSON object.");
    return Object.fromEntries(Object.entries(parsed).filter((pair): pair is [string, string] => typeof pair[1] === "string"));
  }
  return Object.fromEntries(new URLSearchParams(await request.text()));
}

/** What an entry action did, for the handler to answer as JSON or as a redirect back to the page. */
export interface EntryActionResult {
  readonly document: ReturnType<typeof entryPauseDocument>;
  /** The query the page shows the outcome with. */
  readonly pageQuery: string;
}

export async function runEntryAction(ledger: EntryActionsLedger, verb: string, request: Request): Promise<EntryActionResult> {
  const fields = await bodyFields(request);
  const entry = fields.entry?.trim() ?? "";
  if (entry === "") throw new InvalidArgumentError("Name the entry: send `entry` (its key, job name or identity, as the status lists them).");
  const by = fields.by?.trim() || ADMIN_OPERATOR;
  const result = verb === "pause" ? await ledger.pause(entry, { note: fields.note ?? null, by }) : await ledger.resume(entry, { by });
  const pageQuery = new URLSearchParams({ [result.paused ? "paused" : "resumed"]: result.identity, changed: result.changed ? "1" : "0" }).toString();
  return { document: entryPauseDocument(result), pageQuery };
}

/** The notice the Schedule page shows after a pause or resume posted from it; null when the query holds none. */
export function entryActionNotice(params: URLSearchParams): string | null {
  const paused = params.get("paused");
  const resumed = params.get("resumed");
  const changed = params.get("changed") === "1";
  if (paused !== null) return changed ? `Paused ${paused}: its slots are recorded as skipped until it is resumed.` : `${paused} was already paused; its note was updated.`;
  if (resumed !== null) return changed ? `Resumed ${resumed}: its next slot fires as usual.` : `${resumed} was not paused; nothing changed.`;
  return null;
}

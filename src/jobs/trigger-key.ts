import { InvalidArgumentError } from "../errors.js";
import { boundKey } from "../keys.js";

/**
 * A run-now's two keys. The request key, `trigger|<request id>|<schedule
 * key>`, is what job_keys guards: the request id alone decides, per entry,
 * so a second request with the same id returns the first one's job whoever
 * sends it (as Temporal's request id does). The job's own idempotency key,
 * `trigger|<request id>|<who>|<schedule key>`, carries who asked to the
 * handler's `ctx.schedule.trigger` without a column of its own. The schedule
 * key comes last in both, so bounding a long key (src/keys.ts) keeps the
 * rest readable.
 */
const PREFIX = "trigger|";
/** What a request id may be: an id a page or a client makes, never free text. */
export const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;
const MAX_BY_CHARS = 64;

function checkRequestId(requestId: string): void {
  if (!REQUEST_ID.test(requestId)) {
    throw new InvalidArgumentError(`A run-now's request id must be 1 to 64 letters, digits or . _ : - (got ${JSON.stringify(requestId)}); a UUID will do.`);
  }
}

/** The key that makes one job of every request with this id for this entry (its ledger key), whoever sends it. */
export function triggerRequestKey(scheduleKey: string, requestId: string): string {
  checkRequestId(requestId);
  return boundKey(`${PREFIX}${requestId}|${scheduleKey}`);
}

/** The job's idempotency key: the request and who asked, for the handler. */
export function triggerIdempotencyKey(requestId: string, by: string, scheduleKey: string): string {
  checkRequestId(requestId);
  const who = by.replace(/\|/g, "/").slice(0, MAX_BY_CHARS) || "?";
  return boundKey(`${PREFIX}${requestId}|${who}|${scheduleKey}`);
}

/** Who triggered a job and with which request, from its idempotency key; null for a job that was not triggered by hand. */
export function parseTriggerKey(key: string | null): { readonly by: string; readonly requestId: string } | null {
  if (key === null || !key.startsWith(PREFIX)) return null;
  const [, requestId, by] = key.split("|");
  return requestId === undefined || by === undefined ? null : { requestId, by };
}

import { InvalidArgumentError } from "../errors.js";
import { boundKey } from "../keys.js";

/**
 * A run-now's idempotency key: `trigger|<request id>|<who>|<schedule key>`.
 * The request id makes a double click one job (the key is the job's
 * idempotency key, guarded by job_keys); who asked travels in it to the
 * handler's `ctx.schedule.trigger` without a column of its own. The schedule
 * key comes last, so bounding a long key (src/keys.ts) keeps the first three
 * readable.
 */
const PREFIX = "trigger|";
/** What a request id may be: an id a page or a client makes, never free text. */
export const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;
const MAX_BY_CHARS = 64;

export function triggerIdempotencyKey(requestId: string, by: string, scheduleKey: string): string {
  if (!REQUEST_ID.test(requestId)) {
    throw new InvalidArgumentError(`A run-now's request id must be 1 to 64 letters, digits or . _ : - (got ${JSON.stringify(requestId)}); a UUID will do.`);
  }
  const who = by.replace(/\|/g, "/").slice(0, MAX_BY_CHARS) || "?";
  return boundKey(`${PREFIX}${requestId}|${who}|${scheduleKey}`);
}

/** Who triggered a job and with which request, from its idempotency key; null for a job that was not triggered by hand. */
export function parseTriggerKey(key: string | null): { readonly by: string; readonly requestId: string } | null {
  if (key === null || !key.startsWith(PREFIX)) return null;
  const [, requestId, by] = key.split("|");
  return requestId === undefined || by === undefined ? null : { requestId, by };
}

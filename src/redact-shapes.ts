/**
 * Secrets recognised by their shape wherever they stand (src/redact.ts
 * handles the ones recognised by the name they are given): JWTs, well-known
 * key prefixes, byte dumps, and runs of hex, base32 and base64 long enough
 * to be key material. What operators need to read keeps its text: UUIDs
 * (dashed), short git SHAs, timestamps, SQLSTATE codes, file paths, trace
 * ids, and the digest that ends a bounded ledger key (docs/decisions.md,
 * "Redaction").
 */

const REDACTED = "[redacted]";

// Every JWS part after the header (a JWE has five); the header always starts with `{"`, base64url `eyJ`.
const JWT = /(?<![A-Za-z0-9])eyJ[A-Za-z0-9_-]{5,}(?:\.[A-Za-z0-9_-]*){1,4}/g;
// Well-known credential prefixes (OpenAI/Anthropic/Stripe, GitHub, Slack, AWS access keys, Google API keys).
const KNOWN_KEY_SHAPES = /\b(?:(?:sk|pk|rk)[-_][A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35})\b/g;

/**
 * Node's dumps of bytes: `<Buffer 8f 1a ... 22 more bytes>`, an
 * ArrayBuffer's `[Uint8Contents]: <8f 1a>`, `Uint8Array(32) [ 143, 26, ... ]`
 * and a Buffer through JSON.stringify, `{"type":"Buffer","data":[143,26]}`.
 * A dump cut short by a bound is redacted to where it stops.
 */
const BUFFER_DUMP = /(<Buffer|\[Uint8Contents\]:\s*<)(?:\s+[0-9a-fA-F]{2})*(?:\s*\.\.\.\s*\d+ more bytes?)?(?:\s*>|$)/g;
// Long dumps span lines, which a JSON string holds as `\n`.
const TYPED_ARRAY_DUMP = /\b((?:Uint8|Uint8Clamped|Int8)Array\(\d+\)\s*\[)(?:[\s\d,.]|\\[nr])*(?:more items?(?:[\s\d,.]|\\[nr])*)?(\]|$)/g;
const JSON_BUFFER = /(\\?"type\\?"\s*:\s*\\?"Buffer\\?"\s*,\s*\\?"data\\?"\s*:\s*)\[[\s\d,]*(?:\]|$)/g;
/** Eight or more hex byte pairs with one separator: a hexdump (`8f 1a 2b ...`), a fingerprint (`8f:1a:...`). */
const SEPARATED_BYTES = /(?<![0-9A-Za-z:-])[0-9A-Fa-f]{2}([ :-])[0-9A-Fa-f]{2}(?:\1[0-9A-Fa-f]{2}){6,}(?![0-9A-Za-z])/g;

/**
 * 32 or more hex digits (16 bytes: an AES key, an HMAC, a session id,
 * ciphertext), whatever surrounds them: `0x…`, bytea's `\x…`, a JSON string.
 * A full git SHA (40) is among them; short SHAs are not.
 */
const HEX_RUN = /(?<![0-9A-Fa-f])[0-9A-Fa-f]{32,}(?![0-9A-Fa-f])/g;
/** The value of a trace-context field, which operators paste into their tracing tool. */
const TRACE_FIELD = /(?:trace|span|request|correlation)[-_.]?id\\?["']?\s*[:=]\s*\\?["']?$/i;
/** W3C traceparent: version-traceid-spanid-flags. */
const TRACEPARENT_BEFORE = /(?:^|[^0-9a-f])[0-9a-f]{2}-$/;
const TRACEPARENT_AFTER = /^-[0-9a-f]{16}-[0-9a-f]{2}(?![0-9a-f])/;

/**
 * Base32 (RFC 4648: TOTP seeds, some API keys): 16 or more upper-case
 * letters and digits 2-7, or lower case with at least one of those digits
 * so that long lower-case words stay.
 */
const BASE32_RUN = /(?<![A-Za-z0-9+/])(?:[A-Z2-7]{16,}|(?=[a-z2-7]*[2-7])[a-z2-7]{16,})={0,6}(?![A-Za-z0-9+/])/g;

// A run of 32+ base64 / base64url characters (24+ bytes: keys, ciphertext, signatures), judged by looksEncoded.
const BASE64_RUN = /(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{32,}={0,2}(?![A-Za-z0-9+/=_-])/g;

/**
 * Encoded bytes, not words: upper case, lower case and digits all present,
 * and few separators. Identifiers (`cronledger_schedule_slots_total`), hex
 * digests (no upper case), paths and kebab-case names (a `/`, `_` or `-`
 * every few characters) keep their text; random base64 has a `+`, `/`, `_`
 * or `-` about once in 32 characters.
 */
function looksEncoded(run: string): boolean {
  if (!/[0-9]/.test(run) || !/[A-Z]/.test(run) || !/[a-z]/.test(run)) return false;
  const separators = run.length - run.replace(/[+/_-]/g, "").length;
  return separators * 8 <= run.length && !looksLikePath(run);
}

/** A path segment that is a word: `fixtures`, `my-app`, `Projects`. */
const WORD_SEGMENT = /^(?:[a-z][a-z0-9_-]*|[A-Z][a-z][a-z0-9_-]*)$/;

/**
 * A file path, such as a checkout under a random temporary directory
 * (`Xk29fLq0aB/test/fixtures/cli/settings`): two slashes or more, and words
 * for at least half of its length. Random base64 has a `/` once in 64
 * characters, and segments of lower-case letters only by rare chance.
 */
function looksLikePath(run: string): boolean {
  const segments = run.split("/");
  if (segments.length < 3) return false;
  const wordLength = segments.filter((segment) => segment.length >= 3 && WORD_SEGMENT.test(segment)).reduce((sum, segment) => sum + segment.length, 0);
  return wordLength * 2 >= run.length;
}

/**
 * A value given to a key-named field (`encryptionKey`, `signing_key`) or
 * written after a secret's name (`invalid signature q8Zk3Pf0aL==`) that can
 * be key material: eight or more base64 / base64url characters that are not
 * a number, a word (`constraint`, `Expired`) or a path. Short base64 is
 * indistinguishable from an identifier by its shape alone, so only a
 * secret-looking name next to it makes it one.
 */
export function looksLikeKeyMaterial(value: string): boolean {
  const token = value.replace(/={1,2}$/, "");
  if (token.length < 8 || !/^[A-Za-z0-9+/_-]+$/.test(token)) return false;
  if (token.length < value.length) return true;
  return !/^(?:\d+|[a-z]+|[A-Z][a-z]+)$/.test(token) && !IDENTIFIER.test(token) && !looksLikePath(token);
}

/**
 * Identifiers, even next to a key's name: a dashed UUID, the date that
 * starts a timestamp, a lower-case slug of three parts or more
 * (`daily-2026-12-02`; random base64url is one by chance once in 10,000).
 */
const IDENTIFIER = /^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|\d{4}-\d{2}-\d{2}(?:T\d{2})?|[a-z0-9]+(?:[-_][a-z0-9]+){2,})$/;

function keepsHexRun(text: string, offset: number, run: string): boolean {
  // A bounded ledger key ends in `~` and the sha256 of the whole key (src/keys.ts): no payload, and operators paste it.
  if (run.length === 64 && text[offset - 1] === "~") return true;
  if (run.length === 32 && TRACEPARENT_BEFORE.test(text.slice(Math.max(0, offset - 4), offset)) && TRACEPARENT_AFTER.test(text.slice(offset + 32, offset + 53))) {
    return true;
  }
  return TRACE_FIELD.test(text.slice(Math.max(0, offset - 40), offset));
}

/** Redacts every secret recognised by its shape. */
export function redactShapes(text: string): string {
  return text
    .replace(JWT, REDACTED)
    .replace(KNOWN_KEY_SHAPES, REDACTED)
    .replace(BUFFER_DUMP, (_whole: string, opening: string) => `${opening} ${REDACTED}>`)
    .replace(TYPED_ARRAY_DUMP, (_whole: string, opening: string) => `${opening} ${REDACTED} ]`)
    .replace(JSON_BUFFER, (_whole: string, opening: string) => `${opening}${REDACTED}`)
    .replace(SEPARATED_BYTES, REDACTED)
    .replace(HEX_RUN, (run: string, offset: number, whole: string) => (keepsHexRun(whole, offset, run) ? run : REDACTED))
    .replace(BASE64_RUN, (run) => (looksEncoded(run) ? REDACTED : run))
    .replace(BASE32_RUN, REDACTED);
}

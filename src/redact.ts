/** Everything stored or shown about an error is at most this long. */
export const MAX_REDACTED_LENGTH = 2_000;

/** What replaces a secret value; redacting already-redacted text leaves it unchanged. */
export const REDACTED = "[redacted]";

const TRUNCATION_MARK = "… [truncated]";

// Redaction scans at most this much: a multi-megabyte error must not stall the worker that stores it.
const MAX_SCANNED_LENGTH = MAX_REDACTED_LENGTH * 8;

/**
 * A `name: value`, `name=value`, `"name": value` or `name {...}` pair. The
 * name is bounded and must start a word, so scanning stays linear; whether it
 * names a secret is decided by SECRET_NAME afterwards.
 */
const NAMED_PAIR = /(?<![\w.-])(\\?["']?)([A-Za-z_][\w.-]{0,79})\1(?:\s*([:=])\s*|\s+(?=[{[]))/g;

// Matched against the whole name, lowercased: `db_password`, `X-Api-Key`, `githubToken`, `Set-Cookie`, `request.body`...
const SECRET_NAME = new RegExp(
  [
    "passw(?:or)?d",
    "pwd",
    "secret",
    "token",
    "api[-_.]?key",
    "access[-_.]?key",
    "private[-_.]?key",
    "authori[sz]ation",
    "(?:^|[-_.])auth$",
    "cookie",
    "session",
    "credential",
    "cipher",
    "signature",
    "jwt",
    "csrf",
    "prompt",
    "payload",
    "(?:^|[-_.])body$",
    "^key$",
  ].join("|"),
);

// Header-shaped values run to the end of the line: `Cookie: a=1; b=2`, `Authorization: Digest user="x", nonce="y"`.
const WHOLE_LINE_NAME = /^(?:proxy-)?authori[sz]ation$|^(?:set-)?cookie$/;

const BEARER = /\b(bearer)\s+(?!\[redacted\])[A-Za-z0-9._~+/=-]+/gi;
// Only base64 that looks like credentials: "Basic authentication failed" keeps its words.
const BASIC = /\b(basic)\s+([A-Za-z0-9+/]{8,}={0,2})(?![\w+/=])/gi;
// The user name may be empty: `redis://:secret@host:6379/0` is how Redis URLs carry a bare password.
const URL_CREDENTIALS = /(\b[a-z][a-z0-9+.-]*:\/\/)[^\s/@:]*:[^\s/@]+@/gi;
const PRIVATE_KEY_BLOCK = /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)/g;
const JWT = /\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g;
// Well-known credential prefixes (OpenAI/Anthropic/Stripe, GitHub, Slack, AWS access keys, Google API keys).
const KNOWN_KEY_SHAPES = /\b(?:(?:sk|pk|rk)[-_][A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35})\b/g;

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

/** End (exclusive) of a quoted string starting at `start`, honouring backslash escapes; the text's end when unterminated. */
function quotedEnd(text: string, start: number, quote: string): number {
  for (let i = start + 1; i < text.length; i += 1) {
    const char = text[i];
    if (char === "\\") i += 1;
    else if (char === quote) return i + 1;
  }
  return text.length;
}

/** End (exclusive) of a JSON-escaped string (`\"...\"`) starting at `start`. */
function escapedQuotedEnd(text: string, start: number): number {
  const close = text.indexOf('\\"', start + 2);
  return close === -1 ? text.length : close + 2;
}

/** End (exclusive) of a bracketed value, nesting and quoted strings included; the text's end when unbalanced. */
function bracketedEnd(text: string, start: number): number {
  let depth = 0;
  for (let i = start; i < text.length; i += 1) {
    const char = text[i];
    if (char === '"' || char === "'") {
      i = quotedEnd(text, i, char) - 1;
    } else if (char === "{" || char === "[") {
      depth += 1;
    } else if (char === "}" || char === "]") {
      depth -= 1;
      if (depth === 0) return i + 1;
    }
  }
  return text.length;
}

// A separator followed by the next `name:` / `name=` pair: where an unquoted `name: value` stops.
const NEXT_PAIR = /[\s,;&]+\\?["']?[A-Za-z_][\w.-]{0,79}\\?["']?\s*[:=]/y;

/**
 * End (exclusive) of an unquoted value. After `=` (query strings, key=value
 * logs) a value is one token. After `:` it is prose-shaped and runs to the
 * end of the line, or to where the next pair starts or a bracket closes:
 * in `password: correct horse battery staple` every word is the secret.
 */
function bareEnd(text: string, start: number, separator: string | undefined, wholeLine: boolean): number {
  if (separator === "=") {
    const word = /[^\s,;&"'}\]]*/y;
    word.lastIndex = start;
    word.exec(text);
    return word.lastIndex;
  }
  const newline = text.slice(start).search(/[\r\n]/);
  const lineEnd = newline === -1 ? text.length : start + newline;
  if (wholeLine) return lineEnd;
  for (let i = start; i < lineEnd; i += 1) {
    const char = text[i] as string;
    if (char === "}" || char === "]") return i;
    if (/[\s,;&]/.test(char)) {
      NEXT_PAIR.lastIndex = i;
      if (NEXT_PAIR.test(text)) return i;
    }
  }
  return lineEnd;
}

/** Replaces the value of every secret-named pair, keeping its name and quotes so the text stays readable. */
function redactNamedValues(text: string): string {
  let output = "";
  let copied = 0;
  NAMED_PAIR.lastIndex = 0;
  for (let match = NAMED_PAIR.exec(text); match !== null; match = NAMED_PAIR.exec(text)) {
    const name = (match[2] ?? "").toLowerCase();
    if (!isSecretName(name)) continue;
    const valueStart = match.index + match[0].length;
    const first = text[valueStart];
    let replacement: string;
    let valueEnd: number;
    if (first === "\\" && text[valueStart + 1] === '"') {
      valueEnd = escapedQuotedEnd(text, valueStart);
      replacement = `\\"${REDACTED}\\"`;
    } else if (first === '"' || first === "'") {
      valueEnd = quotedEnd(text, valueStart, first);
      replacement = `${first}${REDACTED}${first}`;
    } else if (first === "{" || first === "[") {
      valueEnd = bracketedEnd(text, valueStart);
      replacement = REDACTED;
    } else {
      valueEnd = bareEnd(text, valueStart, match[3], match[3] === ":" && WHOLE_LINE_NAME.test(name));
      replacement = REDACTED;
    }
    if (valueEnd === valueStart) continue;
    output += text.slice(copied, valueStart) + replacement;
    copied = valueEnd;
    NAMED_PAIR.lastIndex = valueEnd;
  }
  return output + text.slice(copied);
}

function bound(text: string): string {
  if (text.length <= MAX_REDACTED_LENGTH) return text;
  return `${text.slice(0, MAX_REDACTED_LENGTH - TRUNCATION_MARK.length)}${TRUNCATION_MARK}`;
}

/**
 * The one redaction used wherever an error is stored, logged or shown:
 * values of secret-named fields (authorization, cookies, api keys,
 * passwords, secrets, tokens, sessions, prompts, payload and body dumps,
 * ciphertext, in header, query-string, JSON and escaped-JSON form), bearer
 * and basic credentials, URL credentials (an empty user name too), JWTs,
 * private keys, well-known key shapes and long base64 runs are replaced, and
 * the result is bounded to MAX_REDACTED_LENGTH.
 * Idempotent: redacting its own output changes nothing.
 */
export function redact(text: string): string {
  // Text cut here that leaves a value's brackets or quotes open is redacted to its end, never leaked.
  const scanned = text.length > MAX_SCANNED_LENGTH ? text.slice(0, MAX_SCANNED_LENGTH) : text;
  const cleaned = redactNamedValues(
    scanned
      .replace(PRIVATE_KEY_BLOCK, REDACTED)
      .replace(URL_CREDENTIALS, `$1${REDACTED}@`)
      .replace(BEARER, `$1 ${REDACTED}`)
      .replace(BASIC, (whole: string, scheme: string, value: string) => (/[0-9+/=]/.test(value) ? `${scheme} ${REDACTED}` : whole)),
  )
    .replace(JWT, REDACTED)
    .replace(KNOWN_KEY_SHAPES, REDACTED)
    .replace(BASE64_RUN, (run) => (looksEncoded(run) ? REDACTED : run));
  return bound(cleaned);
}

const MAX_CAUSE_DEPTH = 3;

function describe(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    const label = `${error.name}${typeof code === "string" ? ` [${code}]` : ""}`;
    // Some messages already start with the class name; saying it twice helps nobody.
    return error.message.startsWith(`${error.name}:`) ? `${label}${error.message.slice(error.name.length)}` : `${label}: ${error.message}`;
  }
  if (typeof error === "object" && error !== null) {
    try {
      return JSON.stringify(error) ?? String(error);
    } catch {
      return String(error);
    }
  }
  return String(error);
}

/**
 * An error as stored in `last_error` and logged: its class, code and
 * message, then the messages of up to three causes (where "fetch failed"
 * usually hides the reason), redacted and bounded.
 */
export function redactError(error: unknown): string {
  const parts = [describe(error)];
  let cause = error instanceof Error ? error.cause : undefined;
  for (let depth = 0; cause !== undefined && cause !== null && depth < MAX_CAUSE_DEPTH; depth += 1) {
    parts.push(`caused by ${describe(cause)}`);
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return redact(parts.join("\n"));
}

const MAX_FIELD_DEPTH = 4;

function isSecretName(name: string): boolean {
  const lower = name.toLowerCase();
  // An error class is a label, not a field: "PayloadValidationError [invalid_payload]" keeps its code.
  return SECRET_NAME.test(lower) && !/(?:error|exception)$/.test(lower);
}

function redactValue(value: unknown, depth: number): unknown {
  if (typeof value === "string") return redact(value);
  if (value instanceof Error) return redactError(value);
  if (value === null || typeof value !== "object") return value;
  if (depth >= MAX_FIELD_DEPTH) return REDACTED;
  if (Array.isArray(value)) return value.map((item) => redactValue(item, depth + 1));
  if (value instanceof Date) return value;
  return redactFieldsAt(value as Record<string, unknown>, depth + 1);
}

function redactFieldsAt(fields: Record<string, unknown>, depth: number): Record<string, unknown> {
  const result: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(fields)) result[name] = isSecretName(name) ? REDACTED : redactValue(value, depth);
  return result;
}

/**
 * Log fields with the same rules as `redact`: a secret-named field (password,
 * token, payload, body...) loses its value whatever its type, strings and
 * errors are redacted, and nesting deeper than a few levels is cut.
 */
export function redactFields(fields: Record<string, unknown>): Record<string, unknown> {
  return redactFieldsAt(fields, 0);
}

import { errorChain, type ErrorLike } from "./error-chain.js";
import { looksLikeKeyMaterial, redactShapes } from "./redact-shapes.js";

/** Everything stored or shown about an error is at most this long. */
export const MAX_REDACTED_LENGTH = 2_000;

/** What replaces a secret value; redacting already-redacted text leaves it unchanged. */
export const REDACTED = "[redacted]";

const TRUNCATION_MARK = "… [truncated]";

// Redaction scans at most this much: a multi-megabyte error must not stall the worker that stores it.
const MAX_SCANNED_LENGTH = MAX_REDACTED_LENGTH * 8;

/**
 * A `name: value`, `name=value`, `"name": value`, `name {...}` or
 * `name 'quoted'` pair (`signing secret 'c2Vj...'`, `token "..."`: prose
 * quotes a value as often as it puts a colon before it). The name is bounded
 * and must start a word, so scanning stays linear; whether it names a secret
 * is decided by SECRET_NAME afterwards.
 */
const NAMED_PAIR = /(?<![\w.-])(\\{0,8}["']?)([A-Za-z_][\w.-]{0,79})\1(?:\s*([:=])\s*|\s+(?=[{[])|[ \t]+(?=["']|\\{1,8}"))/g;

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
    "passphrase",
    "mnemonic",
    "hmac",
    "encrypt",
    "signing",
    "(?:^|[-_.])(?:iv|nonce|salt|sig|otp|totp|mfa|pin)$",
  ].join("|"),
);

/**
 * Names ending in `key` (`encryptionKey`, `signing_key`, `X-Client-Key`) that
 * SECRET_NAME leaves alone because most such fields hold identifiers
 * (`idempotency_key`, `sortKey`, a ledger key): their value is redacted only
 * when it can be key material (looksLikeKeyMaterial).
 */
const KEY_NAME = /key$/;

/**
 * A word followed by one token that ends where a word would:
 * `invalid signature q8Zk3Pf0aL==`, `decrypt with key Zm9vYmFyYmF6.` (not
 * `ledger key prod-eu1|job|...`, whose first part is no token).
 */
const PROSE_VALUE = /(?<=(?<![\w.-])([A-Za-z][\w-]{0,40})\s{1,8})[A-Za-z0-9+/_-]{8,}={0,2}(?=[\s,;.:)'"\]}]|$)/g;

// Header-shaped values run to the end of the line: `Cookie: a=1; b=2`, `Authorization: Digest user="x", nonce="y"`.
const WHOLE_LINE_NAME = /^(?:proxy-)?authori[sz]ation$|^(?:set-)?cookie$/;

const BEARER = /\b(bearer)\s+(?!\[redacted\])[A-Za-z0-9._~+/=-]+/gi;
// Only base64 that looks like credentials: "Basic authentication failed" keeps its words.
const BASIC = /\b(basic)\s+([A-Za-z0-9+/]{8,}={0,2})(?![\w+/=])/gi;
// The user name may be empty: `redis://:secret@host:6379/0` is how Redis URLs carry a bare password.
const URL_CREDENTIALS = /(\b[a-z][a-z0-9+.-]*:\/\/)[^\s/@:]*:[^\s/@]+@/gi;
const PRIVATE_KEY_BLOCK = /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)/g;
/** End (exclusive) of a quoted string starting at `start`, honouring backslash escapes; the text's end when unterminated. */
function quotedEnd(text: string, start: number, quote: string): number {
  for (let i = start + 1; i < text.length; i += 1) {
    const char = text[i];
    if (char === "\\") i += 1;
    else if (char === quote) return i + 1;
  }
  return text.length;
}

/**
 * End (exclusive) of a JSON-escaped string opened by `quote` (`\"`, or
 * `\\\"` in JSON inside JSON) at `start`: the first quote behind exactly as
 * many backslashes; one behind more belongs to a string nested deeper.
 */
function escapedQuotedEnd(text: string, start: number, quote: string): number {
  const depth = quote.length - 1;
  for (let at = text.indexOf('"', start + quote.length); at !== -1; at = text.indexOf('"', at + 1)) {
    let backslashes = 0;
    while (text[at - 1 - backslashes] === "\\") backslashes += 1;
    if (backslashes === depth) return at + 1;
  }
  return text.length;
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

const BASE64_TOKEN = /[A-Za-z0-9+/_-]*={0,2}/y;
const FILE_LOCATION = /^:\d+(?::\d+)?(?![\w.])/;

/** End (exclusive) of the base64 token starting at `start`. */
function tokenEnd(text: string, start: number): number {
  BASE64_TOKEN.lastIndex = start;
  BASE64_TOKEN.exec(text);
  return BASE64_TOKEN.lastIndex;
}

/**
 * Replaces the value of every secret-named pair, keeping its name and quotes
 * so the text stays readable; the value of a key-named pair only when it can
 * be key material.
 */
function redactNamedValues(text: string): string {
  let output = "";
  let copied = 0;
  NAMED_PAIR.lastIndex = 0;
  for (let match = NAMED_PAIR.exec(text); match !== null; match = NAMED_PAIR.exec(text)) {
    const name = (match[2] ?? "").toLowerCase();
    const valueStart = match.index + match[0].length;
    // In prose a bare `key "nightly-eu"` names an entry's key far more often than key material: only the latter goes.
    const secret = isSecretName(name) && !(name === "key" && match[3] === undefined && text[valueStart] !== "{" && text[valueStart] !== "[");
    if (!secret && !KEY_NAME.test(name)) continue;
    // `session-store.ts:42:11` in a stack trace is a file and its line, not a field.
    if (match[3] === ":" && FILE_LOCATION.test(text.slice(valueStart - 1, valueStart + 16))) continue;
    const first = text[valueStart];
    let replacement: string;
    let valueEnd: number;
    let value: string;
    const escapedQuote = first === "\\" ? /^\\{1,8}"/.exec(text.slice(valueStart, valueStart + 9))?.[0] : undefined;
    if (escapedQuote !== undefined) {
      valueEnd = escapedQuotedEnd(text, valueStart, escapedQuote);
      replacement = `${escapedQuote}${REDACTED}${escapedQuote}`;
      value = text.slice(valueStart + escapedQuote.length, valueEnd - escapedQuote.length);
    } else if (first === '"' || first === "'") {
      valueEnd = quotedEnd(text, valueStart, first);
      replacement = `${first}${REDACTED}${first}`;
      value = text.slice(valueStart + 1, valueEnd - 1);
    } else if (first === "{" || first === "[") {
      if (!secret) continue;
      valueEnd = bracketedEnd(text, valueStart);
      replacement = REDACTED;
      value = "";
    } else {
      // A key-named value is one base64 token: `encryption_key: q8Zk3Pf0aL==) rejected`.
      valueEnd = secret ? bareEnd(text, valueStart, match[3], match[3] === ":" && WHOLE_LINE_NAME.test(name)) : tokenEnd(text, valueStart);
      replacement = REDACTED;
      value = text.slice(valueStart, valueEnd);
    }
    if (valueEnd === valueStart || (!secret && !looksLikeKeyMaterial(value))) continue;
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
 * ciphertext, signatures, IVs, HMACs, in header, query-string, JSON and
 * escaped-JSON form), values that can be key material next to a key's name
 * (`encryptionKey: q8Zk3Pf0aL==`, `invalid signature q8Zk3Pf0aL==`), bearer
 * and basic credentials, URL credentials (an empty user name too), private
 * keys, and what src/redact-shapes.ts recognises by its shape (JWTs, known
 * key prefixes, byte dumps, hex, base32 and base64 runs) are replaced, and
 * the result is bounded to MAX_REDACTED_LENGTH.
 * Idempotent: redacting its own output changes nothing.
 */
export function redact(text: string): string {
  // Text cut here that leaves a value's brackets or quotes open is redacted to its end, never leaked.
  const scanned = text.length > MAX_SCANNED_LENGTH ? text.slice(0, MAX_SCANNED_LENGTH) : text;
  const named = redactNamedValues(
    scanned
      .replace(PRIVATE_KEY_BLOCK, REDACTED)
      .replace(URL_CREDENTIALS, `$1${REDACTED}@`)
      .replace(BEARER, `$1 ${REDACTED}`)
      .replace(BASIC, (whole: string, scheme: string, value: string) => (/[0-9+/=]/.test(value) ? `${scheme} ${REDACTED}` : whole)),
  );
  const cleaned = redactShapes(
    named.replace(PROSE_VALUE, (token: string, name: string) =>
      (isSecretName(name) || KEY_NAME.test(name.toLowerCase())) && looksLikeKeyMaterial(token) ? REDACTED : token,
    ),
  );
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
 * usually hides the reason; the chain as src/error-chain.ts walks it, so
 * the attempts of an AggregateError count as causes), redacted and bounded.
 */
export function redactError(error: unknown): string {
  const causes: unknown[] = errorChain(error).slice(1, 1 + MAX_CAUSE_DEPTH);
  // The walk follows objects only; a thrown string as the last cause still says something.
  const last = causes.at(-1) ?? error;
  const tail = typeof last === "object" && last !== null ? (last as ErrorLike).cause : undefined;
  if (causes.length < MAX_CAUSE_DEPTH && tail !== undefined && tail !== null && typeof tail !== "object") causes.push(tail);
  return redact([describe(error), ...causes.map((cause) => `caused by ${describe(cause)}`)].join("\n"));
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
  for (const [name, value] of Object.entries(fields)) {
    const keyMaterial = typeof value === "string" && KEY_NAME.test(name.toLowerCase()) && looksLikeKeyMaterial(value);
    result[name] = isSecretName(name) || keyMaterial ? REDACTED : redactValue(value, depth);
  }
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

/** Everything stored or shown about an error is at most this long. */
export const MAX_REDACTED_LENGTH = 2_000;

const SECRET_NAMES = "authorization|proxy-authorization|x-api-key|api[-_]?key|apikey|password|passwd|secret|client[-_]?secret|token|access[-_]?token|refresh[-_]?token|cookie|set-cookie|session|prompt|payload|body";

// `Name: value` / `name=value` / `"name": "value"` pairs whose name looks secret: the value goes.
const NAMED_VALUE = new RegExp(
  `(["']?\\b(?:${SECRET_NAMES})\\b["']?\\s*[:=]\\s*)("(?:[^"\\\\]|\\\\.)*"|'[^']*'|\\{[^}]*\\}|\\[[^\\]]*\\]|[^\\s,;&]+(?:[ \\t]+[^\\s,;&]+)?)`,
  "gi",
);
const BEARER = /\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+/gi;
const URL_CREDENTIALS = /(\b[a-z][a-z0-9+.-]*:\/\/)[^\s/@:]+:[^\s/@]+@/gi;

/**
 * The one redaction used wherever an error is stored, logged or shown:
 * secret-shaped values (authorization headers, api keys, passwords,
 * tokens, cookies, prompts, payload bodies, bearer strings, URL
 * credentials) are replaced and the text is bounded.
 */
export function redact(text: string): string {
  const cleaned = text
    .replace(URL_CREDENTIALS, "$1[redacted]@")
    .replace(BEARER, "$1 [redacted]")
    .replace(NAMED_VALUE, "$1[redacted]");
  if (cleaned.length <= MAX_REDACTED_LENGTH) return cleaned;
  return `${cleaned.slice(0, MAX_REDACTED_LENGTH - 14)}… [truncated]`;
}

/** An error as stored in `last_error`: its class and message, redacted and bounded. */
export function redactError(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return redact(`${error.name}${typeof code === "string" ? ` [${code}]` : ""}: ${error.message}`);
  }
  return redact(String(error));
}

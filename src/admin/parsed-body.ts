/**
 * A request body that the application's framework read before the admin
 * routes (Express's `express.json()`, Fastify's content parsers, Koa's
 * `@koa/bodyparser`, a Hono middleware that called `c.req.json()`): the
 * stream is spent, so the admin routes take the parsed value instead and
 * turn it back into the body the request's content type says, once, here.
 */

/** The body a framework parsed: an object (JSON or a form's fields), a string, bytes; undefined when it parsed none. */
export type ParsedBody = unknown;

/** A form's fields as the page posts them: string values only (a parser's arrays keep their first value). */
function formText(body: object): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(body)) {
    const first: unknown = Array.isArray(value) ? value[0] : value;
    if (typeof first === "string" || typeof first === "number" || typeof first === "boolean") params.append(name, String(first));
  }
  return params.toString();
}

/** The bytes of a parsed body as the request's content type has them; undefined when there is nothing to send. */
export function encodeParsedBody(body: ParsedBody, contentType: string): Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  if (body instanceof Uint8Array) return body;
  if (typeof body === "string") return new TextEncoder().encode(body);
  if (typeof body !== "object") return new TextEncoder().encode(JSON.stringify(body));
  const text = contentType.includes("application/x-www-form-urlencoded") ? formText(body) : JSON.stringify(body);
  return new TextEncoder().encode(text);
}

/** `request` with `body` (already parsed by a framework) as its body, for a request whose own body was read. */
export function withParsedBody(request: Request, body: ParsedBody): Request {
  const bytes = encodeParsedBody(body, request.headers.get("content-type") ?? "");
  const headers = new Headers(request.headers);
  headers.delete("content-length");
  return new Request(request.url, { method: request.method, headers, ...(bytes === undefined ? {} : { body: bytes }) });
}

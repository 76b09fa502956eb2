import type { IncomingMessage, ServerResponse } from "node:http";
import type { AdminHandler } from "./handler.js";
import { encodeParsedBody, type ParsedBody } from "./parsed-body.js";

/**
 * Node's request, with the `body` a framework's body parser put on it
 * (Express's `express.json()` does; for Fastify and Koa, whose parsers keep
 * it on their own request object, the README's examples copy it there).
 */
export type NodeRequest = IncomingMessage & { body?: ParsedBody };

/** A Node `(req, res)` listener: what node:http, Express and (through `reply.raw`) Fastify and Koa hand requests to. */
export type NodeListener = (request: NodeRequest, response: ServerResponse) => void;

export interface NodeListenerOptions {
  /**
   * Host for the request URL when a client sends no Host header; default "host.invalid", which is
   * never taken for loopback (a handler without a token answers only loopback Hosts).
   */
  readonly defaultHost?: string;
  /** Told about a request the handler could not answer (the client gets a 500); log it with care: a database error carries its SQL. */
  readonly onError?: (error: unknown) => void;
}

/**
 * The largest request body read: only a POST's form or JSON (an entry's pause
 * note, src/admin/entry-actions.ts; a running job's stop reason); anything
 * else is not read, and a larger body is refused (413), so a client cannot
 * make the server buffer much.
 */
export const MAX_BODY_BYTES = 16_384;

class BodyTooLarge extends Error {}
class BodyAlreadyRead extends Error {}

/** The body: the stream when nobody read it, else what the framework's parser made of it. */
async function readBody(message: NodeRequest): Promise<Uint8Array | undefined> {
  const type = message.headers["content-type"] ?? "";
  if (message.method !== "POST" || !(type.includes("application/json") || type.includes("application/x-www-form-urlencoded"))) return undefined;
  // A body parser before the routes read the stream to its end; reading it again would give nothing.
  if (message.readableDidRead || message.readableEnded) {
    if (message.body === undefined) throw new BodyAlreadyRead();
    const bytes = encodeParsedBody(message.body, type);
    if (bytes !== undefined && bytes.length > MAX_BODY_BYTES) throw new BodyTooLarge();
    return bytes;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of message as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new BodyTooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function toRequest(message: IncomingMessage, fallbackHost: string, body: Uint8Array | undefined): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(message.headers)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  return new Request(new URL(message.url ?? "/", `http://${message.headers.host ?? fallbackHost}`), {
    method: message.method ?? "GET",
    headers,
    ...(body === undefined ? {} : { body: new Uint8Array(body) }),
  });
}

async function send(response: Response, out: ServerResponse, head: boolean): Promise<void> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  out.writeHead(response.status, headers);
  out.end(head ? undefined : Buffer.from(await response.arrayBuffer()));
}

const BODY_ALREADY_READ =
  "A body parser read this request's body before the admin routes and left nothing in req.body: put what it parsed there (the README's admin routes show it for each framework).\n";

/**
 * The web-standard admin handler (createAdminHandler) as a Node listener,
 * for frameworks that pass Node's request and response: Express
 * (`app.use("/ops", listener)`, which strips the prefix), Fastify
 * (`reply.hijack()`, then `listener(request.raw, reply.raw)`), Koa
 * (`ctx.respond = false`, then `listener(ctx.req, ctx.res)`), node:http.
 * A body the app's body parser already read is taken from `req.body`.
 * The URL it sees is `req.url`, so `basePath` follows the same rule as for
 * the handler: set it when the framework does not strip the mount prefix.
 */
export function toNodeListener(handler: AdminHandler, options: NodeListenerOptions = {}): NodeListener {
  const fallbackHost = options.defaultHost ?? "host.invalid";
  return (message, out) => {
    readBody(message)
      .then(
        (body) => {
          try {
            return toRequest(message, fallbackHost, body);
          } catch {
            out.writeHead(400, { "content-type": "text/plain" }).end("bad request\n");
            return undefined;
          }
        },
        (error: unknown) => {
          if (error instanceof BodyTooLarge) out.writeHead(413, { "content-type": "text/plain", connection: "close" }).end("request body too large\n");
          else if (error instanceof BodyAlreadyRead) out.writeHead(400, { "content-type": "text/plain" }).end(BODY_ALREADY_READ);
          else out.writeHead(400, { "content-type": "text/plain" }).end("bad request\n");
          return undefined;
        },
      )
      .then((request) => {
        if (request === undefined) return;
        return handler(request).then((response) => send(response, out, message.method === "HEAD"));
      })
      .catch((error: unknown) => {
        options.onError?.(error);
        if (!out.headersSent) out.writeHead(500, { "content-type": "text/plain" });
        out.end();
      });
  };
}

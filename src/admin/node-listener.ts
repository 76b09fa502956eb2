import type { IncomingMessage, ServerResponse } from "node:http";
import type { AdminHandler } from "./handler.js";

/** A Node `(req, res)` listener: what node:http, Express and (through `reply.raw`) Fastify hand requests to. */
export type NodeListener = (request: IncomingMessage, response: ServerResponse) => void;

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

async function readBody(message: IncomingMessage): Promise<Buffer | undefined> {
  const type = message.headers["content-type"] ?? "";
  if (message.method !== "POST" || !(type.includes("application/json") || type.includes("application/x-www-form-urlencoded"))) return undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of message as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new BodyTooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function toRequest(message: IncomingMessage, fallbackHost: string, body: Buffer | undefined): Request {
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

/**
 * The web-standard admin handler (createAdminHandler) as a Node listener,
 * for frameworks that pass Node's request and response: Express
 * (`app.use("/ops", listener)`, which strips the prefix), Fastify
 * (`reply.hijack()`, then `listener(request.raw, reply.raw)`), node:http.
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

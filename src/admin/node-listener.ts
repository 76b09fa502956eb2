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
 * The largest request body read: a cancel's reason (a form field or `{"reason": ...}`) is the only body the
 * admin API takes. A longer one is refused (413) as soon as it passes this, so a client cannot make the
 * server buffer more.
 */
export const MAX_BODY_BYTES = 4_096;

/** Reads a POST's body up to MAX_BODY_BYTES; null when it is longer. Other methods have none. */
async function readBody(message: IncomingMessage): Promise<Buffer | null | undefined> {
  if (message.method !== "POST") return undefined;
  const declared = Number(message.headers["content-length"] ?? "0");
  if (declared > MAX_BODY_BYTES) return null;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of message as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return null;
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
  const url = new URL(message.url ?? "/", `http://${message.headers.host ?? fallbackHost}`);
  return new Request(url, { method: message.method ?? "GET", headers, ...(body === undefined || body.length === 0 ? {} : { body: new Uint8Array(body) }) });
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
      .then((body) => {
        if (body === null) {
          // The rest is never read; the connection closes once the answer is sent.
          out.writeHead(413, { "content-type": "text/plain", connection: "close" }).end("request body too large\n");
          return undefined;
        }
        let request: Request;
        try {
          request = toRequest(message, fallbackHost, body);
        } catch {
          out.writeHead(400, { "content-type": "text/plain" }).end("bad request\n");
          return undefined;
        }
        return handler(request).then((response) => send(response, out, message.method === "HEAD"));
      })
      .catch((error: unknown) => {
        options.onError?.(error);
        if (!out.headersSent) out.writeHead(500, { "content-type": "text/plain" });
        out.end();
      });
  };
}

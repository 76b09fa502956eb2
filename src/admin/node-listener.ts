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

/** The admin API takes no request bodies, so none is read: a client cannot make the server buffer one. */
function toRequest(message: IncomingMessage, fallbackHost: string): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(message.headers)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  return new Request(new URL(message.url ?? "/", `http://${message.headers.host ?? fallbackHost}`), { method: message.method ?? "GET", headers });
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
    let request: Request;
    try {
      request = toRequest(message, fallbackHost);
    } catch {
      out.writeHead(400, { "content-type": "text/plain" }).end("bad request\n");
      return;
    }
    handler(request)
      .then((response) => send(response, out, message.method === "HEAD"))
      .catch((error: unknown) => {
        options.onError?.(error);
        if (!out.headersSent) out.writeHead(500, { "content-type": "text/plain" });
        out.end();
      });
  };
}

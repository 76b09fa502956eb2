import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { ConfigError } from "../errors.js";
import { createAdminHandler, normalizeBasePath, type AdminHandler, type AdminHandlerOptions, type AdminLedger } from "./handler.js";
import { logFailure } from "../db/log-failure.js";
import { toNodeListener } from "./node-listener.js";

export interface AdminServerOptions extends AdminHandlerOptions {
  /** 0 picks a free port (see the returned url). */
  readonly port: number;
  /** Interface to bind; default 127.0.0.1. Binding anything else requires a token. */
  readonly host?: string;
}

export interface AdminServer {
  /** Where the routes are served: `${url}/admin/scheduler`. E.g. http://127.0.0.1:9464, or http://127.0.0.1:9464/ops with `basePath: "/ops"`. */
  readonly url: string;
  close(): Promise<void>;
}

const LOOPBACK_BINDS = new Set(["127.0.0.1", "::1", "localhost"]);

/** Serves createAdminHandler on node:http; what `cronledger worker --admin-port` starts. */
export async function startAdminServer(ledger: AdminLedger, options: AdminServerOptions): Promise<AdminServer> {
  const host = options.host ?? "127.0.0.1";
  if (options.token === undefined && !LOOPBACK_BINDS.has(host)) {
    throw new ConfigError(`The admin server binds ${host}, which is not loopback-only: give it a token.`);
  }
  const handler: AdminHandler = createAdminHandler(ledger, options);
  const fallbackHost = `${host.includes(":") ? `[${host}]` : host}:${options.port}`;
  const server = createServer(
    toNodeListener(handler, {
      defaultHost: fallbackHost,
      onError: (error) => logFailure(ledger.logger, "error", "admin server could not answer a request", {}, error),
    }),
  );
  // Slow or idle clients must not pin sockets of a process whose job is running jobs.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `http://${shownHost}:${address.port}${normalizeBasePath(options.basePath)}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

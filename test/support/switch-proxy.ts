import { connect, createServer, type Server, type Socket } from "node:net";

/**
 * A TCP proxy on 127.0.0.1 whose far end can be changed while clients are
 * connected: a process starts against a real PostgreSQL through it, then the
 * test cuts every open connection and sends new ones elsewhere (a stand-in
 * server that refuses them) or nowhere (the port closes: connection refused).
 * That is how a running process meets a database that goes away.
 */
export interface SwitchProxy {
  readonly port: number;
  /** Sends new connections to `port` and cuts the open ones. */
  target(port: number): void;
  /** Stops listening and cuts every open connection: new ones are refused. */
  refuse(): Promise<void>;
  /** Stops passing what the far end sends on the open connections (it piles up unread), as a stalled link does. */
  hold(): void;
  close(): Promise<void>;
}

export async function startSwitchProxy(targetPort: number): Promise<SwitchProxy> {
  let target = targetPort;
  const open = new Set<Socket>();
  const upstreams = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target, "127.0.0.1");
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on("close", () => open.delete(socket));
      socket.on("error", () => socket.destroy());
    }
    upstreams.add(upstream);
    upstream.on("close", () => upstreams.delete(upstream));
    client.pipe(upstream).pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const cut = () => {
    for (const socket of open) socket.destroy();
  };
  const stop = () => new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()));
  return {
    port,
    target(next) {
      target = next;
      cut();
    },
    hold() {
      for (const upstream of upstreams) {
        upstream.unpipe();
        upstream.pause();
      }
    },
    async refuse() {
      const closed = stop();
      cut();
      await closed;
    },
    async close() {
      const closed = stop();
      cut();
      await closed;
    },
  };
}

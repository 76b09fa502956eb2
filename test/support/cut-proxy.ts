import { connect, createServer, type Socket } from "node:net";

/**
 * A TCP proxy on 127.0.0.1 in front of a real PostgreSQL whose link can be
 * cut and restored while the server stays up, as a network partition between
 * one replica and its database: `cut()` resets every open connection and
 * every new one until `restore()`. The replica behind it sees its statements
 * fail and its reconnects refused, the rest of the cluster sees nothing.
 */
export interface CutProxy {
  readonly port: number;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startCutProxy(targetPort: number): Promise<CutProxy> {
  let cut = false;
  const open = new Set<Socket>();
  const server = createServer((client) => {
    if (cut) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort, "127.0.0.1");
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on("close", () => open.delete(socket));
      socket.on("error", () => socket.destroy());
    }
    client.pipe(upstream).pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const address = server.address();
  return {
    port: typeof address === "object" && address ? address.port : 0,
    cut() {
      cut = true;
      for (const socket of open) socket.destroy();
    },
    restore() {
      cut = false;
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of open) socket.destroy();
      await closed;
    },
  };
}

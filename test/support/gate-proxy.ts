import { createServer, type Socket } from "node:net";
import { message } from "./fake-postgres.js";
import { Framer, linkUpstream } from "./fault-proxy.js";

/**
 * A TCP proxy on 127.0.0.1 in front of a real PostgreSQL that can stop one
 * statement between its Bind and its Execute, as a loaded server does when
 * it is slow to plan a statement or is not given the CPU: the statement's
 * transaction has begun (its `now()` is fixed) but its snapshot is not taken
 * yet. `arm()` catches the next Bind a client sends: it is forwarded with a
 * Flush behind it, so the server answers BindComplete at once, and `bound`
 * resolves on that answer; the Execute and everything after it wait until
 * `release()`. Assumes connections without TLS (the suite's server URL).
 */
export interface GateProxy {
  /** `url` (a database on the proxied server) through the proxy. */
  url(url: string): string;
  arm(): Gate;
  close(): Promise<void>;
}

export interface Gate {
  /** The server has bound the caught statement. */
  readonly bound: Promise<void>;
  /** Lets the caught statement's Execute (and what followed it) through. */
  release(): void;
}

const FLUSH = message("H", Buffer.alloc(0));

export async function startGateProxy(serverUrl: string): Promise<GateProxy> {
  const target = new URL(serverUrl);
  const host = target.hostname;
  const port = Number(target.port || 5432);
  const open = new Set<Socket>();
  /** An armed gate no Bind has reached yet. */
  let waiting: { bound: () => void; released: Promise<void> } | undefined;

  const server = createServer((client) => {
    const upstream = linkUpstream(client, { port, host }, open, "destroy");
    const fromClient = new Framer(true);
    const fromServer = new Framer(false);
    /** This connection's caught statement: told when its BindComplete comes back, its later messages held until released. */
    let caught: { bound: (() => void) | undefined; held: Buffer[] | undefined } | undefined;

    client.on("data", (chunk: Buffer) => {
      for (const part of fromClient.push(chunk)) {
        if (caught?.held) {
          caught.held.push(part);
        } else if (waiting && part[0] === "B".charCodeAt(0)) {
          const gate = waiting;
          waiting = undefined;
          const held: Buffer[] = [];
          caught = { bound: gate.bound, held };
          upstream.write(Buffer.concat([part, FLUSH]));
          void gate.released.then(() => {
            if (caught) caught.held = undefined;
            upstream.write(Buffer.concat(held));
          });
        } else {
          upstream.write(part);
        }
      }
    });
    upstream.on("data", (chunk: Buffer) => {
      client.write(chunk);
      // Framed from the first byte, so the BindComplete ("2") is found at a message's start.
      for (const part of fromServer.push(chunk)) {
        if (part[0] === "2".charCodeAt(0) && caught?.bound) {
          caught.bound();
          caught.bound = undefined;
        }
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const address = server.address();
  const proxyPort = typeof address === "object" && address ? address.port : 0;
  return {
    url(url: string) {
      const through = new URL(url);
      through.hostname = "127.0.0.1";
      through.port = String(proxyPort);
      return through.toString();
    },
    arm() {
      let release = () => {};
      const released = new Promise<void>((resolve) => (release = resolve));
      const bound = new Promise<void>((resolve) => (waiting = { bound: resolve, released }));
      return { bound, release };
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of open) socket.destroy();
      await closed;
    },
  };
}

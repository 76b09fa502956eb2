import { connect, createServer, type Socket } from "node:net";
import { errorResponse, message } from "../../test/support/fake-postgres.js";

/**
 * The soak's fault proxy: a TCP proxy on 127.0.0.1 in front of the soak's PostgreSQL, one per replica, that
 * test/support/cut-proxy.ts's cut grows into the faults a replica meets in production:
 *
 * - `cut(ms)`: every open connection reset and every new one refused for `ms` (a partition; the server stays up);
 * - `inject(code, n)`: the next `n` statements that start on an idle connection get the server's ErrorResponse
 *   with `code` instead of reaching it: 57014 (cancelled) and 40001 (serialization failure) as an ERROR with the
 *   connection kept, 57P01 (administrator command) as a FATAL with the connection closed. The statement never
 *   ran, which is what the server says for each of them. ERRORs are only injected outside a transaction (the
 *   server never cancels a COMMIT and leaves the transaction open); the FATAL anywhere, as a terminated backend
 *   rolls its transaction back;
 * - `slow(ms, forMs)`: every answer held up `ms` for `forMs`;
 * - `retarget(port)`: new connections go to another server (a failover: the name in front of the database moves).
 *
 * It counts what it injected, by kind, for the soak's table.
 */
export type InjectedCode = "57P01" | "57014" | "40001";

export interface SoakProxy {
  readonly port: number;
  cut(ms: number): void;
  inject(code: InjectedCode, count: number): void;
  slow(delayMs: number, forMs: number): void;
  retarget(port: number): void;
  /** Ends every fault under way (the quiet drain). */
  calm(): void;
  /** Statements answered with each code so far. */
  readonly injected: Readonly<Record<InjectedCode, number>>;
  close(): Promise<void>;
}

const TEXTS: Readonly<Record<InjectedCode, string>> = {
  "57P01": "terminating connection due to administrator command",
  "57014": "canceling statement due to user request",
  "40001": "could not serialize access due to concurrent update",
};

/** Splits a stream into whole messages: the first one untyped (a startup, SSL or cancel request) when `untyped`. */
class Framer {
  private buffered = Buffer.alloc(0);
  constructor(private untyped: boolean) {}

  push(chunk: Buffer): Buffer[] {
    this.buffered = Buffer.concat([this.buffered, chunk]);
    const messages: Buffer[] = [];
    for (;;) {
      const offset = this.untyped ? 0 : 1;
      if (this.buffered.length < offset + 4) break;
      const length = this.buffered.readInt32BE(offset) + offset;
      if (this.buffered.length < length) break;
      messages.push(this.buffered.subarray(0, length));
      this.buffered = this.buffered.subarray(length);
      this.untyped = false;
    }
    return messages;
  }
}

/** An ERROR the connection survives (severity ERROR), unlike fake-postgres's FATAL. */
function errorMessage(code: InjectedCode): Buffer {
  if (code === "57P01") return errorResponse(code, TEXTS[code]);
  const field = (tag: string, value: string) => Buffer.from(`${tag}${value}\0`, "utf8");
  return message("E", Buffer.concat([field("S", "ERROR"), field("V", "ERROR"), field("C", code), field("M", TEXTS[code]), Buffer.from([0])]));
}

export async function startSoakProxy(firstTarget: number): Promise<SoakProxy> {
  let targetPort = firstTarget;
  const open = new Set<Socket>();
  let cutUntil = 0;
  let slowUntil = 0;
  let slowMs = 0;
  const pending: InjectedCode[] = [];
  const injected: Record<InjectedCode, number> = { "57P01": 0, "57014": 0, "40001": 0 };

  const server = createServer((client) => {
    if (Date.now() < cutUntil) return void client.destroy();
    const upstream = connect(targetPort, "127.0.0.1");
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on("close", () => open.delete(socket));
      socket.on("error", () => socket.destroy());
    }
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());

    // Answers go out in order, each held up while the link is slow.
    let lastOut = 0;
    const toClient = (chunk: Buffer, then?: () => void) => {
      const delay = Date.now() < slowUntil ? slowMs : 0;
      const at = Math.max(Date.now() + delay, lastOut);
      lastOut = at;
      const send = () => {
        if (!client.destroyed) client.write(chunk);
        then?.();
      };
      if (at <= Date.now()) send();
      else setTimeout(send, at - Date.now());
    };

    const fromClient = new Framer(true);
    const fromServer = new Framer(false);
    let session = false;
    let first = true;
    let inStatement = false;
    let inFlight = 0;
    /** The transaction status of the last ReadyForQuery: I idle, T in a transaction, E in a failed one. */
    let status = "I";
    /** A statement held back to be answered with an error, and the messages of it so far. */
    let holding: { code: InjectedCode; messages: Buffer[] } | undefined;

    const answer = (code: InjectedCode) => {
      injected[code] += 1;
      if (code === "57P01") return toClient(errorMessage(code), () => (client.end(), upstream.destroy()));
      toClient(Buffer.concat([errorMessage(code), message("Z", Buffer.from(status))]));
    };

    const forward = (msg: Buffer) => {
      const type = String.fromCharCode(msg[0] as number);
      inStatement = !(type === "S" || type === "Q");
      if (type === "S" || type === "Q") inFlight += 1;
      upstream.write(msg);
    };

    const onMessage = (msg: Buffer) => {
      const type = String.fromCharCode(msg[0] as number);
      if (holding) {
        holding.messages.push(msg);
        if (type === "S") {
          const { code } = holding;
          holding = undefined;
          inStatement = false;
          answer(code);
        } else if (type === "H") {
          // A statement described before it is bound (its answers awaited before the Sync): not one to fault whole.
          const held = holding.messages;
          pending.unshift(holding.code);
          holding = undefined;
          for (const message of held) forward(message);
        }
        return;
      }
      const starts = !inStatement && (type === "P" || type === "B" || type === "Q");
      const next = pending[0];
      if (starts && next !== undefined && inFlight === 0 && (next === "57P01" || status === "I")) {
        pending.shift();
        if (type === "Q") return answer(next);
        holding = { code: next, messages: [msg] };
        return;
      }
      forward(msg);
    };

    client.on("data", (chunk: Buffer) => {
      for (const msg of fromClient.push(chunk)) {
        if (first) {
          first = false;
          // A startup message opens a session; a cancel request (or anything else) passes through as it is.
          session = msg.length > 8 && msg.readInt32BE(4) === 196_608;
          upstream.write(msg);
        } else if (!session) upstream.write(msg);
        else onMessage(msg);
      }
    });

    upstream.on("data", (chunk: Buffer) => {
      if (!session) return toClient(chunk);
      for (const msg of fromServer.push(chunk)) {
        if (msg[0] === 0x5a) {
          inFlight = Math.max(0, inFlight - 1);
          status = String.fromCharCode(msg[5] as number);
        }
      }
      toClient(chunk);
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const address = server.address();
  const resetAll = () => {
    for (const socket of open) socket.destroy();
  };
  return {
    port: typeof address === "object" && address ? address.port : 0,
    injected,
    cut(ms) {
      cutUntil = Date.now() + ms;
      resetAll();
    },
    inject(code, count) {
      for (let i = 0; i < count; i += 1) pending.push(code);
    },
    retarget(port) {
      targetPort = port;
    },
    slow(delayMs, forMs) {
      slowMs = delayMs;
      slowUntil = Date.now() + forMs;
    },
    calm() {
      cutUntil = 0;
      slowUntil = 0;
      pending.length = 0;
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      resetAll();
      await closed;
    },
  };
}

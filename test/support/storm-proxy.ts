import { connect, createServer, type Server, type Socket } from "node:net";
import { message } from "./fake-postgres.js";
import { Framer } from "./fault-proxy.js";

/**
 * A TCP proxy on 127.0.0.1 in front of a real PostgreSQL that injects errors
 * into live connections at random points of the protocol, as a storm of
 * cancels and terminations on a replica's connections does:
 *
 * - "cancel": an ErrorResponse ERROR 57014 ("canceling statement due to
 *   user request") goes to the client in the middle of a statement's answer
 *   (before its first message, between a ParseComplete and a BindComplete,
 *   between two DataRows, after its CommandComplete...), and the server's
 *   messages up to that statement's ReadyForQuery are dropped, the
 *   ReadyForQuery itself passed on: to the client, a statement the server
 *   cancelled wherever it was. A statement described first (Parse/Describe/
 *   Flush, no Sync yet) gets its Sync from the client, as after a real error.
 * - "terminate": an ErrorResponse FATAL 57P01 ("terminating connection due
 *   to administrator command") goes to the client, at a server message
 *   boundary or at any moment between them (idle, mid-startup, mid-statement),
 *   and both sides of the connection are closed, as pg_terminate_backend does.
 *
 * The errors are the proxy's own: the server never learns of a cancel (the
 * statement went through there), as with a cancel that arrives too late.
 */
export type StormFault = "cancel" | "terminate";

export interface Injection {
  readonly fault: StormFault;
  /** The connection, numbered from 1 in the order the proxy accepted them. */
  readonly connection: number;
  /** Where in the protocol: `idle`, `startup`, `before <type> (message <n> of the answer)`, `waiting for the answer`. */
  readonly point: string;
  readonly at: number;
}

export interface StormPlan {
  readonly cancels: number;
  readonly terminations: number;
  /** The mean time between two injections. */
  readonly everyMs: number;
}

export interface StormProxy {
  readonly port: number;
  readonly injections: readonly Injection[];
  /** Injects the plan's faults, each on a connection picked at random; resolves once all went out. */
  storm(plan: StormPlan): Promise<void>;
  close(): Promise<void>;
}

const CANCEL_REQUEST = 80_877_102;
const READY_FOR_QUERY = "Z";

function errorMessage(severity: "ERROR" | "FATAL", code: string, text: string): Buffer {
  const field = (tag: string, value: string) => Buffer.from(`${tag}${value}\0`, "utf8");
  return message("E", Buffer.concat([field("S", severity), field("V", severity), field("C", code), field("M", text), Buffer.from([0])]));
}

const CANCELLED = errorMessage("ERROR", "57014", "canceling statement due to user request");
const TERMINATED = errorMessage("FATAL", "57P01", "terminating connection due to administrator command");

/** One client connection and its upstream, with what the proxy knows of where their protocol stands. */
class Session {
  started = false;
  /** Syncs and simple queries forwarded whose ReadyForQuery has not come back. */
  syncs = 0;
  /** A Flush went out with no Sync after it: a statement described first awaits its description. */
  flushed = false;
  /** Messages of the current answer passed to the client so far. */
  answered = 0;
  /** A cancel was injected: the server's messages are dropped up to the next ReadyForQuery. */
  dropping = false;
  ended = false;
  /** An armed fault fires at the server message this many messages from now. */
  armed: { fault: StormFault; countdown: number; fired: (injection: Injection) => void } | undefined;

  constructor(
    readonly number: number,
    readonly client: Socket,
    readonly upstream: Socket,
  ) {}

  get statementOpen(): boolean {
    return this.started && (this.syncs > 0 || this.flushed);
  }

  fromClient(data: Buffer): void {
    if (this.ended) return;
    const type = String.fromCharCode(data[0] as number);
    if (type === "S" || type === "Q") {
      this.syncs += 1;
      this.flushed = false;
    } else if (type === "H") this.flushed = true;
    this.upstream.write(data);
  }

  fromServer(data: Buffer): void {
    if (this.ended) return;
    const type = String.fromCharCode(data[0] as number);
    const armed = this.armed;
    if (armed && !this.dropping && (armed.fault === "terminate" || this.statementOpen)) {
      armed.countdown -= 1;
      if (armed.countdown <= 0) this.fire(!this.started ? "startup" : this.statementOpen ? `before ${type} (message ${this.answered + 1} of the answer)` : `idle, before ${type}`);
      if (this.ended) return;
    }
    if (type === READY_FOR_QUERY) {
      if (this.started) this.syncs = Math.max(0, this.syncs - 1);
      this.started = true;
      this.answered = 0;
      if (this.dropping) this.dropping = false;
      this.client.write(data);
      return;
    }
    if (this.dropping) return;
    if (this.statementOpen) this.answered += 1;
    this.client.write(data);
  }

  /** Injects the armed fault now; `point` says where the protocol stood. */
  fire(point: string): void {
    const armed = this.armed;
    if (!armed || this.ended) return;
    this.armed = undefined;
    if (armed.fault === "cancel") {
      this.client.write(CANCELLED);
      this.dropping = true;
    } else {
      this.ended = true;
      this.client.end(TERMINATED);
      this.upstream.destroy();
    }
    armed.fired({ fault: armed.fault, connection: this.number, point, at: Date.now() });
  }
}

export async function startStormProxy(serverUrl: string, random: () => number = Math.random): Promise<StormProxy> {
  const target = new URL(serverUrl);
  const host = target.hostname;
  const port = Number(target.port || 5432);
  const injections: Injection[] = [];
  const sockets = new Set<Socket>();
  const sessions = new Set<Session>();
  let accepted = 0;

  const server: Server = createServer((client) => {
    const upstream = connect(port, host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => socket.destroy());
    }
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.end());
    const fromClient = new Framer(true);
    const fromServer = new Framer(false);
    let session: Session | undefined;
    let passThrough = false;
    accepted += 1;
    const number = accepted;

    client.on("data", (chunk: Buffer) => {
      if (passThrough) return void upstream.write(chunk);
      for (const data of fromClient.push(chunk)) {
        if (session) session.fromClient(data);
        else if (data.length === 16 && data.readInt32BE(4) === CANCEL_REQUEST) {
          // postgres.js's own cancel requests pass untouched.
          passThrough = true;
          upstream.write(data);
        } else {
          session = new Session(number, client, upstream);
          sessions.add(session);
          const ended = session;
          client.on("close", () => sessions.delete(ended));
          upstream.write(data);
        }
      }
    });
    upstream.on("data", (chunk: Buffer) => {
      if (!session) return void client.write(chunk);
      for (const data of fromServer.push(chunk)) session.fromServer(data);
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const address = server.address();

  /** Arms `fault` on a random connection that can take it; resolves once it fired (re-armed elsewhere if it did not soon). */
  const inject = async (fault: StormFault): Promise<void> => {
    for (;;) {
      const candidates = [...sessions].filter((session) => !session.ended && !session.armed && (fault === "terminate" || session.started));
      const session = candidates[Math.floor(random() * candidates.length)];
      if (session === undefined) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        continue;
      }
      const fired = await new Promise<boolean>((resolve) => {
        // Half fire at a server message 1-4 messages ahead (mid-answer), half at once if the protocol allows.
        const timer = setTimeout(() => {
          if (session.armed === armed) session.armed = undefined;
          resolve(false);
        }, 200);
        const armed = {
          fault,
          countdown: 1 + Math.floor(random() * 4),
          fired: (injection: Injection) => {
            clearTimeout(timer);
            injections.push(injection);
            resolve(true);
          },
        };
        session.armed = armed;
        if (random() < 0.5) {
          const now = !session.started ? "startup" : session.statementOpen ? "waiting for the answer" : "idle";
          if (fault === "terminate" || session.statementOpen) session.fire(now);
        }
      });
      if (fired) return;
    }
  };

  return {
    port: typeof address === "object" && address ? address.port : 0,
    injections,
    async storm(plan) {
      const left = { cancel: plan.cancels, terminate: plan.terminations };
      while (left.cancel + left.terminate > 0) {
        await new Promise((resolve) => setTimeout(resolve, random() * 2 * plan.everyMs));
        const fault: StormFault = random() * (left.cancel + left.terminate) < left.cancel ? "cancel" : "terminate";
        left[fault] -= 1;
        await inject(fault);
      }
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

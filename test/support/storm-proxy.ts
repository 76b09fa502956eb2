import { createServer, type Server, type Socket } from "node:net";
import { message } from "./fake-postgres.js";
import { Framer, linkUpstream } from "./fault-proxy.js";

/**
 * A TCP proxy on 127.0.0.1 in front of a real PostgreSQL that injects errors
 * into live connections at random points of the protocol, as a storm of
 * cancels and terminations on a replica's connections does:
 *
 * - "cancel": an ErrorResponse ERROR 57014 ("canceling statement due to
 *   user request") goes to the client in the middle of a statement's answer
 *   (before its first message, between a ParseComplete and a BindComplete,
 *   between two DataRows, in place of its CommandComplete...), and the server's
 *   messages up to that statement's ReadyForQuery are dropped, the
 *   ReadyForQuery itself passed on: to the client, a statement the server
 *   cancelled wherever it was. A statement described first (Parse/Describe/
 *   Flush, no Sync yet) gets its Sync from the client, as after a real error.
 * - "terminate": an ErrorResponse FATAL 57P01 ("terminating connection due
 *   to administrator command") goes to the client, at a server message
 *   boundary or at any moment between them (idle, mid-startup, mid-statement),
 *   and both sides of the connection are closed, as pg_terminate_backend does.
 *
 * A cancel fails the statement on the server too: the proxy holds each Sync
 * until the Execute before it is answered, and slips an Execute of a missing
 * portal ahead of it, so the implicit transaction rolls back. It lands only
 * on the oldest statement the client waits for, as a real cancel does.
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
  /** The connections still open, with where their protocol stands and their last messages. */
  describe(): string[];
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
/** An Execute of a portal that does not exist: the server fails the statement's implicit transaction and skips to the Sync. */
const POISON = message("E", Buffer.concat([Buffer.from("cl_storm_poison\0"), Buffer.alloc(4)]));
const FLUSH = message("H", Buffer.alloc(0));
/** The server's messages that end an Execute's answer: CommandComplete, ErrorResponse, EmptyQueryResponse, PortalSuspended. */
const RESULT_END = new Set(["C", "E", "I", "s"]);

/** One client connection and its upstream, with what the proxy knows of where their protocol stands. */
class Session {
  started = false;
  /** Syncs and simple queries forwarded whose ReadyForQuery has not come back. */
  syncs = 0;
  /** A Flush went out with no Sync after it: a statement described first awaits its description. */
  flushed = false;
  /**
   * An Execute went out and its Sync is held here until the server has answered the Execute, so a cancel can still
   * fail the statement on the server: until the Sync, its implicit transaction is not committed.
   */
  executing = false;
  /** The Sync held, and the client's messages after it, in order. */
  held: Buffer[] | undefined;
  /** Messages of the current answer passed to the client so far. */
  answered = 0;
  /** A cancel was injected: the server's messages are dropped up to the next ReadyForQuery. */
  dropping = false;
  ended = false;
  /** The type of the last message the server sent, to keep a Describe's two answers together. */
  private lastFromServer = "";
  /** The last messages each way (`c:P`, `s:D`) and injections, for a test's failure report. */
  readonly trail: string[] = [];
  /** An armed fault fires at the server message this many messages from now. */
  armed: { fault: StormFault; countdown: number; fired: (injection: Injection) => void } | undefined;

  constructor(
    readonly number: number,
    readonly client: Socket,
    readonly upstream: Socket,
  ) {}

  /**
   * A statement the server has not committed yet is under way, and it is the oldest one the client waits for: a
   * cancel can land on it. With a Sync forwarded and its ReadyForQuery still to come (`syncs`), an earlier statement
   * is still being answered: a cancel then ended the dropping at that statement's ReadyForQuery, and the Execute
   * meant to fail the later one reached the server after it, so the later statement's answer came through with a
   * 34000 (portal "cl_storm_poison" does not exist) and its Sync stayed held behind an Execute the server, discarding
   * until a Sync, never answered: the connection hung in the proxy (1 storm run of 9 with small payloads).
   */
  get cancellable(): boolean {
    return this.started && !this.dropping && this.syncs === 0 && (this.executing || this.flushed);
  }

  note(event: string): void {
    this.trail.push(event);
    if (this.trail.length > 40) this.trail.shift();
  }

  fromClient(data: Buffer): void {
    if (this.ended) return;
    this.note(`c:${String.fromCharCode(data[0] as number)}`);
    this.fromHeld(data);
  }

  /** A client message in order: behind a held Sync, or on its way. */
  private fromHeld(data: Buffer): void {
    if (this.held) this.held.push(data);
    else this.forward(data);
  }

  private forward(data: Buffer): void {
    const type = String.fromCharCode(data[0] as number);
    if (type === "E" && this.started) this.executing = true;
    if (type === "S" && this.executing && !this.dropping) {
      this.held = [data];
      // The server keeps its answer in its buffer until a Sync or a Flush: this one sends it without committing.
      this.upstream.write(FLUSH);
      return;
    }
    if (type === "S" || type === "Q") {
      this.syncs += 1;
      this.flushed = false;
      this.executing = false;
    } else if (type === "H") this.flushed = true;
    this.upstream.write(data);
  }

  /** The Execute was answered: the held Sync goes, and what the client sent after it (which may hold the next Sync). */
  private release(): void {
    const held = this.held ?? [];
    this.held = undefined;
    this.executing = false;
    for (const data of held) this.fromHeld(data);
  }

  fromServer(data: Buffer): void {
    if (this.ended) return;
    const type = String.fromCharCode(data[0] as number);
    this.note(`s:${type}${this.dropping ? "(dropped)" : ""}`);
    const armed = this.armed;
    // A Describe's ParameterDescription and its RowDescription (or NoData) leave the server as one answer: a real
    // cancel never lands between them. (postgres.js 3.4 caches a statement at its ParameterDescription, so an error
    // there would leave it cached without columns and its next use failing with a TypeError.)
    const describing = this.lastFromServer === "t" && (type === "T" || type === "n");
    this.lastFromServer = type;
    if (armed && (armed.fault === "terminate" || (this.cancellable && !describing))) {
      armed.countdown -= 1;
      if (armed.countdown <= 0) {
        this.fire(!this.started ? "startup" : this.syncs > 0 || this.executing || this.flushed ? `before ${type} (message ${this.answered + 1} of the answer)` : `idle, before ${type}`);
      }
      if (this.ended) return;
    }
    if (type === READY_FOR_QUERY) {
      if (this.started) this.syncs = Math.max(0, this.syncs - 1);
      this.started = true;
      this.answered = 0;
      this.dropping = false;
      this.client.write(data);
      return;
    }
    if (!this.dropping) {
      this.answered += 1;
      this.client.write(data);
    }
    if (this.held && RESULT_END.has(type)) this.release();
  }

  /** Injects the armed fault now; `point` says where the protocol stood. */
  fire(point: string): void {
    const armed = this.armed;
    if (!armed || this.ended) return;
    this.armed = undefined;
    this.note(`inject ${armed.fault}`);
    if (armed.fault === "cancel") {
      this.client.write(CANCELLED);
      this.dropping = true;
      // Ahead of the held Sync: the statement fails on the server too, and its answer is dropped up to the ReadyForQuery.
      this.upstream.write(POISON);
      // Nothing the server still sends ends the Execute for the client now: the Sync goes.
      if (this.held) this.release();
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
    const upstream = linkUpstream(client, { port, host }, sockets, "end");
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
          const now = !session.started ? "startup" : session.syncs > 0 || session.executing || session.flushed ? "waiting for the answer" : "idle";
          if (fault === "terminate" || session.cancellable) session.fire(now);
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
    describe: () =>
      [...sessions].map(
        (session) =>
          `#${session.number} started=${session.started} syncs=${session.syncs} flushed=${session.flushed} executing=${session.executing} held=${session.held?.length ?? 0} dropping=${session.dropping} ended=${session.ended}: ${session.trail.join(" ")}`,
      ),
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

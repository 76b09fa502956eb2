import { connect, createServer, type Server, type Socket } from "node:net";
import postgres from "postgres";
import { message as typedMessage } from "./fake-postgres.js";

/**
 * A TCP proxy on 127.0.0.1 in front of a real PostgreSQL that does something
 * to chosen statements of each new connection, with the server's own answers:
 *
 * - "terminate": the statement is held back and the connection's backend is
 *   ended with pg_terminate_backend: the server sends its FATAL 57P01
 *   "terminating connection due to administrator command" and closes, while
 *   the client waits for the statement (and anything it sent after it);
 * - "cancel": the statement is held back and a `select pg_sleep(60)` runs in
 *   its place on the backend; once it runs, a real CancelRequest (with the
 *   backend's key) cancels it, and the server's ErrorResponse (ERROR 57014
 *   "canceling statement due to user request") and ReadyForQuery go to the
 *   client as the answer to its statement. A cancel can only stop a statement
 *   that is running, so the sleep makes it land every time; to the client it
 *   is a statement cancelled before its first reply, which the server also
 *   answers with that error and nothing else.
 *
 * Cancel requests (postgres.js's own, from the client) pass through untouched.
 */
export type Fault = "terminate" | "cancel";

export interface FaultRecord {
  readonly connection: number;
  readonly fault: Fault;
  /** The SQL of every statement the fault swallowed (a termination takes what was pipelined behind too). */
  readonly statements: string[];
}

export interface FaultProxy {
  readonly port: number;
  readonly faults: readonly FaultRecord[];
  /** From now on, `plan` decides: connections are numbered (from 1) by their first statement after this call. */
  arm(plan: FaultPlan): void;
  /** Connections numbered by the plan so far. */
  planned(): number;
  close(): Promise<void>;
}

/** What happens to the statement numbered `statement` (from 1, after arming) of the connection numbered `connection`. */
export type FaultPlan = (connection: number, statement: number) => Fault | undefined;

const CANCEL_REQUEST = 80_877_102;

/** Splits a stream into whole messages: the first one untyped (a startup or cancel request) when `untyped`. */
export class Framer {
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

/** The SQL of a Parse or simple Query message; a Bind of a prepared statement carries none. */
function statementText(message: Buffer): string | undefined {
  const type = String.fromCharCode(message[0] as number);
  if (type === "Q") return message.toString("utf8", 5, message.indexOf(0, 5));
  if (type !== "P") return undefined;
  const nameEnd = message.indexOf(0, 5);
  return message.toString("utf8", nameEnd + 1, message.indexOf(0, nameEnd + 1));
}

const PREPARED = "(a prepared statement)";

export async function startFaultProxy(serverUrl: string): Promise<FaultProxy> {
  const target = new URL(serverUrl);
  const host = target.hostname;
  const port = Number(target.port || 5432);
  const admin = postgres(serverUrl, { max: 2, onnotice: () => {} });
  const faults: FaultRecord[] = [];
  const sockets = new Set<Socket>();
  let plan: FaultPlan | undefined;
  let planned = 0;

  const sendCancel = (pid: number, secret: number) => {
    const request = Buffer.alloc(16);
    request.writeInt32BE(16, 0);
    request.writeInt32BE(CANCEL_REQUEST, 4);
    request.writeUInt32BE(pid, 8);
    request.writeUInt32BE(secret, 12);
    const canceller = connect(port, host, () => canceller.end(request));
    canceller.on("error", () => canceller.destroy());
  };

  const server: Server = createServer((client) => {
    const upstream = linkUpstream(client, { port, host }, sockets, "end");

    const fromClient = new Framer(true);
    const fromServer = new Framer(false);
    let kind: "unknown" | "session" | "cancel" = "unknown";
    let backend = { pid: 0, secret: 0 };
    let ready = false;
    let number: number | undefined;
    let statements = 0;
    /** The client is in the middle of a statement (its messages up to Sync). */
    let inStatement = false;
    let current = PREPARED;
    /** Statements forwarded whose ReadyForQuery has not come back, in order. */
    const inFlight: string[] = [];
    /** A termination is under way: everything the client sends is swallowed. */
    let dropping: FaultRecord | undefined;
    /** A cancel under way: the statement held back, whether it is whole, whether the sleep runs, what the client sent since. */
    let cancelling: { text: string; whole: boolean; sleeping: boolean; describedFirst: boolean; synced: boolean; answer?: Buffer; queued: Buffer[] } | undefined;

    const sleepThenCancel = async () => {
      if (!cancelling || cancelling.sleeping) return;
      cancelling.sleeping = true;
      upstream.write(typedMessage("Q", Buffer.from("select pg_sleep(60)\0")));
      // A cancel stops a running statement only: wait until the sleep runs.
      for (let tries = 0; tries < 5_000; tries += 1) {
        const [row] = await admin<{ state: string | null; query: string }[]>`select state, query from pg_stat_activity where pid = ${backend.pid}`;
        if (row === undefined) return;
        if (row.state === "active" && row.query.includes("pg_sleep")) break;
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      sendCancel(backend.pid, backend.secret);
    };

    const answerCancelled = () => {
      if (!cancelling?.answer || !cancelling.synced) return;
      client.write(cancelling.answer);
      const queued = cancelling.queued;
      cancelling = undefined;
      inStatement = false;
      for (const message of queued) fromClientMessage(message);
    };

    function fromClientMessage(message: Buffer): void {
      const type = String.fromCharCode(message[0] as number);
      const text = statementText(message);
      if (dropping) {
        if (text !== undefined) dropping.statements.push(text);
        return;
      }
      if (cancelling) {
        if (!cancelling.whole) {
          if (text !== undefined) cancelling.text = text;
          if (type === "S" || type === "H" || type === "Q") {
            cancelling.whole = true;
            cancelling.describedFirst = type === "H";
            cancelling.synced = type !== "H";
            faults.push({ connection: number ?? 0, fault: "cancel", statements: [cancelling.text] });
            // The statements before it answer first; the sleep starts once they have.
            if (inFlight.length === 0) void sleepThenCancel();
          }
        } else if (cancelling.describedFirst && !cancelling.synced && type === "S") {
          // postgres.js syncs after the error of a statement it described first: that Sync belongs to the held statement.
          cancelling.synced = true;
          answerCancelled();
        } else {
          cancelling.queued.push(message);
        }
        return;
      }
      if (ready && !inStatement && ["P", "Q", "B"].includes(type)) {
        const fault = plan ? plan((number ??= planned += 1), (statements += 1)) : undefined;
        if (fault === "terminate") {
          dropping = { connection: number ?? 0, fault, statements: [...inFlight, text ?? PREPARED] };
          faults.push(dropping);
          void admin`select pg_terminate_backend(${backend.pid})`.catch(() => undefined);
          return;
        }
        if (fault === "cancel") {
          cancelling = { text: text ?? PREPARED, whole: false, sleeping: false, describedFirst: false, synced: false, queued: [] };
          fromClientMessage(message);
          return;
        }
      }
      if (ready) {
        if (text !== undefined) current = text;
        if (!inStatement && text === undefined) current = PREPARED;
        inStatement = !(type === "S" || type === "Q");
        if (type === "S" || type === "Q") inFlight.push(current);
      }
      upstream.write(message);
    }

    client.on("data", (chunk: Buffer) => {
      for (const message of fromClient.push(chunk)) {
        if (kind === "unknown") {
          // A cancel request (postgres.js's own) passes through; a startup opens a session.
          kind = message.length === 16 && message.readInt32BE(4) === CANCEL_REQUEST ? "cancel" : "session";
          upstream.write(message);
        } else if (kind === "cancel") upstream.write(message);
        else fromClientMessage(message);
      }
    });

    upstream.on("data", (chunk: Buffer) => {
      if (kind !== "session") return void client.write(chunk);
      for (const message of fromServer.push(chunk)) {
        const type = String.fromCharCode(message[0] as number);
        if (type === "K") backend = { pid: message.readUInt32BE(5), secret: message.readUInt32BE(9) };
        if (cancelling?.sleeping) {
          // The sleep's answers stand in for the held statement's: its error, then its ReadyForQuery once the client synced.
          if (type === "E") client.write(message);
          if (type === "Z") {
            cancelling.answer = message;
            answerCancelled();
          }
          continue;
        }
        if (type === "Z") {
          if (ready) inFlight.shift();
          ready = true;
          if (cancelling?.whole && inFlight.length === 0) void sleepThenCancel();
        }
        client.write(message);
      }
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const address = server.address();
  return {
    port: typeof address === "object" && address ? address.port : 0,
    faults,
    arm(next) {
      plan = next;
    },
    planned: () => planned,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
      await admin.end({ timeout: 1 });
    },
  };
}

/**
 * A proxy's connection to the server for an accepted client, the two kept in
 * `open` while they are open and each closed with the other (the server's
 * side closing ends the client's gracefully with `closeClient: "end"`). The
 * one wiring of the test proxies (this file, storm-proxy.ts, gate-proxy.ts).
 */
export function linkUpstream(client: Socket, server: { port: number; host: string }, open: Set<Socket>, closeClient: "end" | "destroy"): Socket {
  const upstream = connect(server.port, server.host);
  for (const socket of [client, upstream]) {
    open.add(socket);
    socket.on("close", () => open.delete(socket));
    socket.on("error", () => socket.destroy());
  }
  client.on("close", () => upstream.destroy());
  upstream.on("close", () => (closeClient === "end" ? client.end() : client.destroy()));
  return upstream;
}

// The socket under cronledger's postgres.js pools. Nearly 400 lines because each guard against a
// postgres.js 3.4 protocol bug sits where the messages pass, beside the host choice and TLS it also owns.
import { EventEmitter } from "node:events";
import type { Socket } from "node:net";
import type postgres from "postgres";
import { dial } from "./dial.js";
import { HostRotation, type Targets } from "./hosts.js";
import {
  BACKEND_KEY_DATA,
  CANCEL_REQUEST_CODE,
  COMMAND_COMPLETE,
  DATA_ROW,
  ERROR_RESPONSE,
  PARAMETER_STATUS,
  parseError,
  PASSWORD_REQUEST,
  READY,
  READY_FOR_QUERY,
  RESULT_END,
  TERMINATE,
  WholeMessages,
} from "./wire.js";

/**
 * The socket cronledger's postgres.js pools connect through (postgres.js's
 * `socket` option): it picks the host (src/db/hosts.ts), does TLS
 * (src/db/dial.ts), and reads the server's messages on their way to
 * postgres.js, whole, so that a connection the server ends never leaves
 * postgres.js 3.4 in a state that fails the next statement. postgres.js
 * keeps a connection's protocol state across reconnects and resets it only
 * on a ReadyForQuery, which a dying backend never sends; measured
 * consequences and the choices are in docs/decisions.md ("Connections and
 * PgBouncer"). Here:
 *
 * - an ErrorResponse that ends the connection (FATAL, PANIC) or shows the
 *   server cannot take writes (25006) reaches postgres.js as a socket error
 *   carrying the same PostgresError: the statements sent on the connection
 *   fail with the server's own error, and none is kept to replay (#1223);
 * - before the end is reported, a result cut short gets a CommandComplete
 *   (else its row count carries into the next result) and an answered error
 *   its ReadyForQuery; the end itself is reported inside postgres.js's next
 *   write under 1 KiB (`serverEnded`, `writeAfterEnd`);
 * - at startup, a server `target_session_attrs` does not accept is refused
 *   before postgres.js sees it ready, and the next attempt tries the next host;
 * - a new connection postgres.js leaves idle after its startup without
 *   reporting it open (one made for `sql.reserve()` when `fetch_types` is
 *   off) gets one more ReadyForQuery, so the pool hands it to the reserve.
 *   Its writes wait for setImmediate, which runs in order: none by then is none.
 */

/** How long a connection that ended waits for postgres.js's write before it is reported closed anyway. */
const FLUSH_WAIT_MS = 1_000;
/** postgres.js 3.4 writes a chunk this long at once, from inside the call that made it; a shorter one at setImmediate. */
const POSTGRES_JS_WRITES_AT_ONCE = 1_024;

/** Ends the connection: FATAL and PANIC always; 25006 once started (a read-only server; the next connection may find the primary). */
function endsConnection(error: postgres.PostgresError, started: boolean): boolean {
  const severity = error.severity || error.severity_local;
  return severity === "FATAL" || severity === "PANIC" || (started && error.code === "25006");
}

type WriteCallback = (error?: Error | null) => void;

/** One factory per pool: the pool's connections share the host rotation and the map of backends for cancel requests. */
export function guardedSockets(targets: Targets): () => GuardedSocket {
  const rotation = new HostRotation(Math.max(1, targets.endpoints.length));
  const backends = new Map<string, number>();
  return () => new GuardedSocket(targets, rotation, backends);
}

export class GuardedSocket extends EventEmitter {
  /** Where it connects; postgres.js names them in its connection errors. */
  host: string;
  port: number;
  private raw: Socket | undefined;
  /** Aborts the connection attempt under way when postgres.js gives up on it (its connect_timeout). */
  private readonly attempt = new AbortController();
  /** "ending": the server side is gone, and postgres.js hears of it at its next write. */
  private state: "new" | "connecting" | "open" | "ending" | "closed" = "new";
  private readonly queued: [Buffer, WriteCallback | undefined][] = [];
  private keepAlive: [boolean, number] | undefined;
  private endpoint = 0;
  private cancelRequest = false;
  private endedByClient = false;
  /** The startup's ReadyForQuery went through: postgres.js sends statements now. */
  private started = false;
  private readonly parameters = new Map<string, string>();
  private backendKey: string | undefined;
  /** DataRows went to postgres.js and their CommandComplete did not yet. */
  private midResult = false;
  /** An ErrorResponse went to postgres.js and its ReadyForQuery did not yet. */
  private errorPending = false;
  private readonly messages = new WholeMessages();
  /** Writes so far; after the startup's ReadyForQuery, none means postgres.js left the connection idle without saying so. */
  private writes = 0;
  private idleCheck: number | undefined;
  /** How the end is reported once postgres.js writes (see `serverEnded`). */
  private closing: { hadError: boolean; timer: NodeJS.Timeout } | undefined;
  /** A password request is on its way to prompt the write that reports the end (`writeAfterEnd`). */
  private prompted = false;

  constructor(
    private readonly targets: Targets,
    private readonly rotation: HostRotation,
    private readonly backends: Map<string, number>,
  ) {
    super();
    const first = targets.endpoints[0];
    this.host = targets.path ?? first?.host ?? "localhost";
    this.port = first?.port ?? 5432;
  }

  /** postgres.js ends a socket that is "open" with a Terminate; one still connecting is ended as well. */
  get readyState(): "open" | "closed" {
    return this.state === "closed" ? "closed" : "open";
  }

  write(chunk: Buffer, callback?: WriteCallback): boolean {
    this.writes += 1;
    if (this.state === "ending") return this.writeAfterEnd(chunk);
    if (this.state === "closed") return true;
    if (this.state === "open" && this.raw) return this.raw.write(chunk, callback);
    this.queued.push([chunk, callback]);
    if (this.state === "new") this.begin(chunk);
    return true;
  }

  /** postgres.js's Terminate (its idle and lifetime ends, the pool's end). */
  end(chunk?: Buffer): this {
    this.endedByClient = true;
    if (this.state === "open" && this.raw) {
      if (chunk) this.raw.end(chunk);
      else this.raw.end();
    } else this.clientClosed();
    return this;
  }

  /** postgres.js gives up on the connection (its connect_timeout). */
  destroy(): this {
    this.clientClosed();
    return this;
  }

  setKeepAlive(enable: boolean, delay: number): this {
    this.keepAlive = [enable, delay];
    this.raw?.setKeepAlive(enable, delay);
    return this;
  }

  /** The first bytes say what this connection is: a cancel request goes to the host of the backend it cancels. */
  private begin(first: Buffer): void {
    this.state = "connecting";
    this.cancelRequest = first.length >= 16 && first.readInt32BE(0) === 16 && first.readInt32BE(4) === CANCEL_REQUEST_CODE;
    const order = this.rotation.order();
    const cancelled = this.cancelRequest ? this.backends.get(`${first.readUInt32BE(8)}:${first.readUInt32BE(12)}`) : undefined;
    void this.open(cancelled === undefined ? order : [cancelled]);
  }

  /** Tries the hosts in turn until one answers (and completes TLS); postgres.js has seen nothing until then. */
  private async open(order: readonly number[]): Promise<void> {
    let failure: unknown;
    for (const index of order) {
      if (this.state !== "connecting") return;
      this.endpoint = index;
      const endpoint = this.targets.endpoints[index];
      if (endpoint) [this.host, this.port] = [endpoint.host, endpoint.port];
      try {
        const target = this.targets.path === undefined ? { host: this.host, port: this.port } : { path: this.targets.path };
        const raw = await dial(target, this.targets.tls, this.targets.tlsNegotiation, this.attempt.signal);
        if (this.state !== "connecting") {
          raw.destroy();
          return;
        }
        this.attach(raw);
        return;
      } catch (error) {
        failure = error;
        if (!this.cancelRequest) this.rotation.failed(index);
      }
    }
    this.serverEnded(failure instanceof Error ? failure : new Error(String(failure)));
  }

  private attach(raw: Socket): void {
    this.raw = raw;
    this.state = "open";
    raw.on("data", (chunk: Buffer) => this.received(chunk));
    raw.on("error", (error) => this.serverEnded(error));
    raw.on("close", () => {
      if (this.endedByClient) this.clientClosed();
      else this.serverEnded(this.started || this.cancelRequest ? undefined : this.closedAtStartup());
    });
    raw.on("drain", () => this.emit("drain"));
    if (this.keepAlive) raw.setKeepAlive(...this.keepAlive);
    for (const [chunk, callback] of this.queued.splice(0)) raw.write(chunk, callback);
  }

  /** Passes whole messages on; stops at one that ends the connection. */
  private received(chunk: Buffer): void {
    const whole = this.messages.push(chunk);
    let offset = 0;
    let passed = 0;
    while (offset < whole.length) {
      const type = whole[offset] as number;
      const length = whole.readInt32BE(offset + 1) + 1;
      // An error that cuts a result short (a cancel, a statement timeout, a division by zero at the fifth row) ends it
      // first: postgres.js resets its row count only at a CommandComplete, and its next result would start with holes.
      if (type === ERROR_RESPONSE && this.midResult) {
        this.pass(whole.subarray(passed, offset));
        passed = offset;
        this.midResult = false;
        this.pass(COMMAND_COMPLETE);
      }
      const failure = this.inspect(type, whole, offset + 5, offset + length);
      if (failure) {
        this.pass(whole.subarray(passed, offset));
        this.serverEnded(failure);
        return;
      }
      offset += length;
    }
    this.pass(whole.subarray(passed));
    if (this.idleCheck !== undefined) {
      const writes = this.idleCheck;
      this.idleCheck = undefined;
      setImmediate(() => {
        if (this.state === "open" && this.writes === writes) this.pass(READY_FOR_QUERY);
      });
    }
  }

  private pass(bytes: Buffer): void {
    if (bytes.length > 0 && this.state === "open") this.emit("data", bytes);
  }

  /**
   * What one message (its body `bytes[start, end)`) means for the connection: an error to end it with, or
   * undefined to pass it on. The body is cut out only for the messages read here, never for a data row: a
   * Buffer per row was the largest allocation of a drain's claims after postgres.js's own.
   */
  private inspect(type: number, bytes: Buffer, start: number, end: number): Error | undefined {
    if (type === DATA_ROW) this.midResult = true;
    else if (RESULT_END.has(type)) this.midResult = false;
    else if (type === ERROR_RESPONSE) {
      const error = parseError(bytes.subarray(start, end));
      if (endsConnection(error, this.started)) return error;
      this.errorPending = true;
    } else if (type === READY) {
      this.errorPending = false;
      this.midResult = false;
      if (!this.started) return this.ready();
    } else if (!this.started && type === PARAMETER_STATUS) {
      const [name, value] = bytes.toString("utf8", start, end).split("\0");
      if (name !== undefined && value !== undefined) this.parameters.set(name, value);
    } else if (!this.started && type === BACKEND_KEY_DATA && end - start >= 8) {
      this.backendKey = `${bytes.readUInt32BE(start)}:${bytes.readUInt32BE(start + 4)}`;
    }
    return undefined;
  }

  /** The startup is done: the server is what `target_session_attrs` asks for, or it is refused. */
  private ready(): Error | undefined {
    const target = this.targets.target;
    const standby = this.parameters.get("in_hot_standby") === "on";
    const readOnly = this.parameters.get("default_transaction_read_only") === "on";
    if ((target === "primary" && standby) || (target === "read-write" && (standby || readOnly))) {
      this.raw?.end(TERMINATE);
      const what = standby ? "a hot standby" : "read-only (default_transaction_read_only is on)";
      return Object.assign(
        new Error(`the server at ${this.host}:${this.port} is ${what} and target_session_attrs=${target} asks for the primary; the next connection tries the next host`),
        { code: "08001", address: this.host, port: this.port },
      );
    }
    this.started = true;
    this.idleCheck = this.writes;
    this.rotation.accepted(this.endpoint);
    if (this.backendKey !== undefined) this.backends.set(this.backendKey, this.endpoint);
    return undefined;
  }

  /** A connection the server closed before its startup was done: postgres.js would reconnect at once, in a loop. */
  private closedAtStartup(): Error {
    return Object.assign(new Error(`the server at ${this.host}:${this.port} closed the connection during its startup`), {
      code: "CONNECTION_CLOSED",
      address: this.host,
      port: this.port,
    });
  }

  /** Brings postgres.js to a message boundary with nothing outstanding before it hears that the connection ended. */
  private settle(): void {
    if (!this.started || this.state !== "open") return;
    if (this.midResult) {
      this.midResult = false;
      this.emit("data", COMMAND_COMPLETE);
    }
    if (this.errorPending) {
      this.errorPending = false;
      this.emit("data", READY_FOR_QUERY);
    }
  }

  /**
   * The server side ended (an error, a close, a refused standby, no host
   * answering): the statements sent on it fail with `error`, now. Then the
   * end is reported to postgres.js from inside its next write.
   *
   * postgres.js 3.4 buffers its writes until setImmediate, and a close it
   * hears while such a write waits clears the timer but keeps the buffer and
   * the timer's handle: the connection's next startup message joins that
   * buffer and is never sent, and the reconnect hangs until connect_timeout
   * (30 s), then again (seen here: a pooled connection stuck after a
   * terminated backend while another statement was being written to it).
   * Heard from inside a write, the close comes before postgres.js empties
   * its buffer, so nothing is left. A password request makes it write (it
   * answers one in any state; cronledger gives it no password function to
   * call), and whatever else it had to send goes in the same write.
   */
  private serverEnded(error?: Error): void {
    if (this.state === "ending" || this.state === "closed") return;
    if (!this.started && !this.cancelRequest && !this.endedByClient) this.rotation.failed(this.endpoint);
    this.settle();
    const listening = this.listenerCount("data") > 0 && !this.cancelRequest;
    this.detach();
    if (error) this.emit("error", error);
    if (!listening) return void this.clientClosed(error !== undefined);
    this.state = "ending";
    // Before the startup was done, a failed attempt: postgres.js counts it towards its reconnect backoff.
    this.closing = { hadError: !this.started, timer: setTimeout(() => this.reportClosed(), FLUSH_WAIT_MS) };
    this.emit("data", PASSWORD_REQUEST);
  }

  /**
   * postgres.js writes to a connection that ended (its bytes go nowhere). A
   * chunk under 1 KiB comes from the write postgres.js deferred to
   * setImmediate: the end is reported here. A chunk of 1 KiB or more
   * postgres.js writes at once, from inside the call that made it, which may
   * be `execute()` under its pool's `go()` or `onopen()`: those move the
   * connection to their busy or full queue when `execute()` returns, after
   * `onclose` had moved it to the closed one, and it stays there with no
   * socket. Its next statement then waited forever (a bigger one) or threw
   * `TypeError: Cannot read properties of null (reading 'write')` at
   * `Immediate.nextWrite` (a smaller one): a payload of 1,500 bytes retried
   * at once after a 57P01, 5 storm runs of 5 (docs/decisions.md, "A storm
   * of errors on live connections"). So the end waits for the next small
   * write, which another password request prompts once this call is over.
   */
  private writeAfterEnd(chunk: Buffer): boolean {
    if (chunk.length < POSTGRES_JS_WRITES_AT_ONCE) {
      this.reportClosed();
      return true;
    }
    if (!this.prompted) {
      this.prompted = true;
      process.nextTick(() => {
        this.prompted = false;
        if (this.state === "ending") this.emit("data", PASSWORD_REQUEST);
      });
    }
    return true;
  }

  /** Reports the end from inside postgres.js's write (or after the wait); the statements it held then fail as CONNECTION_CLOSED. */
  private reportClosed(): void {
    if (this.state !== "ending" || !this.closing) return;
    clearTimeout(this.closing.timer);
    this.state = "closed";
    this.emit("close", this.closing.hadError);
  }

  /** postgres.js ended the connection itself, or it ended before it was used: reported on the next tick, as a net.Socket does. */
  private clientClosed(hadError = false): void {
    if (this.state === "ending") return void this.reportClosed();
    if (this.state === "closed") return;
    if (!this.started && !this.cancelRequest && !this.endedByClient && this.state !== "new") this.rotation.failed(this.endpoint);
    this.state = "closed";
    this.detach();
    process.nextTick(() => this.emit("close", hadError));
  }

  private detach(): void {
    this.attempt.abort();
    if (this.backendKey !== undefined && this.backends.get(this.backendKey) === this.endpoint) this.backends.delete(this.backendKey);
    const raw = this.raw;
    this.raw = undefined;
    this.messages.clear();
    this.queued.length = 0;
    if (!raw) return;
    raw.removeAllListeners();
    raw.on("error", () => {});
    // A Terminate already sent (a refused standby) lets the server close; anything else is cut now.
    if (!raw.writableEnded) raw.destroy();
  }
}

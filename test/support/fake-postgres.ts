import { createServer, type Server, type Socket } from "node:net";

/**
 * A stand-in PostgreSQL server that speaks just enough of the wire protocol
 * (SSL refusal, the startup message, a cleartext password exchange) to
 * refuse a connection the way a real server or pooler does:
 *
 * - `wrong-password`: asks for a password, then answers 28P01 "password
 *   authentication failed for user ..." as PostgreSQL does;
 * - `refuses-setting`: answers a startup message that carries
 *   client_connection_check_interval with the FATAL 08P01 "unsupported startup
 *   parameter" ErrorResponse PgBouncer sends (and lets other clients on, to a
 *   password prompt that fails like `wrong-password`).
 */
export type FakePostgresMode = "wrong-password" | "refuses-setting";

export interface FakePostgres {
  readonly port: number;
  readonly url: (user?: string, database?: string) => string;
  /** Startup parameters of every client that connected, in order. */
  readonly startups: Record<string, string>[];
  close(): Promise<void>;
}

const SSL_REQUEST = 80_877_103;
const GSS_REQUEST = 80_877_104;
const PROTOCOL_3 = 196_608;

/** One typed protocol message: its type letter, its length, its body. */
export function message(type: string, body: Buffer): Buffer {
  const header = Buffer.alloc(5);
  header.write(type, 0, "latin1");
  header.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([header, body]);
}

/** An ErrorResponse with the fields a client reads: severity, SQLSTATE, message. */
export function errorResponse(code: string, text: string): Buffer {
  const field = (tag: string, value: string) => Buffer.from(`${tag}${value}\0`, "utf8");
  return message("E", Buffer.concat([field("S", "FATAL"), field("V", "FATAL"), field("C", code), field("M", text), Buffer.from([0])]));
}

function parseStartup(body: Buffer): Record<string, string> {
  const parts = body.subarray(4).toString("utf8").split("\0");
  const parameters: Record<string, string> = {};
  for (let i = 0; i + 1 < parts.length && parts[i] !== ""; i += 2) parameters[parts[i] as string] = parts[i + 1] as string;
  return parameters;
}

function serve(socket: Socket, mode: FakePostgresMode, startups: Record<string, string>[]): void {
  let buffered = Buffer.alloc(0);
  let started = false;
  let user = "";
  socket.on("error", () => socket.destroy());
  socket.on("data", (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    for (;;) {
      if (!started) {
        if (buffered.length < 8) return;
        const length = buffered.readInt32BE(0);
        if (buffered.length < length) return;
        const code = buffered.readInt32BE(4);
        const body = buffered.subarray(4, length);
        buffered = buffered.subarray(length);
        if (code === SSL_REQUEST || code === GSS_REQUEST) {
          socket.write("N");
          continue;
        }
        if (code !== PROTOCOL_3) return void socket.destroy();
        started = true;
        const parameters = parseStartup(body);
        startups.push(parameters);
        user = parameters.user ?? "";
        if (mode === "refuses-setting" && "client_connection_check_interval" in parameters) {
          socket.end(errorResponse("08P01", "unsupported startup parameter: client_connection_check_interval"));
          return;
        }
        // AuthenticationCleartextPassword
        const request = Buffer.alloc(4);
        request.writeInt32BE(3, 0);
        socket.write(message("R", request));
        continue;
      }
      if (buffered.length < 5) return;
      const length = buffered.readInt32BE(1);
      if (buffered.length < length + 1) return;
      const type = String.fromCharCode(buffered[0] as number);
      buffered = buffered.subarray(length + 1);
      if (type === "p") {
        socket.end(errorResponse("28P01", `password authentication failed for user "${user}"`));
        return;
      }
    }
  });
}

export async function startFakePostgres(mode: FakePostgresMode): Promise<FakePostgres> {
  const startups: Record<string, string>[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    serve(socket, mode, startups);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    port,
    url: (user = "app", database = "app") => `postgres://${user}:wrong-secret@127.0.0.1:${port}/${database}`,
    startups,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

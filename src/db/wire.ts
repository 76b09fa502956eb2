import postgres from "postgres";

/**
 * The few pieces of PostgreSQL's wire protocol that src/db/guarded-socket.ts
 * reads or writes between the server and postgres.js: message types, the
 * messages it sends postgres.js itself, and ErrorResponse parsing.
 */

export const CANCEL_REQUEST_CODE = 80_877_102;
export const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);
export const TERMINATE = Buffer.from([0x58, 0, 0, 0, 4]);
/** "SELECT 0": ends a result postgres.js is collecting (it resets its row count here). */
export const COMMAND_COMPLETE = Buffer.concat([Buffer.from([0x43, 0, 0, 0, 13]), Buffer.from("SELECT 0\0")]);
/** Idle: postgres.js settles the statement whose error it holds, and forgets both. */
export const READY_FOR_QUERY = Buffer.from([0x5a, 0, 0, 0, 5, 0x49]);
/** AuthenticationCleartextPassword: postgres.js answers it with a write, whatever state it is in. */
export const PASSWORD_REQUEST = Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 3]);

export const ERROR_RESPONSE = 0x45;
export const READY = 0x5a;
export const DATA_ROW = 0x44;
export const PARAMETER_STATUS = 0x53;
export const BACKEND_KEY_DATA = 0x4b;
/** CommandComplete, EmptyQueryResponse, PortalSuspended: a result is over. */
export const RESULT_END: ReadonlySet<number> = new Set([0x43, 0x49, 0x73]);

/** postgres.js's names for an ErrorResponse's fields (its src/connection.js), so the error built here is the one it builds. */
const ERROR_FIELDS: Readonly<Record<string, string>> = {
  S: "severity_local",
  V: "severity",
  C: "code",
  M: "message",
  D: "detail",
  H: "hint",
  P: "position",
  p: "internal_position",
  q: "internal_query",
  W: "where",
  s: "schema_name",
  t: "table_name",
  c: "column_name",
  d: "data type_name",
  n: "constraint_name",
  F: "file",
  L: "line",
  R: "routine",
};

/** postgres.js's PostgresError takes the parsed fields (its types say a message). */
const PostgresError = postgres.PostgresError as unknown as new (fields: Record<string, string>) => postgres.PostgresError;

/** An ErrorResponse's body as the PostgresError postgres.js would make of it. */
export function parseError(body: Buffer): postgres.PostgresError {
  const fields: Record<string, string> = {};
  let start = 0;
  for (let i = 0; i < body.length; i += 1) {
    if (body[i] !== 0) continue;
    const name = ERROR_FIELDS[String.fromCharCode(body[start] as number)];
    if (name !== undefined) fields[name] = body.toString("utf8", start + 1, i);
    start = i + 1;
  }
  return new PostgresError(fields);
}

/**
 * Cuts a stream of server messages at message boundaries: `push` returns the
 * whole messages received so far (a message split across chunks is held
 * until its last byte), copying only what spans chunks.
 */
export class WholeMessages {
  private pieces: Buffer[] = [];
  private length = 0;
  /** The held message's whole length once its header is there (5 until then). */
  private needs = 5;

  push(chunk: Buffer): Buffer {
    if (this.pieces.length > 0) {
      this.pieces.push(chunk);
      this.length += chunk.length;
      // The header may have come in pieces: join them once it is whole (five bytes to copy at most).
      if (this.needs === 5 && this.length >= 5) this.needs = Buffer.concat(this.pieces, this.length).readInt32BE(1) + 1;
      if (this.length < this.needs) return Buffer.alloc(0);
      chunk = Buffer.concat(this.pieces, this.length);
      this.clear();
    }
    let end = 0;
    while (chunk.length - end >= 5 && chunk.length - end >= chunk.readInt32BE(end + 1) + 1) end += chunk.readInt32BE(end + 1) + 1;
    if (end < chunk.length) {
      this.pieces = [chunk.subarray(end)];
      this.length = chunk.length - end;
      this.needs = this.length >= 5 ? chunk.readInt32BE(end + 1) + 1 : 5;
    }
    return chunk.subarray(0, end);
  }

  clear(): void {
    this.pieces = [];
    this.length = 0;
    this.needs = 5;
  }
}

import postgres from "postgres";
import { ConfigError } from "../errors.js";

/**
 * Where cronledger's own connections go: the hosts of a PostgreSQL URL (one,
 * or several for a primary and its standbys, `postgres://u@db1:5432,db2:5432/app`),
 * the kind of server it accepts (`target_session_attrs`, as libpq reads it)
 * and TLS. src/db/guarded-socket.ts opens the connections; postgres.js is
 * given a single host and no TLS of its own, because in 3.4 its multi-host
 * handling and `target_session_attrs` do not do what a failover needs:
 *
 * - `read-write` accepts a hot standby on PostgreSQL 14 and later (it reads
 *   only `default_transaction_read_only`, which is off on a standby), so a
 *   replica stays on the standby and every write fails with 25006;
 * - while no host qualifies (the primary is down, the standby not promoted
 *   yet) it reconnects in a loop without any delay (measured: 276 connections
 *   to the standby in 3 s for one pooled connection) and the statement waits
 *   instead of failing;
 * - its check runs a statement of its own on servers that do not report the
 *   two settings (before 14, PgBouncer) and drops that statement's promise, the
 *   same crash as the array-types query (porsager/postgres#1192).
 */

/** The `target_session_attrs` cronledger accepts: it writes on every connection, so a standby is never a target. */
export type SessionTarget = "any" | "read-write" | "primary";

const TARGETS: readonly SessionTarget[] = ["any", "read-write", "primary"];
const STANDBY_TARGETS = new Set(["read-only", "standby", "prefer-standby"]);

export interface Endpoint {
  readonly host: string;
  readonly port: number;
}

/** postgres.js's `ssl` option as it parses it from the URL (`sslmode`, `ssl`, `sslrootcert=system`). */
export type TlsSetting = false | true | "require" | "allow" | "prefer" | "verify-full" | Record<string, unknown>;

export interface Targets {
  /** The hosts, in the URL's order; a unix socket path has none. */
  readonly endpoints: readonly Endpoint[];
  /** A unix socket path (a host that starts with "/"), or undefined. */
  readonly path: string | undefined;
  readonly target: SessionTarget;
  readonly tls: TlsSetting;
  /** "direct": TLS from the first byte (PostgreSQL 17), without the SSLRequest. */
  readonly tlsNegotiation: string | null;
  /** The URL for postgres.js: target_session_attrs removed (cronledger applies it). */
  readonly driverUrl: string;
}

const PARAMETER = /([?&])target_session_attrs=([^&#]*)/;

/** Reads the hosts, the session target and TLS from `url`; a target cronledger cannot serve is a ConfigError. */
export function resolveTargets(url: string, env: NodeJS.ProcessEnv = process.env): Targets {
  const match = PARAMETER.exec(url);
  const written = match ? decodeURIComponent(match[2] ?? "") : (env.PGTARGETSESSIONATTRS ?? "");
  const target = written === "" ? "any" : written;
  if (!TARGETS.includes(target as SessionTarget)) {
    const why = STANDBY_TARGETS.has(target)
      ? "cronledger writes on every connection, so it needs the primary"
      : `it is not a target_session_attrs value`;
    throw new ConfigError(
      `target_session_attrs=${target} cannot be used: ${why}. Use target_session_attrs=read-write with the URL listing the primary and its standbys ` +
        `(postgres://user@db1:5432,db2:5432/app?target_session_attrs=read-write); see docs/operations.md, "High availability".`,
    );
  }
  const driverUrl = match ? url.replace(PARAMETER, (_, separator: string) => separator).replace(/[?&](?=&|#|$)/, "").replace("?&", "?") : url;
  // postgres.js's own parsing (hosts, ports, sslmode, environment fallbacks); creating a client opens no connection.
  const parsed = postgres(driverUrl, { max: 1, fetch_types: false }).options;
  const path = typeof parsed.path === "string" && parsed.path !== "" ? parsed.path : undefined;
  const endpoints = parsed.host.map((host, index) => ({ host, port: parsed.port[index] ?? parsed.port[0] ?? 5432 }));
  return {
    endpoints,
    path,
    target: target as SessionTarget,
    tls: parsed.ssl as TlsSetting,
    tlsNegotiation: (parsed as { sslnegotiation?: string | null }).sslnegotiation ?? null,
    driverUrl,
  };
}

/**
 * Which host a new connection tries first: the one that last accepted a
 * connection. A failed attempt (refused, timed out, a standby, a FATAL at
 * startup) moves on to the next host, once however many connections of the
 * pool failed on it at the same time. An established connection that drops
 * moves nothing: a terminated backend is no reason to leave a working primary.
 */
export class HostRotation {
  private current = 0;

  constructor(private readonly count: number) {}

  /** The hosts in the order one connection attempt tries them (it skips those whose TCP connection fails). */
  order(): number[] {
    return Array.from({ length: this.count }, (_, step) => (this.current + step) % this.count);
  }

  failed(index: number): void {
    if (this.current === index) this.current = (index + 1) % this.count;
  }

  accepted(index: number): void {
    this.current = index;
  }
}

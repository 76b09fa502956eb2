import { once } from "node:events";
import { connect as netConnect, isIP, type Socket } from "node:net";
import { connect as tlsConnect, type ConnectionOptions } from "node:tls";
import type { TlsSetting } from "./hosts.js";
import { SSL_REQUEST } from "./wire.js";

/** Where one connection attempt goes: a host and port, or a unix socket path. */
export type DialTarget = { readonly host: string; readonly port: number } | { readonly path: string };

/**
 * Opens a connection to one server and completes TLS as postgres.js 3.4
 * negotiates it (its `secure()`), which it cannot do itself above
 * src/db/guarded-socket.ts: it would read the encrypted bytes. `sslmode`
 * require, prefer and allow connect unverified; verify-full and a TLS options
 * object verify. Rejects (and leaves nothing open) when `signal` aborts.
 */
export async function dial(target: DialTarget, tls: TlsSetting, negotiation: string | null, signal: AbortSignal): Promise<Socket> {
  const raw = "path" in target ? netConnect(target.path) : netConnect({ host: target.host, port: target.port });
  const abort = () => raw.destroy();
  signal.addEventListener("abort", abort);
  try {
    await once(raw, "connect", { signal });
    return "path" in target ? raw : await secure(raw, target.host, target.port, tls, negotiation, signal);
  } catch (error) {
    raw.destroy();
    throw error;
  } finally {
    signal.removeEventListener("abort", abort);
  }
}

async function secure(raw: Socket, host: string, port: number, tls: TlsSetting, negotiation: string | null, signal: AbortSignal): Promise<Socket> {
  if (tls === false) return raw;
  const direct = negotiation === "direct";
  if (!direct) {
    raw.write(SSL_REQUEST);
    const [answer] = (await once(raw, "data", { signal })) as [Buffer];
    // More than the one byte is someone else talking in the clear (CVE-2021-23222).
    if (answer.length !== 1 || answer[0] !== 0x53) {
      if (answer.length === 1 && answer[0] === 0x4e && tls === "prefer") return raw;
      throw Object.assign(new Error(`The server at ${host}:${port} does not support SSL connections`), { code: "ESSL_REFUSED" });
    }
  }
  const options: ConnectionOptions = { socket: raw, servername: isIP(host) ? undefined : host };
  if (direct) options.ALPNProtocols = ["postgresql"];
  if (tls === "require" || tls === "allow" || tls === "prefer") options.rejectUnauthorized = false;
  else if (typeof tls === "object") Object.assign(options, tls);
  const secured = tlsConnect(options);
  try {
    await once(secured, "secureConnect", { signal });
  } catch (error) {
    secured.destroy();
    throw error;
  }
  return secured;
}

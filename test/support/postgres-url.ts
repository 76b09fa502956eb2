import postgres from "postgres";

/** Resolution order: TEST_DATABASE_URL, a local server, testcontainers, else a clear message. */
export const LOCAL_URL = "postgres://postgres@127.0.0.1:5432/postgres";

export async function canConnect(url: string): Promise<boolean> {
  const client = postgres(url, { max: 1, connect_timeout: 3, onnotice: () => {} });
  try {
    await client`select 1`;
    return true;
  } catch {
    return false;
  } finally {
    await client.end({ timeout: 1 });
  }
}

/** Replaces the database name of a PostgreSQL URL. */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** The same URL on another port of 127.0.0.1 (a proxy in front of the server). */
export function withPort(url: string, port: number): string {
  const parsed = new URL(url);
  parsed.hostname = "127.0.0.1";
  parsed.port = String(port);
  return parsed.toString();
}

import postgres from "postgres";
import { beforeAll, describe, expect, it } from "vitest";
import { DatabaseHealth } from "../src/db/health.js";
import type { Logger } from "../src/log.js";
import { freePort } from "./support/ports.js";

/** The lines the tracker logged, as "level message". */
function recorder(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const at = (level: string) => (message: string) => void lines.push(`${level} ${message}`);
  return { logger: { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") }, lines };
}

describe("DatabaseHealth: one outage, however its statements' answers cross", () => {
  let refused: unknown;
  const statementError = Object.assign(new Error('relation "x" does not exist'), { code: "42P01" });

  beforeAll(async () => {
    // A real connection loss, as postgres.js reports it: nothing listens on the port.
    const sql = postgres({ host: "127.0.0.1", port: await freePort(), max: 1, connect_timeout: 2, onnotice: () => {} });
    refused = await sql`select 1`.then(
      () => undefined,
      (error: unknown) => error,
    );
    await sql.end({ timeout: 0 });
    expect((refused as { code?: string }).code).toBe("ECONNREFUSED");
  });

  it("logs the loss once and the return once, with how long it lasted", () => {
    let now = 1_000;
    const { logger, lines } = recorder();
    const health = new DatabaseHealth(logger, "db", () => now);
    expect(health.sent().failed(refused)).toBe(false);
    expect(health.sent().failed(refused)).toBe(false);
    expect(health.down).toBe(true);
    now += 2_500;
    health.sent().succeeded();
    health.sent().succeeded();
    expect(health.down).toBe(false);
    expect(lines).toEqual([expect.stringMatching(/^error lost the database \(db\); retrying until it is back$/), "info database is back (db) after 2.5 s"]);
  });

  it("leaves a statement's own error to the caller, and keeps the state", () => {
    const { logger, lines } = recorder();
    const health = new DatabaseHealth(logger, "db");
    expect(health.sent().failed(statementError)).toBe(true);
    expect(health.down).toBe(false);
    expect(lines).toEqual([]);
  });

  it("does not end an outage on an answer to a statement sent before it began", () => {
    const { logger, lines } = recorder();
    const health = new DatabaseHealth(logger, "db");
    const early = health.sent();
    health.sent().failed(refused);
    // Answered by the server just before it shut down, read after the other connection's failure.
    early.succeeded();
    expect(health.down).toBe(true);
    health.sent().failed(refused);
    health.sent().succeeded();
    expect(lines.filter((line) => line.includes("lost the database"))).toHaveLength(1);
    expect(lines.filter((line) => line.includes("database is back"))).toHaveLength(1);
  });

  it("does not begin a new outage on a failure of a statement sent before the return", () => {
    const { logger, lines } = recorder();
    const health = new DatabaseHealth(logger, "db");
    health.sent().failed(refused);
    const during = health.sent();
    health.sent().succeeded();
    // Sent while the server was away, failing after another statement saw it back.
    expect(during.failed(refused)).toBe(false);
    expect(health.down).toBe(false);
    expect(lines.filter((line) => line.includes("lost the database"))).toHaveLength(1);
    // A statement sent after the return that loses the connection is a new outage.
    health.sent().failed(refused);
    expect(health.down).toBe(true);
    expect(lines.filter((line) => line.includes("lost the database"))).toHaveLength(2);
  });
});

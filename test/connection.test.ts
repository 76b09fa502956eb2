import { sql } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { openDatabase, resolveDatabaseSetting, query, type Database, type DatabaseSetting } from "../src/db/connection.js";
import { rootMessage } from "../src/db/transient.js";
import { createCronledger } from "../src/cronledger.js";
import { ConfigError } from "../src/errors.js";
import { silentLogger } from "../src/log.js";
import { useTestDatabase } from "./support/database.js";

describe("cronledger's PostgreSQL connections", () => {
  const database = useTestDatabase(import.meta.url);
  const opened: Database[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((db) => db.close()));
  });
  const setting = async (options: Omit<Extract<DatabaseSetting, object>, "url">, env: NodeJS.ProcessEnv = {}) => {
    const db = openDatabase(resolveDatabaseSetting({ url: database.url, ...options }), env);
    opened.push(db);
    const [row] = await query<{ value: string; app: string }>(
      db.db,
      sql`select current_setting('client_connection_check_interval') as value, current_setting('application_name') as app`,
    );
    return row;
  };

  it("ask the server to check for a vanished client every second by default, and not at all when told", async () => {
    expect(await setting({})).toEqual({ value: "1s", app: "cronledger" });
    expect(await setting({ clientConnectionCheck: "250ms" })).toMatchObject({ value: "250ms" });
    expect(await setting({ clientConnectionCheck: false })).toMatchObject({ value: "0" });
  });

  it("take that setting from CRONLEDGER_CLIENT_CONNECTION_CHECK where the code sets none", async () => {
    expect(await setting({}, { CRONLEDGER_CLIENT_CONNECTION_CHECK: "off" })).toMatchObject({ value: "0" });
    expect(await setting({}, { CRONLEDGER_CLIENT_CONNECTION_CHECK: "false" })).toMatchObject({ value: "0" });
    expect(await setting({}, { CRONLEDGER_CLIENT_CONNECTION_CHECK: "250ms" })).toMatchObject({ value: "250ms" });
    expect(await setting({}, { CRONLEDGER_CLIENT_CONNECTION_CHECK: "3000" })).toMatchObject({ value: "3s" });
    // The code's own setting wins over the environment.
    expect(await setting({ clientConnectionCheck: "2s" }, { CRONLEDGER_CLIENT_CONNECTION_CHECK: "off" })).toMatchObject({ value: "2s" });
    expect(() => openDatabase(resolveDatabaseSetting(database.url), { CRONLEDGER_CLIENT_CONNECTION_CHECK: "soon" })).toThrow(
      /CRONLEDGER_CLIENT_CONNECTION_CHECK="soon" is neither "off" nor a duration/,
    );
  });

  it("read CRONLEDGER_CLIENT_CONNECTION_CHECK from the process environment in createCronledger", async () => {
    const saved = process.env.CRONLEDGER_CLIENT_CONNECTION_CHECK;
    process.env.CRONLEDGER_CLIENT_CONNECTION_CHECK = "off";
    const ledger = createCronledger({ database: database.url, logger: silentLogger });
    try {
      const [row] = await query<{ value: string }>(ledger.database.db, sql`select current_setting('client_connection_check_interval') as value`);
      expect(row?.value).toBe("0");
    } finally {
      if (saved === undefined) delete process.env.CRONLEDGER_CLIENT_CONNECTION_CHECK;
      else process.env.CRONLEDGER_CLIENT_CONNECTION_CHECK = saved;
      await ledger.close();
    }
  });

  it("refuse settings that cannot work, saying why", () => {
    expect(() => openDatabase(resolveDatabaseSetting({ url: database.url, pooler: "pgbouncer", clientConnectionCheck: "1s" }), {})).toThrow(/PgBouncer refuses client_connection_check_interval/);
    expect(() => openDatabase(resolveDatabaseSetting({ url: database.url, pooler: "pgbouncer" }), { CRONLEDGER_CLIENT_CONNECTION_CHECK: "1s" })).toThrow(
      /CRONLEDGER_CLIENT_CONNECTION_CHECK cannot be used with pooler: "pgbouncer"/,
    );
    const typo = { url: database.url, poolsize: 4 } as unknown as DatabaseSetting;
    expect(() => openDatabase(resolveDatabaseSetting(typo), {})).toThrow(/unknown setting "poolsize" \(did you mean "poolSize"\?\)/);
    expect(() => openDatabase(resolveDatabaseSetting({ url: database.url, pooler: "pgpool" as "pgbouncer" }), {})).toThrow(ConfigError);
    expect(() => openDatabase(resolveDatabaseSetting({ url: database.url, poolSize: 1 }), {})).toThrow(/poolSize: must be at least 2 \(got 1\): migrations hold one connection/);
  });

  it("say what to do when a server or pooler refuses that setting", () => {
    const refused = new Error("Failed query: select 1", {
      cause: Object.assign(new Error('unrecognized configuration parameter "client_connection_check_interval"'), { code: "42704" }),
    });
    expect(rootMessage(refused)).toContain("clientConnectionCheck: false");
    expect(rootMessage(new Error("relation does not exist"))).toBe("relation does not exist");
  });
});

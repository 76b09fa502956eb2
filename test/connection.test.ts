import { sql } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { openDatabase, query, type Database, type DatabaseSetting } from "../src/db/connection.js";
import { rootMessage } from "../src/db/transient.js";
import { useTestDatabase } from "./support/database.js";

describe("cronledger's PostgreSQL connections", () => {
  const database = useTestDatabase(import.meta.url);
  const opened: Database[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((db) => db.close()));
  });
  const setting = async (options: Omit<Extract<DatabaseSetting, object>, "url">) => {
    const db = openDatabase({ url: database.url, ...options });
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

  it("say what to do when a server or pooler refuses that setting", () => {
    const refused = new Error("Failed query: select 1", {
      cause: Object.assign(new Error('unrecognized configuration parameter "client_connection_check_interval"'), { code: "42704" }),
    });
    expect(rootMessage(refused)).toContain("clientConnectionCheck: false");
    expect(rootMessage(new Error("relation does not exist"))).toBe("relation does not exist");
  });
});

import { sql, type SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { describe, expect, it } from "vitest";
import { jobQueue } from "../src/schema.js";
import { array, reusable } from "../src/db/sql/fragments.js";

// A reusable statement hands drizzle its text and parameters as worked out once (src/db/sql/fragments.ts);
// each check compares it with drizzle's own rendering of the same statement written as a plain template.
const dialect = new PgDialect();

const values = { names: ["a.job", 'b "quoted"', null], limit: 7, worker: "w-1" } as const;

function plain(): SQL {
  return sql`select ${jobQueue.id} from ${jobQueue}
    where ${jobQueue.jobName} = any(${array([...values.names], "text")}) and ${jobQueue.lockedBy} = ${values.worker} and ${jobQueue.status} = ${"queued"}
    limit ${values.limit}::int`;
}

const statement = reusable<"names" | "limit" | "worker">(
  (value) => sql`select ${jobQueue.id} from ${jobQueue}
    where ${jobQueue.jobName} = any(${value("names")}::text[]) and ${jobQueue.lockedBy} = ${value("worker")} and ${jobQueue.status} = ${"queued"}
    limit ${value("limit")}::int`,
);

describe("a reusable statement", () => {
  it("renders the text and parameters drizzle renders for the same statement, call after call", () => {
    const expected = dialect.sqlToQuery(plain());
    for (let call = 0; call < 3; call += 1) {
      const query = dialect.sqlToQuery(statement({ names: [...values.names], limit: values.limit, worker: values.worker }));
      expect(query.sql).toBe(expected.sql);
      expect(query.params).toEqual(expected.params);
    }
  });

  it("renders the same inside another statement, where drizzle reads its pieces instead of asking for its query", () => {
    const wrap = (inner: SQL) => sql`select count(*) from (${inner}) as s where ${values.worker} <> ${"x"}`;
    const expected = dialect.sqlToQuery(wrap(plain()));
    const query = dialect.sqlToQuery(wrap(statement({ names: [...values.names], limit: values.limit, worker: values.worker })));
    expect(query.sql).toBe(expected.sql);
    expect(query.params).toEqual(expected.params);
  });

  it("renders with its values inline when drizzle asks for that", () => {
    const inline = (built: SQL) => dialect.sqlToQuery(built.inlineParams());
    const expected = inline(plain());
    const query = inline(statement({ names: [...values.names], limit: values.limit, worker: values.worker }));
    expect(query.sql).toBe(expected.sql);
    expect(query.params).toEqual([]);
  });

  it("gives each call its own parameters", () => {
    const first = dialect.sqlToQuery(statement({ names: ["one"], limit: 1, worker: "w-1" }));
    const second = dialect.sqlToQuery(statement({ names: ["two"], limit: 2, worker: "w-2" }));
    expect(first.params).toEqual(["{\"one\"}", "w-1", "queued", 1]);
    expect(second.params).toEqual(["{\"two\"}", "w-2", "queued", 2]);
  });
});

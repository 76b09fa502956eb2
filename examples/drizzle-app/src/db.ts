import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
// cronledger's jobs, typed, for the app's own queries (status columns, joins, reports): a read-only
// view over the queue and the history, so a job is found whatever its state.
import { jobs as cronledgerJobs } from "cronledger/schema";
import * as schema from "./schema.js";

export function openAppDatabase(url: string) {
  const client = postgres(url, { max: 5, onnotice: () => {} });
  return { db: drizzle(client, { schema: { ...schema, cronledgerJobs } }), close: () => client.end({ timeout: 5 }) };
}

export type AppDatabase = ReturnType<typeof openAppDatabase>["db"];
export { cronledgerJobs };

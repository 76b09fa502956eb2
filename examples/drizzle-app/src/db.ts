import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
// cronledger's tables, typed, for the app's own queries (status columns, joins, reports).
import { jobs as cronledgerJobs } from "cronledger/schema";
import * as schema from "./schema.js";

export function openAppDatabase(url: string) {
  const client = postgres(url, { max: 5, onnotice: () => {} });
  return { db: drizzle(client, { schema: { ...schema, cronledgerJobs } }), close: () => client.end({ timeout: 5 }) };
}

export type AppDatabase = ReturnType<typeof openAppDatabase>["db"];
export { cronledgerJobs };

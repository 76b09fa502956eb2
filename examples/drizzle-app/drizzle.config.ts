import { defineConfig } from "drizzle-kit";

// The application's drizzle-kit config. It knows only the app's schema file
// and keeps its journal in drizzle.__drizzle_migrations; cronledger applies
// its own tables with `cronledger migrate` and its own journal
// (drizzle.__cronledger_migrations), so neither run skips the other's files.
export default defineConfig({
  dialect: "postgresql",
  schema: "./examples/drizzle-app/src/schema.ts",
  out: "./examples/drizzle-app/drizzle",
  schemaFilter: ["public"],
  dbCredentials: { url: process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres" },
});

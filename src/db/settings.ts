import { resolve } from "node:path";
import { z } from "zod";
import { parseDuration, type Duration } from "../duration.js";
import { ConfigError } from "../errors.js";
import { duration, type Check, type OptionShape, type Takes } from "../option-schema.js";
import { describeShapeIssues } from "../suggest.js";
import { isDatabase, type Database } from "./database.js";

/** Where the data lives: a PostgreSQL URL, `memory://` for in-memory PGlite, or `pglite:<dir>` for PGlite on disk. */
export type DatabaseSetting =
  | string
  | PostgresSetting
  /**
   * The application's own PGlite instance: cronledger's tables live in it
   * beside the application's, so `enqueue(..., { db: tx })` with the app's
   * drizzle-orm/pglite transaction writes to the same database. close()
   * leaves it open; the application owns it.
   */
  | PgliteInstance;

/**
 * The parts of a PGlite instance cronledger uses: the application's
 * `new PGlite()` is one. A type of cronledger's own, so that an application
 * without PGlite (an optional peer dependency) typechecks with
 * `skipLibCheck: false`.
 */
export interface PgliteInstance {
  readonly waitReady: Promise<void>;
  readonly closed: boolean;
  exec(query: string): Promise<unknown>;
  listen(channel: string, callback: (payload: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/** A PostgreSQL server (or a pooler in front of it) and how to talk to it. */
export interface PostgresSetting {
  url: string;
  /** Connections in the pool; default 10. */
  poolSize?: number;
  /**
   * How often the server checks, while one of our statements runs, that
   * this process is still there (PostgreSQL's client_connection_check_interval,
   * sent at connect). A process killed mid-statement then leaves nothing
   * behind instead of the server finishing its statement. Default "1s"
   * (or CRONLEDGER_CLIENT_CONNECTION_CHECK, "off" or a duration); false for
   * PostgreSQL 13. Off behind PgBouncer, which refuses it.
   */
  clientConnectionCheck?: Duration | false;
  /**
   * "pgbouncer": `url` is a PgBouncer in transaction mode. cronledger then
   * uses no named prepared statements, sends no client_connection_check_interval,
   * and LISTENs only on `listenUrl` (without one, workers poll).
   */
  pooler?: "pgbouncer";
  /**
   * A direct URL of the PostgreSQL server, for the one LISTEN connection per
   * process that wakes idle workers. Default: `url`, unless `pooler` is set.
   */
  listenUrl?: string;
  /**
   * The longest wait between attempts to reconnect after the server went
   * away; default "2s". postgres.js's own backoff grows to 20 s and is
   * shared by the whole pool, so a replica would otherwise sit idle that
   * long after PostgreSQL is back.
   */
  reconnectDelay?: Duration;
}

/** Sets `clientConnectionCheck` where the code does not: "off" (or "false", "0") or a duration such as "1s". */
export const CLIENT_CONNECTION_CHECK_ENV = "CRONLEDGER_CLIENT_CONNECTION_CHECK";

const DEFAULT_POOL_SIZE = 10;
const DEFAULT_CLIENT_CONNECTION_CHECK_MS = 1_000;
/**
 * postgres.js's own reconnect backoff grows to 20 s and is shared by the
 * whole pool, so a replica would otherwise sit idle that long after
 * PostgreSQL is back.
 */
const DEFAULT_RECONNECT_DELAY_MS = 2_000;
const POSTGRES_URL = /^postgres(ql)?:\/\//;

/** How cronledger talks to one PostgreSQL server (or a pooler in front of it), all defaults applied. */
export interface PostgresSettings {
  readonly url: string;
  readonly poolSize: number;
  /** PostgreSQL's client_connection_check_interval in ms, sent at connect; false: not sent. */
  readonly clientConnectionCheckMs: number | false;
  readonly pooler: "pgbouncer" | undefined;
  /** Where the LISTEN connection goes; undefined behind a pooler: no LISTEN, workers poll. */
  readonly listenUrl: string | undefined;
  /**
   * postgres.js's named prepared statements. PgBouncer in transaction mode hands each
   * transaction to any server connection, where a statement prepared on another is unknown;
   * Debian 12's PgBouncer is 1.18, older than the 1.21 that tracks them (max_prepared_statements).
   */
  readonly prepare: boolean;
  /**
   * Whether postgres.js may pipeline (send a query on a connection whose previous query has not
   * answered yet). Not through PgBouncer: in transaction mode PgBouncer 1.18 can hand the server
   * connection back to its pool when the first query's transaction ends while the next is already
   * on the wire, and that query's reply never comes (porsager/postgres#970 describes the same with
   * Supavisor). Off, transactions run on reserved connections: src/db/reserved-begin.ts.
   */
  readonly pipeline: boolean;
  /** The longest wait between reconnect attempts (postgres.js's backoff, capped). */
  readonly reconnectDelayMs: number;
}

const POOL_SIZE_FLOOR = (issue: { readonly input?: unknown }) =>
  `must be at least 2 (got ${String(issue.input)}): migrations hold one connection for their lock while another applies them`;

/** The object form of the database setting, its defaults applied (the client connection check's depends on the environment: resolvePostgresSettings). */
const postgresSettingSchema = z.strictObject({
  url: z.string({ error: "must be a URL" }),
  poolSize: z.number({ error: "must be a number" }).int({ error: POOL_SIZE_FLOOR }).min(2, { error: POOL_SIZE_FLOOR }).default(DEFAULT_POOL_SIZE),
  clientConnectionCheck: z.union([z.literal(false), duration("clientConnectionCheck")], { error: 'must be false or a duration such as "1s"' }).optional(),
  pooler: z.literal("pgbouncer", { error: 'must be "pgbouncer"' }).optional(),
  listenUrl: z.string().regex(POSTGRES_URL, "must be a postgres:// URL of the server itself, not of the pooler").optional(),
  reconnectDelay: duration("reconnectDelay").default(DEFAULT_RECONNECT_DELAY_MS),
} satisfies OptionShape<PostgresSetting>);
type _PostgresSettingSchemaTakesIt = Check<Takes<PostgresSetting, typeof postgresSettingSchema.shape>>;

/** The env var's value as a setting: "off"/"false"/"0" is false, anything else a duration. */
function clientConnectionCheckFromEnv(value: string | undefined): number | false | undefined {
  if (value === undefined || value.trim() === "") return undefined;
  const trimmed = value.trim().toLowerCase();
  if (trimmed === "off" || trimmed === "false" || trimmed === "0") return false;
  try {
    return parseDuration(/^\d+(\.\d+)?$/.test(trimmed) ? Number(trimmed) : trimmed, CLIENT_CONNECTION_CHECK_ENV);
  } catch {
    throw new ConfigError(`${CLIENT_CONNECTION_CHECK_ENV}=${JSON.stringify(value)} is neither "off" nor a duration such as "1s" or "500ms".`);
  }
}

/** A PostgreSQL setting as the schema gives it: checked, durations in milliseconds, poolSize and reconnectDelay defaulted. */
export type ParsedPostgresSetting = z.output<typeof postgresSettingSchema>;

/**
 * The database setting resolved once, by the options schema, into what
 * openDatabase opens: an already-open Database (shared, never closed by the
 * ledger), the application's PGlite instance, an embedded PGlite database
 * (`memory://`, `pglite:<dir>`), or a PostgreSQL server's settings.
 */
export type ResolvedDatabaseSetting =
  | { readonly kind: "open"; readonly database: Database }
  | { readonly kind: "app-pglite"; readonly client: PgliteInstance }
  /** `dataDir` undefined: in memory. `url` as given, for messages. */
  | { readonly kind: "embedded"; readonly url: string; readonly dataDir: string | undefined }
  | { readonly kind: "postgres"; readonly setting: ParsedPostgresSetting };

/** A PGlite instance, also one from another copy of the package (the application's own dependency). */
export function isPglite(value: unknown): value is PgliteInstance {
  const candidate = value as Partial<PgliteInstance> | null;
  return typeof candidate === "object" && candidate !== null && typeof candidate.exec === "function" && typeof candidate.listen === "function" && "waitReady" in candidate;
}

/** What a URL names; the object form's `url` is read the same way, so `{ url: "memory://" }` is the embedded database too. */
function byUrl(setting: ParsedPostgresSetting, context: z.RefinementCtx): ResolvedDatabaseSetting {
  const { url } = setting;
  if (url === "memory://" || url === "pglite:memory") return { kind: "embedded", url, dataDir: undefined };
  if (url.startsWith("pglite:")) return { kind: "embedded", url, dataDir: resolve(url.slice("pglite:".length)) };
  if (POSTGRES_URL.test(url)) return { kind: "postgres", setting };
  context.addIssue({
    code: "custom",
    message: `Unsupported database ${JSON.stringify(url.replace(/:[^:@/]*@/, ":***@"))}: use a postgres:// URL, "memory://" for in-memory PGlite, or "pglite:<dir>" for PGlite on disk`,
  });
  return z.NEVER;
}

/** The database setting wherever it is given (createCronledger, the config file, DATABASE_URL), resolved once. */
export const databaseSettingSchema = z
  .union(
    [
      z.string(),
      postgresSettingSchema,
      z.custom<Database>(isDatabase, { error: "an open Database" }),
      z.custom<PgliteInstance>(isPglite, { error: "a PGlite instance" }),
    ],
    { error: 'must be a URL ("postgres://...", "memory://", "pglite:<dir>"), { url, poolSize?, clientConnectionCheck?, reconnectDelay?, pooler?, listenUrl? }, a PGlite instance or an open Database' },
  )
  .transform((value, context): ResolvedDatabaseSetting | undefined => {
    // An empty URL is none (`database: process.env.DATABASE_URL ?? ""`): DATABASE_URL, then the embedded database, decide.
    if (value === "") return undefined;
    if (isDatabase(value)) return { kind: "open", database: value };
    if (isPglite(value)) return { kind: "app-pglite", client: value };
    return byUrl(typeof value === "string" ? postgresSettingSchema.parse({ url: value }) : value, context);
  });

/** A database setting given on its own (openDatabase's callers, DATABASE_URL), resolved; `what` names it in the ConfigError. */
export function resolveDatabaseSetting(setting: DatabaseSetting | Database, what = "database setting"): ResolvedDatabaseSetting | undefined {
  const parsed = databaseSettingSchema.safeParse(setting);
  if (!parsed.success) throw new ConfigError(`Invalid ${what}: ${describeShapeIssues(parsed.error, databaseSettingSchema, { noun: "setting" })}.`);
  return parsed.data;
}

/**
 * The settings of a PostgreSQL connection, checked against each other and the environment. `clientConnectionCheck`
 * comes from the code, else from CRONLEDGER_CLIENT_CONNECTION_CHECK, else
 * 1 s directly and off behind PgBouncer, which refuses it at connect and
 * whose server connection outlives a killed client anyway (the statement
 * completes; it is atomic either way).
 */
export function resolvePostgresSettings(options: ParsedPostgresSetting, env: NodeJS.ProcessEnv): PostgresSettings {
  const pooler = options.pooler;
  const fromCode = options.clientConnectionCheck;
  let clientConnectionCheckMs: number | false;
  if (fromCode !== undefined) {
    clientConnectionCheckMs = fromCode;
  } else {
    const fromEnv = clientConnectionCheckFromEnv(env[CLIENT_CONNECTION_CHECK_ENV]);
    clientConnectionCheckMs = fromEnv ?? (pooler === undefined ? DEFAULT_CLIENT_CONNECTION_CHECK_MS : false);
  }
  // 0 is PostgreSQL's "off": not sent at all, so a pooler has nothing to refuse.
  if (clientConnectionCheckMs === 0) clientConnectionCheckMs = false;
  if (pooler === "pgbouncer" && clientConnectionCheckMs !== false) {
    const source = fromCode !== undefined ? "clientConnectionCheck" : CLIENT_CONNECTION_CHECK_ENV;
    throw new ConfigError(
      `${source} cannot be used with pooler: "pgbouncer": PgBouncer refuses client_connection_check_interval at connect, ` +
        "and its server connection outlives a client that went away, so the server could not see it go. " +
        "Leave it unset (it is off behind PgBouncer); see docs/operations.md, \"PgBouncer\".",
    );
  }
  return {
    url: options.url,
    poolSize: options.poolSize,
    clientConnectionCheckMs,
    pooler,
    listenUrl: options.listenUrl ?? (pooler === undefined ? options.url : undefined),
    prepare: pooler === undefined,
    pipeline: pooler === undefined,
    reconnectDelayMs: options.reconnectDelay,
  };
}

// The admin API as one web-standard handler: authentication, routing and every route's answer. About 440
// lines because the routes share the token check (with its browser challenge), a framework's parsed body, the
// error mapping and the wire documents; the page's markup lives in page.ts and its parts beside it.
import { createHash, timingSafeEqual } from "node:crypto";
import { BackfillTooLargeError, ConfigError, CronledgerError, ERROR_HTTP_STATUS, InvalidArgumentError, InvalidFailureFilterError } from "../errors.js";
import type { ResolvedEntry } from "../schedule/validate.js";
import type { FailureFilter, FailurePage } from "../operators/failures.js";
import type { CancelRequest, CancelledJob, RetryingJob, RunningJob } from "../operators/operations.js";
import type { RetriedJob } from "../operators/retry-failed.js";
import type { Logger } from "../log.js";
import { logFailure } from "../db/log-failure.js";
import { ENTRY_STATES, type EntryState } from "../status/health.js";
import type { SchedulerStatus, StatusOptions } from "../status/model.js";
import type { BackfillOptions, BackfillResult } from "../schedule/backfill.js";
import { backfillDocument } from "../wire/backfill.js";
import { cancelledDocument, errorDocument, failuresDocument, retriedDocument } from "../wire/jobs.js";
import { statusDocument } from "../wire/status.js";
import { ENTRY_ACTION_PATH, entryActionNotice, runEntryAction, type EntryActionsLedger } from "./entry-actions.js";
import type { CronledgerMetrics } from "./metrics.js";
import { PAGE_DYNAMIC, PAGE_ENTRIES, PAGE_SCRIPT_HASH, renderSchedulePage, STYLE } from "./page.js";
import { renderStopConfirmation } from "./page-running.js";
import { unquarantinedDocument } from "../wire/commands.js";
import { unquarantinedNotice } from "./page-quarantine.js";
import { withParsedBody, type ParsedBody } from "./parsed-body.js";
import { documentHead } from "./html.js";

/**
 * What a framework knows of a request beyond the Request itself: the body its
 * body parser already read (a Hono middleware that called `c.req.json()`),
 * which the admin routes then take instead of the spent stream.
 */
export interface AdminRequestContext {
  readonly body?: ParsedBody;
}

/**
 * The second argument is optional and only read for a `body`: Hono's `mount`
 * passes its env there, which has none.
 */
export type AdminHandler = (request: Request, context?: AdminRequestContext) => Promise<Response>;

/** What the admin endpoints need of a ledger; a Cronledger has all of it, and so may anything else that is to be served. */
export interface AdminLedger extends EntryActionsLedger {
  readonly namespace: string;
  readonly logger: Logger;
  /** Null when created with `metrics: false`. */
  readonly metrics: CronledgerMetrics | null;
  /** The status model; with `runs`, the recent runs of the page of entries the Schedule page shows. */
  status(options?: StatusOptions): Promise<SchedulerStatus>;
  failures(filter?: FailureFilter): Promise<FailurePage>;
  retryJob(id: number): Promise<RetriedJob>;
  cancelJob(id: number, request?: CancelRequest): Promise<CancelledJob>;
  /** Clears an entry's quarantine by its ledger key; null when no row has the key. */
  clearQuarantine(key: string): Promise<{ key: string; jobName: string; wasQuarantined: boolean } | null>;
  /** Jobs waiting for a retry, soonest first. */
  retrying(options?: { limit?: number }): Promise<RetryingJob[]>;
  /** The loaded schedule entries: the Schedule page lists each one's upcoming fire times; none without them. */
  readonly entries?: readonly ResolvedEntry[];
  /** Enqueues (or, dry, lists) one job per missed slot of an entry in a range (src/schedule/backfill.ts). */
  backfill(entry: string, options: BackfillOptions): Promise<BackfillResult>;
  /** Running jobs, longest-running first (with `id`: that job, if it runs). */
  running(options?: { limit?: number; id?: number }): Promise<RunningJob[]>;
}

export interface AdminHandlerOptions {
  /** Bearer token every request must present (at least 16 characters). */
  readonly token?: string;
  /**
   * Serve without a token. Only for a server bound to 127.0.0.1 / ::1:
   * requests must then name a loopback Host, which also defeats DNS rebinding.
   */
  readonly allowUnauthenticatedLocalhost?: boolean;
  /** How many recent failures the Schedule page shows; default 20. */
  readonly pageFailures?: number;
  /**
   * The prefix in front of the routes in the URLs this handler receives: `"/ops"` serves
   * `/ops/admin/scheduler` and `/ops/metrics`, and answers 404 to anything outside `/ops/`.
   * Leave it unset when the framework strips the mount prefix before calling the handler
   * (Express `app.use("/ops", ...)`, Hono's `mount`); the page's links keep the prefix either way.
   */
  readonly basePath?: string;
}

export const MIN_TOKEN_LENGTH = 16;
const REALM = `realm="cronledger admin"`;
const LOOPBACK_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);
const GET_ROUTES = new Set(["/admin/scheduler", "/admin/scheduler/", "/admin/scheduler/status", "/admin/scheduler/failures", "/metrics"]);
const ACTION_PATH = /^\/admin\/scheduler\/jobs\/([^/]+)\/(retry|cancel)$/;
/** How many runs each entry's strip shows, and how many jobs waiting for a retry the page lists. */
const PAGE_RUNS = 20;
const PAGE_RETRYING = 20;
/** Running jobs the page lists (longest-running first). */
const PAGE_RUNNING = 20;
/** The page that confirms a stop (src/admin/page-running.ts). */
/** An operator's backfill of one entry (its key, job name, identity or ledger key, URL-encoded). */
const BACKFILL_PATH = /^\/admin\/scheduler\/entries\/([^/]+)\/backfill$/;
const STOP_PAGE_PATH = /^\/admin\/scheduler\/jobs\/(\d{1,15})\/stop$/;

const BASE_SEGMENT = /^[A-Za-z0-9._~-]+$/;

/** `"ops"`, `"/ops"` and `"/ops/"` give `"/ops"`; unset, `""` and `"/"` give `""` (the root). */
export function normalizeBasePath(basePath: string | undefined): string {
  if (basePath === undefined || basePath === "" || basePath === "/") return "";
  const inner = basePath.replace(/^\//, "").replace(/\/$/, "");
  const segments = inner.split("/");
  if (segments.some((segment) => !BASE_SEGMENT.test(segment) || segment === "." || segment === "..")) {
    throw new ConfigError(
      `Invalid admin basePath ${JSON.stringify(basePath)}: use a path such as "/ops" or "/internal/cron", ` +
        "segments of letters, digits and . _ ~ - between single slashes (no scheme, host, query, \".\" or \"..\").",
    );
  }
  return `/${inner}`;
}

const digest = (value: string) => createHash("sha256").update(value, "utf8").digest();

const BASE_HEADERS = { "cache-control": "no-store", "x-content-type-options": "nosniff", "referrer-policy": "no-referrer" };
// The page runs one script, its own refresh, allowed by its hash; it fetches the page again from this origin, and its forms post back to it.
const PAGE_CSP = `default-src 'none'; style-src 'unsafe-inline'; script-src ${PAGE_SCRIPT_HASH}; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`;

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(`${JSON.stringify(body, null, 2)}\n`, {
    status,
    headers: { ...BASE_HEADERS, "content-type": "application/json; charset=utf-8", ...headers },
  });
}

/** An admin page: HTML under the page's CSP, never framed. */
function html(body: string): Response {
  return new Response(body, {
    status: 200,
    headers: { ...BASE_HEADERS, "content-type": "text/html; charset=utf-8", "content-security-policy": PAGE_CSP, "x-frame-options": "DENY" },
  });
}

const problem = (status: number, code: string, message: string, headers?: Record<string, string>) => json(status, errorDocument(code, message), headers);

/** The credential a request presents: a bearer token, or the password of HTTP Basic (so a browser can open the page). */
function presentedToken(request: Request): string | null {
  const header = request.headers.get("authorization");
  if (header === null) return null;
  const space = header.indexOf(" ");
  if (space === -1) return null;
  const scheme = header.slice(0, space).toLowerCase();
  const value = header.slice(space + 1).trim();
  if (scheme === "bearer") return value;
  if (scheme !== "basic") return null;
  const decoded = Buffer.from(value, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon === -1 ? null : decoded.slice(colon + 1);
}

function hostOf(value: string | null): string | null {
  if (value === null) return null;
  try {
    return new URL(value.includes("://") ? value : `http://${value}`).hostname.toLowerCase();
  } catch {
    return null;
  }
}

/** The page's own view: which entries (by state, which page) and what the action that led here did. */
/** Dynamic entries in the status JSON when no `limit` is given (`?prefix=&after=&limit=` pages them). */
const DYNAMIC_STATUS_LIMIT = 100;

/**
 * The page of dynamic entries a request asks for: `prefix`, `after` and
 * `limit` from its query, validated by `ledger.schedules.list` (an invalid
 * one is a 400 with its message).
 */
function dynamicPage(params: URLSearchParams, limit: number): { prefix: string; after?: string; limit: number } {
  const after = params.get("after");
  const asked = params.get("limit");
  return { prefix: params.get("prefix") ?? "", ...(after === null || after === "" ? {} : { after }), limit: asked === null || asked === "" ? limit : Number(asked) };
}

function pageView(params: URLSearchParams): { state: EntryState | null; page: number; notice: string | null } {
  const stateParam = params.get("state");
  const state = ENTRY_STATES.find((candidate) => candidate === stateParam) ?? null;
  const page = Number(params.get("page") ?? "1");
  const id = (name: string) => (/^\d{1,15}$/.test(params.get(name) ?? "") ? Number(params.get(name)) : null);
  const retried = id("retried");
  const as = id("as");
  const cancelled = id("cancelled");
  let notice: string | null = null;
  if (retried !== null && as !== null) {
    notice =
      params.get("created") === "0"
        ? `Job #${retried} had already been retried as job #${as}; nothing new was queued.`
        : `Job #${retried} retried: it runs again as new job #${as}, queued now. The failed job stays as the record of what happened.`;
  } else if (id("job") !== null && (params.get("refused") === "cancel" || params.get("refused") === "retry")) {
    const code = params.get("code") ?? "";
    const why: Readonly<Record<string, string>> = {
      job_not_cancellable: "it already finished",
      job_not_failed: "it is not a failed job",
      job_not_found: "it does not exist any more",
    };
    notice = `Could not ${params.get("refused")} job #${id("job")}: ${why[code] ?? "the request was refused"}.`;
  } else if (cancelled !== null) {
    const was = params.get("was");
    notice =
      was === "cancelled"
        ? `Job #${cancelled} was already cancelled; nothing changed.`
        : was === "running"
          ? `Job #${cancelled} asked to stop: its worker aborts its signal, and it ends cancelled when its handler returns.`
          : was === "stopping"
            ? `Job #${cancelled} had already been asked to stop; the first request stands.`
            : `Job #${cancelled} cancelled${was === "retrying" ? " while it waited for a retry" : ""}: it will not run.`;
  }
  notice ??= entryActionNotice(params);
  notice ??= unquarantinedNotice(params);
  return { state, page: Number.isInteger(page) && page >= 1 ? page : 1, notice };
}

/** Longest stop reason kept: it is shown on the page and read by the handler, not a document store. */
const MAX_REASON_LENGTH = 500;

/** The `reason` of a cancel: a form field from the page, or a JSON body's `reason`; none when absent or unreadable. */
async function cancelReason(request: Request): Promise<{ reason?: string }> {
  const type = request.headers.get("content-type") ?? "";
  let value: unknown;
  try {
    if (type.includes("application/x-www-form-urlencoded") || type.includes("multipart/form-data")) value = (await request.formData()).get("reason");
    else if (type.includes("application/json")) value = ((await request.json()) as { reason?: unknown } | null)?.reason;
  } catch {
    return {};
  }
  return typeof value === "string" && value.trim() !== "" ? { reason: value.trim().slice(0, MAX_REASON_LENGTH) } : {};
}

/** A backfill's JSON body: `from`, `to` (ISO instants with offset or Z), optional `dry_run`, `max`, `latest`, `force`. */
async function backfillOptions(request: Request): Promise<BackfillOptions> {
  let body: Record<string, unknown>;
  try {
    body = (await request.json()) as Record<string, unknown>;
  } catch {
    throw new InvalidArgumentError('Send the backfill as JSON: {"from": "2026-05-01T00:00:00Z", "to": "2026-05-02T00:00:00Z", "dry_run": true}.');
  }
  const { from, to, dry_run: dryRun, max, latest, force } = body ?? {};
  if (typeof from !== "string" || typeof to !== "string") throw new InvalidArgumentError("A backfill needs `from` and `to`, ISO 8601 instants with offset or Z.");
  const flag = (value: unknown, name: string) => {
    if (value !== undefined && typeof value !== "boolean") throw new InvalidArgumentError(`\`${name}\` must be true or false.`);
    return value === true;
  };
  if (max !== undefined && (typeof max !== "number" || !Number.isInteger(max) || max < 1)) throw new InvalidArgumentError("`max` must be a positive integer.");
  return { from, to, dryRun: flag(dryRun, "dry_run"), latest: flag(latest, "latest"), force: flag(force, "force"), ...(max === undefined ? {} : { max }) };
}

function failureFilter(params: URLSearchParams): FailureFilter {
  const limit = params.get("limit");
  const jobType = params.get("job_type");
  const before = params.get("before");
  if (limit !== null && !/^\d{1,6}$/.test(limit)) throw new InvalidFailureFilterError("limit must be a positive integer.");
  return {
    ...(jobType !== null && jobType !== "" ? { jobType } : {}),
    ...(limit !== null ? { limit: Number(limit) } : {}),
    ...(before !== null && before !== "" ? { before } : {}),
  };
}

/**
 * The admin API and Schedule page as a web-standard handler: mount it in
 * any framework that speaks Request/Response, or serve it with
 * startAdminServer. Every route needs the token; a request without it gets
 * 401 and nothing else. A path outside `basePath` gets 404, token or not.
 */
export function createAdminHandler(ledger: AdminLedger, options: AdminHandlerOptions = {}): AdminHandler {
  const token = options.token === "" ? undefined : options.token;
  if (token === undefined && options.allowUnauthenticatedLocalhost !== true) {
    throw new ConfigError(
      "The admin handler needs a token: pass { token } (send it as `Authorization: Bearer <token>`), " +
        "or { allowUnauthenticatedLocalhost: true } if and only if it is served on 127.0.0.1 alone.",
    );
  }
  if (token !== undefined && token.length < MIN_TOKEN_LENGTH) {
    throw new ConfigError(`The admin token must be at least ${MIN_TOKEN_LENGTH} characters; generate one with \`openssl rand -hex 32\`.`);
  }
  const expected = token === undefined ? null : digest(token);
  const pageFailures = options.pageFailures ?? 20;
  const base = normalizeBasePath(options.basePath);
  // The route of a path under the base (the base removed); null when the path lies outside it.
  const routeOf = (pathname: string): string | null => {
    if (base === "") return pathname;
    return pathname.startsWith(`${base}/`) ? pathname.slice(base.length) : null;
  };

  const authorized = (request: Request): boolean => {
    if (expected === null) return LOOPBACK_HOSTS.has(hostOf(request.headers.get("host") ?? request.url) ?? "");
    const presented = presentedToken(request);
    // Comparing equal-length digests keeps the time independent of where, and whether, the strings differ.
    return timingSafeEqual(digest(presented ?? ""), expected) && presented !== null;
  };

  // A browser that holds the credentials (Basic) or reaches a loopback server can be made to post from another site.
  const crossSite = (request: Request): boolean => {
    if (request.headers.get("sec-fetch-site") === "cross-site") return true;
    const origin = request.headers.get("origin");
    return origin !== null && origin !== "null" && hostOf(origin) !== hostOf(request.headers.get("host") ?? request.url);
  };

  const route = async (request: Request, path: string, params: URLSearchParams): Promise<Response> => {
    const method = request.method === "HEAD" ? "GET" : request.method;
    if (GET_ROUTES.has(path) && method !== "GET") return problem(405, "method_not_allowed", "Use GET.", { allow: "GET, HEAD" });
    if (path === "/admin/scheduler/status") return json(200, statusDocument(await ledger.status({ dynamic: dynamicPage(params, DYNAMIC_STATUS_LIMIT) })));
    if (path === "/admin/scheduler/failures") return json(200, failuresDocument(await ledger.failures(failureFilter(params))));
    if (path === "/admin/scheduler" || path === "/admin/scheduler/") return schedulePageRoute(ledger, path, params, pageFailures);
    const stopPage = STOP_PAGE_PATH.exec(path);
    if (stopPage && method === "GET") {
      const id = Number(stopPage[1]);
      const [job] = await ledger.running({ limit: 1, id });
      return html(renderStopConfirmation(id, job, new Date(), STYLE));
    }
    if (path === "/metrics") {
      if (ledger.metrics === null) return problem(404, "metrics_disabled", "This ledger was created with metrics: false.");
      const registry = ledger.metrics.registry;
      return new Response(await registry.metrics(), { status: 200, headers: { ...BASE_HEADERS, "content-type": registry.contentType } });
    }
    const entryAction = ENTRY_ACTION_PATH.exec(path);
    if (entryAction) {
      if (method !== "POST") return problem(405, "method_not_allowed", "Use POST.", { allow: "POST" });
      if (crossSite(request)) return problem(403, "cross_site", "Cross-site requests cannot change schedule entries.");
      const done = await runEntryAction(ledger, entryAction[1] ?? "", request);
      if ((request.headers.get("accept") ?? "").includes("text/html")) {
        return new Response(null, { status: 303, headers: { ...BASE_HEADERS, location: `../../scheduler?${done.pageQuery}#${done.anchor}` } });
      }
      return json(200, done.document);
    }
    if (path === "/admin/scheduler/quarantine/clear") return clearQuarantineRoute(ledger, request, method, params, crossSite(request));
    const action = ACTION_PATH.exec(path);
    if (action) return jobActionRoute(ledger, request, method, action, crossSite(request));
    const backfill = BACKFILL_PATH.exec(path);
    if (backfill) {
      if (method !== "POST") return problem(405, "method_not_allowed", "Use POST.", { allow: "POST" });
      if (crossSite(request)) return problem(403, "cross_site", "Cross-site requests cannot backfill entries.");
      const result = await ledger.backfill(decodeURIComponent(backfill[1] ?? ""), await backfillOptions(request)).catch((error: unknown) => {
        // The refusal names the body's "force": true, not the API's option or the CLI's flag.
        throw error instanceof BackfillTooLargeError ? error.on("http") : error;
      });
      return json(200, backfillDocument(result));
    }
    return problem(404, "not_found", "No such admin route.");
  };

  return async (received, context) => {
    const request = requestToRoute(received, context);
    const url = new URL(request.url);
    const path = routeOf(url.pathname);
    // Not an admin path, so no challenge: a handler that is an app's fallback must not make browsers prompt on the app's pages.
    if (path === null) return problem(404, "not_found", "No such admin route.");
    if (!authorized(request)) return unauthorized(request, path);
    if (request.bodyUsed) {
      return problem(
        400,
        "body_already_read",
        "A body parser read this request's body before the admin routes: pass what it parsed, handler(request, { body }) (the README's admin routes show it for each framework).",
      );
    }
    try {
      return await route(request, path, url.searchParams);
    } catch (error) {
      // The caller's mistakes are answered with their code and message (see ERROR_HTTP_STATUS); the server's are logged, not shown.
      const status = error instanceof CronledgerError ? ERROR_HTTP_STATUS[error.code] : 500;
      if (error instanceof CronledgerError && status < 500) return problem(status, error.code, error.message);
      logFailure(ledger.logger, "error", "admin request failed", { method: request.method, path: url.pathname }, error);
      return problem(500, "internal_error", "The request failed; the server log has the details.");
    }
  };
}

/** The pages a browser opens: the Schedule page (with or without the slash it then redirects) and a stop's confirmation. */
const isPage = (path: string, method: string) =>
  path === "/admin/scheduler" || path === "/admin/scheduler/" || ((method === "GET" || method === "HEAD") && STOP_PAGE_PATH.test(path));

/**
 * A request without the token. A browser opening a page, or any admin GET
 * it asks HTML of (a link shared to a colleague), gets a Basic challenge, so
 * it prompts for the token (as the password) instead of showing JSON, and
 * an HTML note if the prompt is dismissed; API clients get Bearer and JSON.
 */
function unauthorized(request: Request, path: string): Response {
  const method = request.method;
  const wantsHtml = (method === "GET" || method === "HEAD") && (request.headers.get("accept") ?? "").includes("text/html");
  const message = "Send the admin token as `Authorization: Bearer <token>`.";
  if (!isPage(path, method) && !wantsHtml) return problem(401, "unauthorized", message, { "www-authenticate": `Bearer ${REALM}` });
  const challenge = { "www-authenticate": `Basic ${REALM}, charset="UTF-8"` };
  if (!wantsHtml) return problem(401, "unauthorized", message, challenge);
  const body = `${documentHead("Sign in: cronledger admin", STYLE)}
<body><main><h1>Sign in</h1><p>This page needs the admin token: reload it and give the token as the password (any user name).</p></main></body>
</html>
`;
  return new Response(body, {
    status: 401,
    headers: { ...BASE_HEADERS, ...challenge, "content-type": "text/html; charset=utf-8", "content-security-policy": PAGE_CSP, "x-frame-options": "DENY" },
  });
}

/** The request the routes read: with the body a framework already parsed in place of its spent stream. */
function requestToRoute(request: Request, context: AdminRequestContext | undefined): Request {
  const body: unknown = typeof context === "object" && context !== null && "body" in context ? context.body : undefined;
  if (body === undefined || request.method !== "POST") return request;
  return withParsedBody(request, body);
}

/**
 * `POST /admin/scheduler/quarantine/clear?key=<ledger key>` (or `key` in a
 * form body): clears the entry's quarantine; every replica's next pass fires
 * its due slot. 404 when no ledger row has the key.
 */
/** The Schedule page: its status, failures, retrying and running jobs read together. */
async function schedulePageRoute(ledger: AdminLedger, path: string, params: URLSearchParams, pageFailures: number): Promise<Response> {
  // The page's relative links and form assume no trailing slash.
  if (path.endsWith("/")) return new Response(null, { status: 308, headers: { ...BASE_HEADERS, location: "../scheduler" } });
  const view = pageView(params);
  // Strips only for the entries this page shows (PAGE_ENTRIES x PAGE_RUNS rows at most), read with the status itself.
  const runs = { limit: PAGE_RUNS, state: view.state, page: view.page, perPage: PAGE_ENTRIES };
  const [status, failures, retrying, running] = await Promise.all([
    // The dynamic entries' page gets the same strips, read for its PAGE_DYNAMIC keys only (src/status/dynamic-strips.ts).
    ledger.status({ runs, dynamic: { ...dynamicPage(params, PAGE_DYNAMIC), runs: PAGE_RUNS } }),
    ledger.failures({ limit: pageFailures }),
    ledger.retrying({ limit: PAGE_RETRYING }),
    ledger.running({ limit: PAGE_RUNNING }),
  ]);
  return html(renderSchedulePage(status, failures.failures, { ...view, retrying, running, upcoming: ledger.entries }));
}

/** A job's retry or cancel (ACTION_PATH): its JSON document, or for the Schedule page's forms a redirect back to it saying what was done. */
async function jobActionRoute(ledger: AdminLedger, request: Request, method: string, action: RegExpExecArray, crossSite: boolean): Promise<Response> {
  const verb = action[2] === "cancel" ? "cancel" : "retry";
  if (method !== "POST") return problem(405, "method_not_allowed", "Use POST.", { allow: "POST" });
  if (crossSite) return problem(403, "cross_site", `Cross-site requests cannot ${verb} jobs.`);
  const id = action[1] ?? "";
  if (!/^\d{1,15}$/.test(id)) return problem(400, "invalid_job_id", "The job id must be a positive integer.");
  // A form on the Schedule page posted this: send the browser back to it, saying what was done.
  const fromPage = (request.headers.get("accept") ?? "").includes("text/html");
  const backToPage = (query: string, anchor: string) => new Response(null, { status: 303, headers: { ...BASE_HEADERS, location: `../../../scheduler?${query}#${anchor}` } });
  try {
    if (verb === "cancel") {
      const cancelled = await ledger.cancelJob(Number(id), { by: "admin", ...(await cancelReason(request)) });
      if (fromPage) return backToPage(`cancelled=${cancelled.id}&was=${cancelled.was}`, cancelled.stop === null ? "retrying" : "running");
      return json(200, cancelledDocument(cancelled));
    }
    const retried = await ledger.retryJob(Number(id));
    if (fromPage) return backToPage(`retried=${retried.retryOf}&as=${retried.id}&created=${retried.created ? 1 : 0}`, `failure-${retried.retryOf}`);
    return json(retried.created ? 201 : 200, retriedDocument(retried));
  } catch (error) {
    // A refused action (the job started running, or is gone) comes back to the page too, saying why.
    if (fromPage && error instanceof CronledgerError && ERROR_HTTP_STATUS[error.code] < 500) {
      return backToPage(`refused=${verb}&job=${id}&code=${error.code}`, verb === "cancel" ? "retrying" : "failures");
    }
    throw error;
  }
}

async function clearQuarantineRoute(ledger: AdminLedger, request: Request, method: string, params: URLSearchParams, crossSite: boolean): Promise<Response> {
  if (method !== "POST") return problem(405, "method_not_allowed", "Use POST.", { allow: "POST" });
  if (crossSite) return problem(403, "cross_site", "Cross-site requests cannot clear quarantines.");
  const form = (request.headers.get("content-type") ?? "").includes("application/x-www-form-urlencoded") ? new URLSearchParams(await request.text()) : undefined;
  const key = params.get("key") ?? form?.get("key") ?? "";
  if (key === "") return problem(400, "invalid_key", "Name the entry's ledger key: ?key=<key> (the `key` in the status).");
  const cleared = await ledger.clearQuarantine(key);
  if (cleared === null) return problem(404, "not_found", "No ledger row has this key in this namespace.");
  // The Schedule page's button posted this: back to the page, saying what was done.
  if ((request.headers.get("accept") ?? "").includes("text/html")) {
    return new Response(null, { status: 303, headers: { ...BASE_HEADERS, location: `../../scheduler?unquarantined=${encodeURIComponent(cleared.jobName)}` } });
  }
  return json(200, unquarantinedDocument(key, cleared));
}

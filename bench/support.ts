import { execFileSync } from "node:child_process";
import { cpus, loadavg } from "node:os";
import postgres from "postgres";

export const BENCH_SERVER = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/** A whole number from the environment, for sizes and rounds: `BENCH_ROUNDS=1 npm run bench` is a quick run. */
export function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw.replace(/_/g, ""));
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name}=${raw} is not a positive number`);
  return value;
}

/** A comma-separated list from the environment, or the fallback. */
export function envList(name: string, fallback: readonly string[]): string[] {
  const raw = process.env[name];
  return raw === undefined || raw.trim() === "" ? [...fallback] : raw.split(",").map((item) => item.trim()).filter(Boolean);
}

function withDatabase(name: string): string {
  const url = new URL(BENCH_SERVER);
  url.pathname = `/${name}`;
  return url.toString();
}

async function onServer(statement: string): Promise<void> {
  const admin = postgres(BENCH_SERVER, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(statement);
  } finally {
    await admin.end({ timeout: 1 });
  }
}

/** A fresh database on the bench server, so every run and every peer starts from empty tables. */
export async function freshDatabase(name: string): Promise<string> {
  await onServer(`drop database if exists "${name}" with (force)`);
  await onServer(`create database "${name}"`);
  return withDatabase(name);
}

/** The database `name` on the bench server, made if it does not exist; whether it existed. */
export async function keptDatabase(name: string): Promise<{ url: string; existed: boolean }> {
  const admin = postgres(BENCH_SERVER, { max: 1, onnotice: () => {} });
  try {
    const [row] = await admin<{ n: number }[]>`select count(*)::int as n from pg_database where datname = ${name}`;
    if ((row?.n ?? 0) > 0) return { url: withDatabase(name), existed: true };
  } finally {
    await admin.end({ timeout: 1 });
  }
  return { url: await freshDatabase(name), existed: false };
}

export async function dropDatabase(name: string): Promise<void> {
  await onServer(`drop database if exists "${name}" with (force)`);
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** Median and range of one figure over the rounds. */
export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly n: number;
}

export function spread(values: readonly number[]): Spread {
  const finite = values.filter(Number.isFinite);
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite), n: finite.length };
}

export function formatNumber(value: number, digits = 0): string {
  if (!Number.isFinite(value)) return "n/a";
  return value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** "41,426 (39,994–43,484)": the median, then the range over the rounds. */
export function formatSpread(figure: Spread | undefined, digits = 0): string {
  if (figure === undefined || figure.n === 0) return "n/a";
  if (figure.n === 1) return formatNumber(figure.median, digits);
  return `${formatNumber(figure.median, digits)} (${formatNumber(figure.min, digits)}–${formatNumber(figure.max, digits)})`;
}

/** A GitHub-flavoured markdown table, so the output pastes into docs/benchmarks.md as it is. */
export function markdownTable(headers: readonly string[], rows: readonly (readonly string[])[], alignRight: (column: number) => boolean = (column) => column > 0): string {
  const line = (cells: readonly string[]) => `| ${cells.join(" | ")} |`;
  return [line(headers), line(headers.map((_, column) => (alignRight(column) ? "---:" : "---"))), ...rows.map(line)].join("\n");
}

export function printSection(title: string, body: string): void {
  console.log(`\n### ${title}\n\n${body}`);
}

/** Cores, load averages and versions: printed before and after, since a busy machine moves every figure. */
export async function machineLine(when: string): Promise<string> {
  const [one, five, fifteen] = loadavg().map((value) => value.toFixed(2));
  let server = "unknown";
  const admin = postgres(BENCH_SERVER, { max: 1, onnotice: () => {} });
  try {
    const [row] = await admin<{ version: string }[]>`select current_setting('server_version') as version`;
    server = row?.version ?? server;
  } catch {
    server = "unreachable";
  } finally {
    await admin.end({ timeout: 1 });
  }
  let bouncer = "not installed";
  try {
    bouncer = execFileSync("pgbouncer", ["--version"], { encoding: "utf8", env: { ...process.env, PATH: `${process.env.PATH ?? ""}:/usr/sbin` } }).split("\n")[0] ?? bouncer;
  } catch {
    // reported as not installed
  }
  return `${when}: ${new Date().toISOString()}, ${cpus().length} cores, load average ${one} / ${five} / ${fifteen} (1/5/15 min), Node ${process.version}, PostgreSQL ${server}, ${bouncer}`;
}

/** Round r runs the systems starting at the r-th: A B C, B C A, C A B. */
export function rotate<T>(items: readonly T[], round: number): T[] {
  const offset = items.length === 0 ? 0 : round % items.length;
  return [...items.slice(offset), ...items.slice(0, offset)];
}

/** A title and console.table of rows: for benches whose figures are one table of plain values. */
export function printTable(title: string, rows: readonly Record<string, string | number>[]): void {
  console.log(`\n${title}`);
  console.table(rows);
}

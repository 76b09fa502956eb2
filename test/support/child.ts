import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const CLI = fileURLToPath(new URL("../../bin/cronledger.js", import.meta.url));

/** The parent's environment without a database: children pick their own, or the embedded default. */
export function envWithout(...names: string[]): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of names) delete env[name];
  return env;
}

export interface Finished {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** A child process whose output the test can wait on line by line. */
export interface Watched {
  readonly child: ChildProcess;
  output(): string;
  /** Resolves with the output so far once `pattern` appears in it; rejects after `timeoutMs`. */
  waitFor(pattern: RegExp, timeoutMs: number): Promise<string>;
  readonly exited: Promise<Finished>;
}

export function watch(command: string, args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Watched {
  const child = spawn(command, args, { cwd: options.cwd ?? REPO_ROOT, env: options.env ?? process.env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  let closed = false;
  const waiters = new Set<() => void>();
  const changed = () => waiters.forEach((check) => check());
  child.stdout?.on("data", (chunk: Buffer) => ((stdout += chunk.toString()), changed()));
  child.stderr?.on("data", (chunk: Buffer) => ((stderr += chunk.toString()), changed()));
  const exited = new Promise<Finished>((resolve) => {
    child.on("close", (code, signal) => {
      closed = true;
      resolve({ code, signal, stdout, stderr });
      changed();
    });
  });
  const output = () => stdout + stderr;
  return {
    child,
    output,
    exited,
    waitFor(pattern, timeoutMs) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out after ${timeoutMs} ms waiting for ${pattern}; output so far:\n${output()}`));
        }, timeoutMs);
        const check = () => {
          if (pattern.test(output())) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve(output());
          } else if (closed) {
            clearTimeout(timer);
            waiters.delete(check);
            reject(new Error(`process ended before ${pattern} appeared; output:\n${output()}`));
          }
        };
        waiters.add(check);
        check();
      });
    },
  };
}

/** Runs the real `cronledger` binary to completion. */
export function runCli(args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Finished> {
  return watch(process.execPath, [CLI, ...args], options).exited;
}

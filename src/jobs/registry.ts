import { ConfigError } from "../errors.js";
import type { JobDefinition } from "./define-job.js";

/**
 * The jobs a process can run, by name. Job names are identities stored in
 * rows, so two different definitions may not share one, and the chores'
 * names are reserved.
 */
export function jobRegistry(jobs: readonly JobDefinition[], chores: readonly JobDefinition[]): ReadonlyMap<string, JobDefinition> {
  const registry = new Map<string, JobDefinition>();
  for (const job of jobs) {
    const other = registry.get(job.name);
    if (other !== undefined && other !== job) {
      throw new ConfigError(`Two different jobs are named "${job.name}": job names are identities and must be unique.`);
    }
    registry.set(job.name, job);
  }
  for (const job of chores) {
    if (registry.has(job.name)) throw new ConfigError(`The job name "${job.name}" is reserved for cronledger's chores; rename your job.`);
    registry.set(job.name, job);
  }
  return registry;
}

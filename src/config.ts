import type { CronledgerConfig } from "./options.js";

export type { CronledgerConfig } from "./options.js";

/** Types a config file's default export; returns it unchanged. */
export function defineConfig(config: CronledgerConfig): CronledgerConfig {
  return config;
}

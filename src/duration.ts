import { InvalidDurationError } from "./errors.js";

/** A duration as milliseconds or a string like "500ms", "30s", "2m", "1h", "1d". */
export type Duration = number | `${number}${"ms" | "s" | "m" | "h" | "d"}`;

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const DURATION_PATTERN = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/;

export function parseDuration(value: unknown, what = "duration"): number {
  if (typeof value === "number") {
    if (Number.isFinite(value) && value >= 0) return value;
    throw new InvalidDurationError(value, what);
  }
  if (typeof value === "string") {
    const match = DURATION_PATTERN.exec(value.trim());
    if (match?.[1] !== undefined && match[2] !== undefined) {
      return Math.round(Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]);
    }
  }
  throw new InvalidDurationError(value, what);
}

import { InvalidTimezoneError } from "../errors.js";

// Schedules repeat a few timezones many times; a DateTimeFormat per entry would dominate validating 50,000 of them.
const resolvedZones = new Map<string, string>();

function resolvedZone(timezone: string): string {
  let zone = resolvedZones.get(timezone);
  if (zone === undefined) {
    zone = new Intl.DateTimeFormat("en-US", { timeZone: timezone }).resolvedOptions().timeZone;
    resolvedZones.set(timezone, zone);
  }
  return zone;
}

export function assertTimezone(timezone: string): void {
  if (typeof timezone !== "string" || timezone.trim() === "") throw new InvalidTimezoneError(String(timezone));
  try {
    resolvedZone(timezone);
  } catch {
    throw new InvalidTimezoneError(timezone);
  }
}

let knownByLowerCase: Map<string, string> | undefined;

/**
 * The timezone as written, with its letter case corrected (`europe/berlin`
 * -> `Europe/Berlin`), for the entry's identity. Aliases keep their own name
 * (`US/Eastern` stays `US/Eastern`): ICU's choice of the primary name
 * changes between Node versions (`Asia/Calcutta` vs `Asia/Kolkata`), and an
 * identity that moved with it would start a new ledger row on an upgrade.
 */
export function timezoneSpelling(timezone: string): string {
  assertTimezone(timezone);
  if (knownByLowerCase === undefined) {
    knownByLowerCase = new Map(Intl.supportedValuesOf("timeZone").map((name) => [name.toLowerCase(), name]));
  }
  const lower = timezone.toLowerCase();
  const listed = knownByLowerCase.get(lower);
  if (listed !== undefined) return listed;
  const resolved = resolvedZone(timezone);
  return resolved.toLowerCase() === lower ? resolved : timezone;
}

/**
 * The zone ICU resolves a name to: two spellings with the same zone
 * (`US/Eastern`, `America/New_York`) fire at the same instants, so they count
 * as one timing when looking for duplicate entries.
 */
export function zoneOf(timezone: string): string {
  return resolvedZone(timezone);
}

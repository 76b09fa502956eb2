import type { EntryStatus } from "../status/model.js";

/**
 * The Schedule page's button that clears a quarantined entry's quarantine
 * (`POST scheduler/quarantine/clear`, src/admin/handler.ts): every replica's
 * next pass fires the entry's due slot. Empty for an entry not quarantined.
 * `escape` is the page's HTML escaping (src/admin/page.ts), passed in so
 * this module does not import the page back.
 */
export function clearQuarantineForm(entry: EntryStatus, escape: (value: unknown) => string): string {
  if (entry.quarantine === null) return "";
  return `<form method="post" action="scheduler/quarantine/clear"><input type="hidden" name="key" value="${escape(entry.key)}"><button type="submit">Clear the quarantine</button></form>`;
}

/** The notice the page shows after the button's post came back: `unquarantined=<job>`. */
export function unquarantinedNotice(params: URLSearchParams): string | null {
  const job = params.get("unquarantined");
  return job === null || job === "" ? null : `Quarantine of ${job} cleared: every replica's next pass fires its due slot.`;
}

import type { CarriedState, DeployPlan, PlanEntry, PlanRow, RemovedRow } from "../schedule/deploy-plan.js";
import { duration, localTime, type UpcomingSlot } from "../schedule/upcoming.js";
import type { ResolvedEntry } from "../schedule/validate.js";
import { plural } from "./format.js";

/**
 * The deploy plan as sentences, for people: plain text for a terminal and
 * markdown for a pull-request comment, from one list of sections so the
 * two say the same. The JSON is src/wire/plan.ts.
 */

interface Section {
  readonly title: string;
  readonly items: readonly { readonly head: string; readonly details: readonly string[] }[];
}

export type PlanStyle = "text" | "markdown";

const iso = (ms: number) => new Date(ms).toISOString();

/** `preflight`: the config's preflight verdict and problems, for a markdown comment that carries them too. */
export function planLines(plan: DeployPlan, config: string, style: PlanStyle, preflight?: { readonly verdict: string; readonly problems: readonly string[] }): string[] {
  const sections = planSections(plan);
  const lines: string[] = [];
  const header = `Deploy plan of ${config} against namespace "${plan.namespace}": database clock ${iso(plan.nowMs)}, switch at ${iso(plan.atMs)}, ${plural(plan.liveWorkers, "live worker")}.`;
  const counts = countLine(plan);
  if (style === "markdown") {
    lines.push("### cronledger deploy plan", "", header, "", `**${verdict(plan)}** ${counts}`);
    if (preflight) {
      lines.push("", "#### Preflight", "", preflight.verdict);
      if (preflight.problems.length > 0) lines.push("", ...preflight.problems.map((problem) => `- ${problem}`));
    }
    for (const section of sections) {
      lines.push("", `#### ${section.title}`, "");
      for (const item of section.items) {
        lines.push(`- ${item.head}`);
        for (const detail of item.details) lines.push(`  - ${detail}`);
      }
    }
    return lines;
  }
  lines.push(header, counts);
  for (const section of sections) {
    lines.push("", `${section.title}:`);
    for (const item of section.items) {
      lines.push(`  ${item.head}`);
      for (const detail of item.details) lines.push(`    ${detail}`);
    }
  }
  lines.push("", verdict(plan));
  return lines;
}

function countLine(plan: DeployPlan): string {
  const of = (kind: PlanEntry["kind"]) => plan.entries.filter((item) => item.kind === kind && !item.chore).length;
  return `Entries: ${of("added")} added, ${of("retimed")} retimed, ${of("rekeyed")} re-keyed, ${plan.removed.filter((item) => !item.chore).length} removed, ${of("unchanged")} unchanged.`;
}

export function verdict(plan: DeployPlan): string {
  const retiring = plan.removed.filter((item) => !item.chore).length + plan.entries.filter((item) => !item.chore && item.row !== null && item.kind !== "unchanged").length;
  const parts = [
    plan.retiresRows ? `retires ${plural(retiring, "ledger row")}` : null,
    plan.dropsJobNames ? `drops ${plural(plan.droppedJobNames.length, "job name")} (${plan.droppedJobNames.map((name) => name.jobName).join(", ")})` : null,
    plan.orphansDynamicEntries ? `orphans ${plural(plan.dynamicOrphans?.total ?? 0, "dynamic entry", "dynamic entries")}` : null,
  ].filter((part): part is string => part !== null);
  return parts.length === 0 ? "Nothing retires and no job name is dropped." : `Needs approval: the plan ${parts.join(" and ")}.`;
}

function planSections(plan: DeployPlan): Section[] {
  const changed = plan.entries.filter((item) => item.kind !== "unchanged");
  const unchanged = plan.entries.filter((item) => item.kind === "unchanged");
  const overdue = unchanged.filter((item) => item.overdue !== null);
  const carried = unchanged.filter((item) => item.row !== null && hasCarried(item.row.carried));
  const sections: Section[] = [
    { title: "Added", items: changed.filter((item) => item.kind === "added").map((item) => added(item, plan)) },
    { title: "Retimed or re-keyed (the identity changes)", items: changed.filter((item) => item.kind !== "added").map((item) => retimed(item, plan)) },
    { title: "Removed", items: plan.removed.map((item) => removed(item)) },
    { title: "Overdue on start", items: overdue.map((item) => overdueItem(item, plan)) },
    { title: "Carried state", items: carried.map((item) => ({ head: `${name(item.entry)}`, details: carriedLines(item.row?.carried) })) },
    {
      title: "Job names no live worker registers yet (their jobs wait until the new workers start)",
      items: plan.unservedJobNames.map((jobName) => ({ head: code(jobName), details: [] })),
    },
    {
      title: "Job names the new config drops",
      items: plan.droppedJobNames.map((dropped) => ({
        head: code(dropped.jobName),
        details: [`${plural(dropped.queued, "queued job")}, ${dropped.running} running: they wait for a worker that knows the name, and the prune chore fails them after chores.failUnregisteredAfter`],
      })),
    },
    {
      title: "Dynamic entries (ledger.schedules) of job names the new config does not define",
      items: Object.entries(plan.dynamicOrphans?.byJob ?? {}).map(([jobName, count]) => ({
        head: `${code(jobName)}: ${plural(count, "entry", "entries")}`,
        details: [`they keep firing jobs no worker of the new config runs: keep the job, or remove them first (\`cronledger schedules list\`, \`remove\`)`],
      })),
    },
  ];
  return sections.filter((section) => section.items.length > 0);
}

function code(text: string): string {
  return `\`${text}\``;
}

function name(entry: ResolvedEntry): string {
  return `${code(entry.jobName)}${entry.entryKey === undefined ? "" : ` [${entry.entryKey}]`} ${code(entry.cron.source)} ${entry.timezone}`;
}

function rowName(row: PlanRow): string {
  const identity = row.identity;
  if (identity === null) return `${code(row.jobName)} (row ${code(row.key)})`;
  return `${code(identity.jobName)}${identity.entryKey === undefined ? "" : ` [${identity.entryKey}]`} ${code(identity.cron)} ${identity.timezone}`;
}

function slotText(slot: UpcomingSlot | null): string {
  if (slot === null) return "never fires";
  const fires = slot.fireMs === slot.slotMs ? "" : `, fires ${iso(slot.fireMs)} (jitter)`;
  return `${slot.local} (${iso(slot.slotMs)}${fires})${slot.notes.length > 0 ? `: ${slot.notes.map((note) => note.message).join("; ")}` : ""}`;
}

function served(item: PlanEntry): string[] {
  return item.served ? [] : [`no live worker registers ${code(item.entry.jobName)} yet: its jobs wait until the new workers start`];
}

function added(item: PlanEntry, plan: DeployPlan): { head: string; details: string[] } {
  return {
    head: `${name(item.entry)}${item.chore ? " (chore)" : ""}`,
    details: [`first slot ${slotText(item.first)}; never retroactive: nothing before the switch (${iso(plan.atMs)}) fires`, ...served(item)],
  };
}

function retimed(item: PlanEntry, plan: DeployPlan): { head: string; details: string[] } {
  const row = item.row as PlanRow;
  const kind = item.kind === "rekeyed" ? "re-keyed" : "retimed";
  const details = [
    `the old row retires after the prune grace (${duration(plan.graceMs)}), not before ${iso(item.retiresAtMs ?? plan.atMs)}`,
    `first new slot ${slotText(item.first)}`,
  ];
  if (item.switchCheck) details.push(`${item.switchCheck.verdict === "ok" ? "" : "⚠ "}${item.switchCheck.message}`);
  if (row.queued + row.running > 0) details.push(`the old row has ${plural(row.queued, "queued job")} and ${row.running} running: they still run (same job name)`);
  for (const line of carriedLines(row.carried)) details.push(`old row: ${line}; the new identity does not inherit it`);
  details.push(...served(item));
  return { head: `${rowName(row)} → ${name(item.entry)} (${kind})`, details };
}

function removed(item: RemovedRow): { head: string; details: string[] } {
  const { row } = item;
  const registered = item.servedByNewConfig
    ? "the new config still registers the job"
    : item.servedByLiveWorker
      ? "only the old version's live workers register the job: once they stop, its jobs wait for a worker that never comes"
      : "no live worker and not the new config registers the job";
  return {
    head: `${rowName(row)}${item.chore ? " (chore)" : ""}`,
    details: [
      `its row retires after the prune grace, not before ${iso(item.retiresAtMs)}; ${row.handled ? `its last slot was ${iso(row.lastSlotMs)}` : `it never fired (its row was created ${iso(row.lastSlotMs)})`}`,
      `${plural(row.queued, "queued job")}, ${row.running} running; ${registered}`,
      ...carriedLines(row.carried),
    ],
  };
}

function overdueItem(item: PlanEntry, plan: DeployPlan): { head: string; details: string[] } {
  const overdue = item.overdue;
  if (overdue === null) return { head: name(item.entry), details: [] };
  const slot = `${localTime(item.entry.timezone, overdue.slotMs)} (${iso(overdue.slotMs)})`;
  const window = duration(item.entry.catchUpWindowMs);
  const when = item.overdueAtMs !== null && item.overdueAtMs > plan.atMs ? `when its quarantine ends (${iso(item.overdueAtMs)})` : "on the first tick";
  const what = overdue.stale
    ? `slot ${slot} is skipped as stale ${when} (older than the catch-up window, ${window})`
    : `slot ${slot} fires at once ${when} (inside the catch-up window, ${window})`;
  const passed = overdue.passedOver > 0 ? [`${plural(overdue.passedOver, "earlier missed slot")} ${overdue.passedOver === 1 ? "is" : "are"} passed over (only the latest due slot is handled)`] : [];
  return { head: name(item.entry), details: [what, ...passed, `then ${slotText(item.first)}`] };
}

function hasCarried(carried: CarriedState): boolean {
  return carried.paused !== null || carried.quarantine !== null || carried.waitingForWorker > 0;
}

function carriedLines(carried: CarriedState | undefined): string[] {
  if (carried === undefined) return [];
  const lines: string[] = [];
  if (carried.paused) {
    const by = carried.paused.by === null ? "" : ` by ${carried.paused.by}`;
    const note = carried.paused.note === null ? "" : ` ("${carried.paused.note}")`;
    lines.push(`paused since ${iso(carried.paused.atMs)}${by}${note}: stays paused, so its slots, the overdue one included, are recorded as skipped until it is resumed`);
  }
  if (carried.quarantine) {
    lines.push(`quarantined until ${iso(carried.quarantine.untilMs)} after ${plural(carried.quarantine.count, "failure")}${carried.quarantine.reason ? `: ${carried.quarantine.reason}` : ""}`);
  }
  if (carried.waitingForWorker > 0) lines.push(`${plural(carried.waitingForWorker, "queued job")} waiting for a worker that knows the job`);
  return lines;
}

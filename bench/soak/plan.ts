// The soak's fault plan: a timeline drawn from a seed, so a run that found a violation is replayed with
// `npm run soak -- --seed S` (same faults at the same offsets; the machine's timing still varies, as in Jepsen).

export const FAULT_KINDS = ["cut", "error-57P01", "error-57014", "error-40001", "slow", "kill", "pg-restart"] as const;
/** Faults a run asks for (`--failover`): one each at most. */
export const OPT_IN_KINDS = ["failover"] as const;
export type FaultKind = (typeof FAULT_KINDS)[number] | (typeof OPT_IN_KINDS)[number];

export interface PlannedFault {
  /** Milliseconds after the soak's start. */
  readonly atMs: number;
  readonly kind: FaultKind;
  /** The replica it hits (0-based); pg-restart hits them all. */
  readonly replica: number;
  /** cut: how long the link is down; slow: how long answers are held up; kill: how long the replica stays dead; pg-restart: how long the server is down. */
  readonly durationMs: number;
  /** error-*: how many statements get it; slow: the delay added to each answer, in ms. */
  readonly amount: number;
  /** pg-restart: how the server stops. */
  readonly mode?: "fast" | "immediate";
}

export interface PlanSettings {
  readonly seed: number;
  readonly minutes: number;
  readonly replicas: number;
  readonly leaseMs: number;
  /** One failover to the streaming standby, in the middle of the run. */
  readonly failover?: boolean;
}

/** mulberry32: a small, well-mixed PRNG whose whole state is the seed. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** How often each kind is drawn once every kind has come up once. */
const WEIGHTS: Readonly<Record<(typeof FAULT_KINDS)[number], number>> = { cut: 4, "error-57P01": 2, "error-57014": 2, "error-40001": 2, slow: 2, kill: 3, "pg-restart": 1 };
/** The first faults come after the replicas have settled; the last leaves room for its own recovery before the drain. */
const SETTLE_MS = 5_000;
const TAIL_MS = 3_000;
/** Between two server restarts: the replicas get back, and the slots in between fire. */
const RESTART_SPACING_MS = 20_000;

function weighted(random: () => number, kinds: readonly (typeof FAULT_KINDS)[number][]): (typeof FAULT_KINDS)[number] {
  const total = kinds.reduce((sum, kind) => sum + WEIGHTS[kind], 0);
  let pick = random() * total;
  for (const kind of kinds) {
    pick -= WEIGHTS[kind];
    if (pick < 0) return kind;
  }
  return kinds[kinds.length - 1] as (typeof FAULT_KINDS)[number];
}

const between = (random: () => number, low: number, high: number) => Math.round(low + random() * (high - low));

function detail(random: () => number, kind: FaultKind, leaseMs: number): Pick<PlannedFault, "durationMs" | "amount" | "mode"> {
  switch (kind) {
    case "cut":
      // From a tenth of the lease (a blip) to twice it (the lease lapses; the reaper elsewhere takes the jobs back).
      return { durationMs: between(random, leaseMs * 0.1, leaseMs * 2), amount: 0 };
    case "slow":
      return { durationMs: between(random, 2_000, 8_000), amount: between(random, 50, 600) };
    case "kill":
      return { durationMs: between(random, 500, 5_000), amount: 0 };
    case "pg-restart":
      return { durationMs: between(random, 500, 4_000), amount: 0, mode: random() < 0.5 ? "fast" : "immediate" };
    default:
      return { durationMs: 0, amount: between(random, 1, 4) };
  }
}

/** Fisher-Yates with the seeded random: the same order for the same seed, on any engine. */
function shuffled<T>(random: () => number, items: readonly T[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j] as T, copy[i] as T];
  }
  return copy;
}

/** Every kind once (in a seeded order) as early as it fits, then weighted draws, one every 2-6 s. */
export function faultPlan(settings: PlanSettings): PlannedFault[] {
  const random = seededRandom(settings.seed);
  const endMs = settings.minutes * 60_000 - TAIL_MS;
  const firsts = shuffled(random, FAULT_KINDS);
  const plan: PlannedFault[] = [];
  let lastRestart = -Infinity;
  for (let atMs = SETTLE_MS; atMs < endMs; atMs += between(random, 2_000, 6_000)) {
    const allowed = FAULT_KINDS.filter((kind) => kind !== "pg-restart" || atMs - lastRestart >= RESTART_SPACING_MS);
    let kind = firsts.shift() ?? weighted(random, allowed);
    if (!allowed.includes(kind)) kind = weighted(random, allowed);
    if (kind === "pg-restart") lastRestart = atMs;
    plan.push({ atMs, kind, replica: Math.floor(random() * settings.replicas), ...detail(random, kind, settings.leaseMs) });
  }
  // Drawn after the rest, from its own stream, so that --failover adds one fault to the seed's plan and moves none.
  if (settings.failover) plan.push(failoverAt(seededRandom(settings.seed ^ 0xfa11), plan, settings.minutes * 60_000));
  return plan.sort((a, b) => a.atMs - b.atMs);
}

/**
 * The failover: in the middle third of the run, as far from every server restart as it can be (they would stop
 * the primary the failover leaves, or the new one while it is promoted), with a random part of up to 2 s.
 */
function failoverAt(random: () => number, plan: readonly PlannedFault[], runMs: number): PlannedFault {
  const restarts = plan.filter((fault) => fault.kind === "pg-restart").map((fault) => fault.atMs);
  const room = (atMs: number) => Math.min(Infinity, ...restarts.map((at) => Math.abs(at - atMs)));
  let best = Math.round(runMs / 3);
  for (let atMs = best; atMs <= (2 * runMs) / 3; atMs += 500) if (room(atMs) > room(best)) best = atMs;
  return { atMs: best + between(random, 0, 2_000), kind: "failover", replica: 0, durationMs: 0, amount: 0, mode: "immediate" };
}

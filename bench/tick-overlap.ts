// A targeted measurement (not part of `npm run bench`): the scheduler's all-due pass over N hourly
// entries, a share of them with an overlap policy (skip, buffer_one, cancel_other in turn), each with a
// live job of the previous slot, so the policies decide in the pass. Prints the pass's time and its
// statements. OVERLAP_SHARE=0 sets no policy at all (what a release without policies can run).
//   npx tsx bench/tick-overlap.ts [entries=10000] [rounds=3]
import postgres from "postgres";
import { createCronledger, defineJob, silentLogger, type ScheduleEntry } from "../src/index.js";
import { dropDatabase, freshDatabase, median } from "./support.js";

const HOUR = 3_600_000;
const START = Date.parse("2026-06-01T00:00:00.000Z");
const size = Number(process.argv[2] ?? "10000");
const rounds = Number(process.argv[3] ?? "3");
const share = Number(process.env.OVERLAP_SHARE ?? "0.1");
const POLICIES = ["skip", "buffer_one", "cancel_other"] as const;
const job = defineJob({ name: "bench.overlap", run: () => {} });

const name = `cl_bench_tick_overlap_${process.pid}`;
const url = await freshDatabase(name);
try {
  const setup = createCronledger({ database: { url, poolSize: 2 }, logger: silentLogger, metrics: false });
  await setup.migrate();
  await setup.close();
  const every = share > 0 ? Math.round(1 / share) : 0;
  const schedule = Array.from({ length: size }, (_, index) => ({
    job,
    cron: "0 * * * *",
    key: `e${index}`,
    ...(every > 0 && index % every === 0 ? { overlap: POLICIES[(index / every) % POLICIES.length] } : {}),
  })) as ScheduleEntry[];
  const times: number[] = [];
  const statements: number[] = [];
  let outcome = "";
  for (let round = 0; round < rounds; round += 1) {
    const probe = postgres(url, { max: 1, onnotice: () => {} });
    await probe.unsafe("truncate cronledger.job_queue, cronledger.job_history, cronledger.job_keys, cronledger.job_counts, cronledger.schedule_last_runs, cronledger.schedule_state");
    await probe.end({ timeout: 1 });
    const ledger = createCronledger({ database: { url, poolSize: 4 }, jobs: [job], schedule, logger: silentLogger, metrics: false, passTimeout: "5m", chores: false });
    try {
      await ledger.tick({ now: new Date(START + 1_000) });
      // Every entry fires: each now has a live (queued) job when the next slot comes.
      await ledger.tick({ now: new Date(START + HOUR + 1_000) });
      const started = performance.now();
      const report = await ledger.tick({ now: new Date(START + 2 * HOUR + 1_000) });
      times.push(performance.now() - started);
      statements.push(report.statements);
      const skipped = (report as { skipped?: unknown[] }).skipped?.length ?? 0;
      outcome = `${report.enqueued.length} enqueued, ${skipped} skipped`;
    } finally {
      await ledger.close();
    }
  }
  console.log(
    `${size} entries, overlap share ${share}: all-due pass with live jobs ${median(times).toFixed(0)} ms (${times.map((ms) => ms.toFixed(0)).join(", ")}), ` +
      `statements ${statements.join(", ")}; ${outcome}`,
  );
} finally {
  await dropDatabase(name);
}

// `npm run bench`: the scheduler tick, the throughput rounds, the database's cost per job, enqueue in a transaction, startup and the status at scale, with the
// machine's state printed before and after (a busy machine moves every figure). Sizes and rounds come
// from the environment (see docs/benchmarks.md); `npm run bench:growth` runs the large sizes.
import { runDrainCostBench } from "./drain-cost.js";
import { runEnqueueTxBench } from "./enqueue-tx.js";
import { runStartupBench } from "./startup.js";
import { runStatusBench } from "./status.js";
import { machineLine } from "./support.js";
import { runThroughputBench } from "./throughput.js";
import { runTickBench } from "./tick.js";
import { runDynamicBench } from "./dynamic.js";
import { runDynamicPageBench } from "./dynamic-page.js";
import { runPgBossSchedulesBench } from "./dynamic-pgboss.js";

console.log(await machineLine("before"));
const started = performance.now();
await runTickBench();
await runThroughputBench();
await runDrainCostBench();
await runEnqueueTxBench();
await runStartupBench();
await runStatusBench();
await runDynamicBench();
await runDynamicPageBench();
await runPgBossSchedulesBench();
console.log(`\n${await machineLine("after")}; the bench took ${((performance.now() - started) / 60_000).toFixed(1)} min`);

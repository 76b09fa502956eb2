// `npm run bench`: every benchmark, one after the other, each printing its table.
import { runStartupBench } from "./startup.js";
import { runThroughputBench } from "./throughput.js";
import { runStatusBench } from "./status.js";
import { runTickBench } from "./tick.js";

await runTickBench();
await runThroughputBench();
await runStartupBench();
await runStatusBench();

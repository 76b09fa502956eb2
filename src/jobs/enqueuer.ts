import type { StandardSchemaV1 } from "./standard-schema.js";
import type { Database } from "../db/connection.js";
import { asExecutor, type Executor } from "../db/executor.js";
import { onLedgerDatabase } from "../db/transaction-database.js";
import type { EnqueueArgs, EnqueuedJob, Enqueuer, EnqueueRequest, EnqueueRequests, JobDefinition, JobReference } from "./define-job.js";
import { enqueueJobs } from "./enqueue.js";
import type { EnqueueManyOptions } from "./enqueue-options.js";
import type { Tracing } from "../tracing.js";

/**
 * The enqueue path, on its own: `ledger.enqueue`, `ledger.enqueueMany` and a
 * handler's `ctx.enqueue` validate every request, then write them in the one
 * job insert (src/jobs/enqueue.ts), on cronledger's database or on the
 * application's database or transaction given as `db`.
 */
export class JobEnqueuer implements Enqueuer {
  constructor(
    private readonly options: {
      readonly database: Database;
      /** The jobs this process knows, by name. */
      readonly jobs: ReadonlyMap<string, JobDefinition>;
      /** Largest stored JSON of an enqueued payload. */
      readonly maxPayloadBytes: number;
      /** With the `tracing` option: each write is a producer span whose context its jobs store (src/tracing.ts). */
      readonly tracing?: Tracing | undefined;
    },
  ) {}

  async enqueue<S extends StandardSchemaV1>(job: JobReference<S>, ...[payload, options = {}]: EnqueueArgs<S>): Promise<EnqueuedJob> {
    const { db, ...rest } = options;
    const [result] = await this.insert([{ job: job as JobReference, payload, options: rest }], db);
    return result as EnqueuedJob;
  }

  enqueueMany<const R extends readonly object[]>(requests: EnqueueRequests<R>, options: EnqueueManyOptions = {}): Promise<EnqueuedJob[]> {
    return this.insert(requests as readonly object[] as readonly EnqueueRequest[], options.db);
  }

  /** Where a write goes: the application's database or transaction when given (checked), else cronledger's own. */
  executor(db: Executor | undefined): Executor {
    return db === undefined ? this.options.database.db : asExecutor(db, "The `db` enqueue option");
  }

  private insert(requests: readonly EnqueueRequest[], db: Executor | undefined): Promise<EnqueuedJob[]> {
    const executor = this.executor(db);
    return onLedgerDatabase(this.options.database, executor, () => enqueueJobs(executor, this.options.jobs, requests, this.options.maxPayloadBytes, this.options.tracing));
  }
}

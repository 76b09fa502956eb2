// The public face of cronledger: everything an application imports.
export { createCronledger, Cronledger } from "./cronledger.js";
export type { CronledgerOptions } from "./options.js";
export type { WorkOptions } from "./jobs/work-options.js";
export type { StartOptions } from "./runtime/start-options.js";
export type { ChoreOptions, ChoresSetting } from "./runtime/chore-options.js";
export type { BrokenEntry, EntryPause, EntryProblem, EntryQuarantine, EntryRun, EntryState, EntryStatus, RunKind, SchedulerStatus, StatusOptions, StatusRunsRequest } from "./status/model.js";
export type { WaitingForWorker } from "./operators/operations.js";
export { ENTRY_STATES, entryHealth, lateToleranceMs } from "./status/health.js";
export type { EntryHealth, HealthInput } from "./status/health.js";
export type { InvalidEntriesMode } from "./options.js";
export type { TracerProviderLike, TracingOptions, TracingSetting } from "./tracing.js";
export type { CancelledJob, CancelRequest, EntryPauseResult, RetryingJob, RunningJob, TriggeredRun } from "./operators/operations.js";
export type { RetryOverride } from "./jobs/retry-override.js";
export { defineConfig } from "./config.js";
export type { CronledgerConfig } from "./config.js";
export type { DatabaseSetting, PgliteInstance } from "./db/connection.js";
export type { Executor } from "./db/executor.js";
export { defineJob, skip, noop } from "./jobs/define-job.js";
export { DEFAULT_MAX_PAYLOAD_BYTES } from "./jobs/payload-limit.js";
export type { AnyPayloadSchema, JobContext, JobDefinition, JobOptions, JobOutcome, JobResult, PayloadInput, PayloadOutput } from "./jobs/define-job.js";
export { isStandardSchema } from "./jobs/standard-schema.js";
export type { StandardSchemaV1 } from "./jobs/standard-schema.js";
export { RETRY_CLASSES, retryDelayMs } from "./jobs/retry.js";
export type { BackoffRetryPolicy, CustomRetryPolicy, RetryClass, RetryPolicy } from "./jobs/retry.js";
export type { EnqueueArgs, EnqueuedJob, EnqueueRequest, EnqueueRequests, NamedEnqueueRequest, TypedEnqueueRequest } from "./jobs/define-job.js";
export type { EnqueueOptions } from "./jobs/enqueue-options.js";
export type { WorkSummary } from "./jobs/completion.js";
export type { ReapReport, RetentionOptions } from "./operators/operations.js";
export type { FailureFilter, FailurePage, FailureTicket } from "./operators/failures.js";
export type { RetriedJob } from "./operators/retry-failed.js";
export { CHORE_QUEUE, PRUNE_JOB, REAP_JOB } from "./runtime/chores.js";
export { defineSchedule } from "./schedule/define-schedule.js";
export type { NamedScheduleEntry, ScheduleEntry, TypedScheduleEntry } from "./schedule/define-schedule.js";
// The domain words, from their one home beside the tables: an entry's overlap policies, a job's statuses.
export { JOB_STATUSES, OVERLAP_POLICIES, type JobStatus, type OverlapPolicy } from "./schema.js";
export { loadSchedule, validateSchedule } from "./schedule/validate.js";
export type { ResolvedEntry } from "./schedule/validate.js";
export { slotCalendar } from "./schedule/slot-calendar.js";
export { BACKFILL_CAP, BACKFILL_LIMIT } from "./schedule/backfill.js";
export type { BackfilledSlot, BackfillOptions, BackfillResult } from "./schedule/backfill.js";
export type { SlotCalendar } from "./schedule/slot-calendar.js";
export { upcomingSlots } from "./schedule/upcoming.js";
export type { CarriedState, DeployPlan, DroppedJobName, Overdue, PlanEntry, PlanKind, PlanRow, RemovedRow, RowIdentity, SwitchCheck } from "./schedule/deploy-plan.js";
export type { EntryNoteCode, Note, SlotNoteCode, UpcomingEntry, UpcomingSlot } from "./schedule/upcoming.js";
export type { SkipReason, SlotOutcome, TickReport } from "./events.js";
export type { TickOptions } from "./schedule/pass.js";
export type { AttemptStatus, CronledgerEvents, CronledgerHooks } from "./events.js";
export { createAdminHandler, MIN_TOKEN_LENGTH } from "./admin/handler.js";
export type { AdminHandler, AdminHandlerOptions, AdminLedger, AdminRequestContext } from "./admin/handler.js";
export { startAdminServer } from "./admin/server.js";
export { toNodeListener } from "./admin/node-listener.js";
export type { NodeListener, NodeListenerOptions, NodeRequest } from "./admin/node-listener.js";
export type { AdminServer, AdminServerOptions } from "./admin/server.js";
export { WIRE_VERSION } from "./wire/version.js";
export { statusDocument } from "./wire/status.js";
export type { BrokenEntryDocument, EntryDocument, ProblemDocument, RunDocument, StatusDocument, WaitingForWorkerDocument } from "./wire/status.js";
export { cancelledDocument, errorDocument, failuresDocument, retriedDocument } from "./wire/jobs.js";
export type { CancelledDocument, ErrorDocument, FailureDocument, FailuresDocument, RetriedDocument } from "./wire/jobs.js";
export { preflightDocument, tickDocument, unquarantinedDocument } from "./wire/commands.js";
export { entryPauseDocument, triggeredDocument } from "./wire/entries.js";
export type { EntryPauseDocument, TriggeredDocument } from "./wire/entries.js";
export { backfillDocument } from "./wire/backfill.js";
export type { BackfillDocument, BackfillSlotDocument } from "./wire/backfill.js";
export type { CliErrorDocument, PreflightDocument, PreflightProblemDocument, SlotDocument, TickDocument, UnquarantinedDocument } from "./wire/commands.js";
export { nextDocument } from "./wire/upcoming.js";
export { planDocument } from "./wire/plan.js";
export type { CarriedDocument, PlanDocument, PlanEntryDocument, PlanRemovedDocument, PlanRowDocument } from "./wire/plan.js";
export type { NextDocument, NoteDocument, UpcomingEntryDocument, UpcomingSlotDocument } from "./wire/upcoming.js";
export { renderSchedulePage } from "./admin/page.js";
export type { SchedulePageExtras } from "./admin/page.js";
export { createMetrics, OTHER_JOB_TYPE } from "./admin/metrics.js";
export type { CronledgerMetrics, MetricsOptions, WaitingJobsSample } from "./admin/metrics.js";
export type { RecentEntryProblem } from "./status/problems.js";
export { MAX_REDACTED_LENGTH, redact, redactError, redactFields } from "./redact.js";
export type { Duration } from "./duration.js";
export type { Logger } from "./log.js";
export { childLogger, consoleLogger, silentLogger } from "./log.js";
export {
  ConfigError,
  CronledgerError,
  DependencyMissingError,
  ERROR_HTTP_STATUS,
  InvalidArgumentError,
  InvalidCronError,
  InvalidDurationError,
  InvalidFailureFilterError,
  InvalidStoredJobError,
  InvalidTimezoneError,
  BackfillTooLargeError,
  EntryNotFoundError,
  JobCancelledError,
  JobKilledError,
  JobNotCancellableError,
  JobNotFailedError,
  JobNotFoundError,
  JobNotRegisteredError,
  JobTimeoutError,
  LeaseExpiredError,
  LeaseLostError,
  MigrationError,
  MigrationRequiredError,
  TransactionOnOtherDatabaseError,
  DatabaseUnavailableError,
  NonRetryableError,
  PayloadTooLargeError,
  PayloadValidationError,
  ScheduleValidationError,
  TickError,
  UsageError,
  WorkerShutdownError,
} from "./errors.js";
export type { BackfillSurface, ErrorCode, ScheduleProblem, TickPhase } from "./errors.js";
export { ScheduleEntryError } from "./errors.js";
export type { DynamicEntryInput } from "./schedule/dynamic-entry.js";
export type {
  DynamicCounts,
  DynamicScheduleEntry,
  DynamicSchedulePage,
  ScheduleListOptions,
  ScheduleUpsertOptions,
  ScheduleWriteOptions,
  Schedules,
  UpsertOutcome,
} from "./schedule/schedules.js";
export { UPSERT_OUTCOMES } from "./schema.js";
export { dynamicEntryDocument, dynamicSchedulesDocument, type DynamicEntryDocument, type DynamicSchedulesDocument } from "./wire/schedules.js";

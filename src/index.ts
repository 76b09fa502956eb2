// The public face of cronledger: everything an application imports.
export { createCronledger, Cronledger } from "./cronledger.js";
export type { CronledgerOptions, EntryStatus, SchedulerStatus } from "./cronledger.js";
export { defineConfig } from "./config.js";
export type { CronledgerConfig } from "./config.js";
export type { DatabaseSetting } from "./db/connection.js";
export { defineJob, skip, noop } from "./jobs/define-job.js";
export { DEFAULT_MAX_PAYLOAD_BYTES } from "./jobs/payload-limit.js";
export type { JobContext, JobDefinition, JobOptions, JobOutcome, JobResult } from "./jobs/define-job.js";
export { RETRY_CLASSES, retryDelayMs } from "./jobs/retry.js";
export type { BackoffRetryPolicy, CustomRetryPolicy, RetryClass, RetryPolicy } from "./jobs/retry.js";
export type { EnqueuedJob, EnqueueOptions, EnqueueRequest } from "./jobs/enqueue.js";
export type { WorkOptions, WorkSummary } from "./jobs/worker.js";
export type { ReapReport } from "./jobs/reaper.js";
export type { RetentionOptions } from "./jobs/retention.js";
export { JobTimeoutError, LeaseLostError, InvalidStoredJobError, WorkerShutdownError } from "./jobs/job-errors.js";
export { CHORE_QUEUE, PRUNE_JOB, REAP_JOB } from "./runtime/chores.js";
export type { ChoreOptions, ChoresSetting } from "./runtime/chores.js";
export type { StartOptions } from "./runtime/supervisor.js";
export { defineSchedule } from "./schedule/define-schedule.js";
export type { NamedScheduleEntry, ScheduleEntry, TypedScheduleEntry } from "./schedule/define-schedule.js";
export { loadSchedule, validateSchedule } from "./schedule/validate.js";
export type { ResolvedEntry } from "./schedule/validate.js";
export { slotCalendar } from "./schedule/slot-calendar.js";
export type { SlotCalendar } from "./schedule/slot-calendar.js";
export { TickError } from "./schedule/tick.js";
export type { SlotOutcome, TickOptions, TickReport } from "./schedule/tick.js";
export type { AttemptStatus, CronledgerEvents, CronledgerHooks } from "./events.js";
export { createAdminHandler, MIN_TOKEN_LENGTH } from "./admin/handler.js";
export type { AdminHandler, AdminHandlerOptions } from "./admin/handler.js";
export { startAdminServer } from "./admin/server.js";
export type { AdminServer, AdminServerOptions } from "./admin/server.js";
export { adminStatus } from "./admin/status.js";
export type { AdminLedger, AdminStatus, BrokenEntryView, EntryProblemView, EntryView } from "./admin/status.js";
export { renderSchedulePage } from "./admin/page.js";
export { createMetrics, OTHER_JOB_TYPE } from "./admin/metrics.js";
export type { CronledgerMetrics, MetricsOptions } from "./admin/metrics.js";
export { InvalidFailureFilterError } from "./admin/failures.js";
export type { FailureFilter, FailurePage, FailureTicket } from "./admin/failures.js";
export { JobNotFailedError, JobNotFoundError } from "./admin/retry-job.js";
export type { RetriedJob } from "./admin/retry-job.js";
export type { RecentEntryProblem } from "./admin/entry-problems.js";
export { MAX_REDACTED_LENGTH, redact, redactError, redactFields } from "./admin/redact.js";
export type { Duration } from "./duration.js";
export type { Logger } from "./log.js";
export { consoleLogger, silentLogger } from "./log.js";
export {
  ConfigError,
  CronledgerError,
  InvalidCronError,
  InvalidDurationError,
  InvalidTimezoneError,
  JobNotRegisteredError,
  MigrationError,
  NonRetryableError,
  PayloadTooLargeError,
  PayloadValidationError,
  ScheduleValidationError,
} from "./errors.js";
export type { ScheduleProblem } from "./errors.js";

/**
 * Every error cronledger throws or stores, one catalogue: each is a
 * CronledgerError with a stable `code` from ErrorCode that callers can switch
 * on, and a message that says what to do about it. The classes live in
 * src/errors/, a file per family (configuration, schedules, jobs,
 * interruptions of a running attempt, operators' actions, the database),
 * over the one `ErrorCode` union in src/errors/codes.ts; every module
 * imports them from here.
 */

export * from "./errors/codes.js";
export * from "./errors/config.js";
export * from "./errors/schedule.js";
export * from "./errors/jobs.js";
export * from "./errors/interruptions.js";
export * from "./errors/operators.js";
export * from "./errors/database.js";

/**
 * The Standard Schema interface (standardschema.dev, `@standard-schema/spec`
 * 1.x), copied as its authors recommend so that no package has to be
 * installed for its types: zod 3.24+ (classic and `zod/v4`), zod 4,
 * valibot 1 and arktype 2 implement it. A job's payload schema is any
 * value of this shape, so the application's validator and version are the
 * ones whose types it infers, never cronledger's own zod.
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly "~standard": StandardSchemaV1.Props<Input, Output>;
}

// eslint-disable-next-line @typescript-eslint/no-namespace -- the spec's own shape, so that StandardSchemaV1.InferOutput reads as everywhere else
export declare namespace StandardSchemaV1 {
  export interface Props<Input = unknown, Output = Input> {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => Result<Output> | Promise<Result<Output>>;
    readonly types?: Types<Input, Output> | undefined;
  }
  export type Result<Output> = SuccessResult<Output> | FailureResult;
  export interface SuccessResult<Output> {
    readonly value: Output;
    readonly issues?: undefined;
  }
  export interface FailureResult {
    readonly issues: ReadonlyArray<Issue>;
  }
  export interface Issue {
    readonly message: string;
    readonly path?: ReadonlyArray<PropertyKey | PathSegment> | undefined;
  }
  export interface PathSegment {
    readonly key: PropertyKey;
  }
  export interface Types<Input = unknown, Output = Input> {
    readonly input: Input;
    readonly output: Output;
  }
  export type InferInput<Schema extends StandardSchemaV1> = NonNullable<Schema["~standard"]["types"]>["input"];
  export type InferOutput<Schema extends StandardSchemaV1> = NonNullable<Schema["~standard"]["types"]>["output"];
}

/** What validating a payload gave: the parsed value, or "path: message" lines that name the field to fix. */
export type Validated = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly issues: string[] };

function describeIssue(issue: StandardSchemaV1.Issue): string {
  const path = (issue.path ?? []).map((segment) => String(typeof segment === "object" ? segment.key : segment));
  return `${path.length > 0 ? path.join(".") : "payload"}: ${issue.message}`;
}

/**
 * Validates with any Standard Schema validator, synchronously: enqueue
 * checks payloads before it writes and validateSchedule() reports without
 * awaiting, so a schema that validates asynchronously (an async refinement)
 * is refused with what to change.
 */
export function validateWith(schema: StandardSchemaV1, value: unknown): Validated {
  const result = schema["~standard"].validate(value);
  if (result instanceof Promise) {
    // Nobody awaits it: keep its rejection, if any, from ending the process.
    result.catch(() => {});
    return {
      ok: false,
      issues: [`payload: the payload schema (${schema["~standard"].vendor}) validates asynchronously; cronledger validates payloads synchronously, so use a schema without async refinements or transforms`],
    };
  }
  if (result.issues !== undefined) return { ok: false, issues: result.issues.map(describeIssue) };
  return { ok: true, value: result.value };
}

/** Standard Schema validators are objects or functions (arktype's types are callable) with a `~standard` property. */
export function isStandardSchema(value: unknown): value is StandardSchemaV1 {
  if ((typeof value !== "object" && typeof value !== "function") || value === null) return false;
  const props = (value as { "~standard"?: { version?: unknown; validate?: unknown } })["~standard"];
  return typeof props === "object" && props !== null && props.version === 1 && typeof props.validate === "function";
}

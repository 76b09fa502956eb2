import { createHash } from "node:crypto";
import { inspect } from "node:util";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { formatLogLine } from "../src/log.js";
import { REDACTED, redact, redactError, redactFields } from "../src/redact.js";

/**
 * Generated secrets (hex runs, base32, short base64 next to a secret-looking
 * name, Buffer and typed-array dumps, JWTs) embedded in realistic error text
 * (driver errors, HTTP client errors, stack traces, JSON bodies, log-style
 * lines) next to what operators must still read (UUIDs, job ids, timestamps,
 * SQLSTATE codes, file paths, ledger keys, short git SHAs, trace ids). Every
 * surface goes through these functions: the stored `last_error`
 * (redactError), the failures API, the page and the CLI (redact), log lines
 * (formatLogLine, redactFields); test/redact-surfaces.test.ts follows one
 * error through each of them. Seeded; REDACT_PROPERTY_RUNS raises the runs.
 */
const SEED = 20_261_203;
const RUNS = Number(process.env.REDACT_PROPERTY_RUNS ?? 500);

/** A secret as embedded, and the fragments whose presence in any output would be a leak. */
interface Secret {
  readonly kind: string;
  readonly text: string;
  readonly fragments: readonly string[];
}

const hexOf = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");
const base64url = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64url");

/** RFC 4648 base32, written here so the test does not lean on the code under test. */
function base32(bytes: Uint8Array, pad: boolean): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let out = "";
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = ((buffer << 8) | byte) & 0xffff;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(buffer >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(buffer << (5 - bits)) & 31];
  if (pad) while (out.length % 8 !== 0) out += "=";
  return out;
}

/** Every window of `size` characters: one surviving anywhere is a leak. */
function windows(text: string, size: number): string[] {
  if (text.length <= size) return [text];
  const out: string[] = [];
  for (let i = 0; i + size <= text.length; i += Math.max(1, Math.floor(size / 2))) out.push(text.slice(i, i + size));
  out.push(text.slice(-size));
  return out;
}

/** Windows of four consecutive bytes, as a dump prints them (hex pairs or decimals), whitespace removed. */
function byteWindows(values: readonly string[], separator: string): string[] {
  const out: string[] = [];
  for (let i = 0; i + 4 <= values.length; i++) out.push(values.slice(i, i + 4).join(separator));
  return out;
}

const bytes = (min: number, max: number) => fc.uint8Array({ minLength: min, maxLength: max });

const hexSecret: fc.Arbitrary<Secret> = fc
  .tuple(bytes(16, 48), fc.constantFrom("lower", "upper"), fc.constantFrom("", "0x", "\\x"))
  .map(([b, letterCase, prefix]) => {
    const hex = letterCase === "upper" ? hexOf(b).toUpperCase() : hexOf(b);
    return { kind: "hex", text: `${prefix}${hex}`, fragments: windows(hex, 12) };
  });

const base32Secret: fc.Arbitrary<Secret> = fc.tuple(bytes(10, 40), fc.boolean()).map(([b, pad]) => {
  const text = base32(b, pad);
  return { kind: "base32", text, fragments: windows(text.replace(/=+$/, ""), 12) };
});

/** Names a reader takes for a secret's, and how the value follows them. */
const KEYED_FORMS: readonly ((value: string) => string)[] = [
  (v) => `"encryptionKey":"${v}"`,
  (v) => `encryption_key=${v}`,
  (v) => `X-Signature: ${v}`,
  (v) => `iv: ${v}`,
  (v) => `"hmac": "${v}"`,
  (v) => `secret=${v}`,
  (v) => `"apiKey":"${v}"`,
  (v) => `client_key: ${v}`,
  (v) => `passphrase=${v}`,
  (v) => `nonce: ${v}`,
  (v) => `invalid signature ${v}`,
  (v) => `decrypt with key ${v}`,
  (v) => `x-amz-signature=${v}&X-Amz-Date=20261202T100000Z`,
  (v) => `signingKey: '${v}'`,
  (v) => `otp=${v}`,
  (v) => `\\"clientSecret\\":\\"${v}\\"`,
  // A name, a space and a quoted value, as prose writes it.
  (v) => `signing secret '${v}'`,
  (v) => `token "${v}"`,
  (v) => `rejected session '${v}' twice`,
];

/** Base64 under 32 characters: 9 to 23 bytes, standard or URL alphabet, padded or not (README, "Redaction"). */
const keyedBase64Secret: fc.Arbitrary<Secret> = fc
  .tuple(bytes(9, 23), fc.constantFrom("base64", "base64url"), fc.boolean(), fc.integer({ min: 0, max: KEYED_FORMS.length - 1 }))
  .map(([b, alphabet, pad, form]) => {
    let value = Buffer.from(b).toString(alphabet === "base64" ? "base64" : "base64url");
    if (alphabet === "base64" && !pad) value = value.replace(/=+$/, "");
    const embed = KEYED_FORMS[form] as (value: string) => string;
    return { kind: "keyed base64", text: embed(value), fragments: windows(value.replace(/=+$/, ""), 8) };
  });

const dumpSecret: fc.Arbitrary<Secret> = fc
  .tuple(bytes(8, 80), fc.constantFrom("buffer", "arraybuffer", "uint8array", "json", "hexdump", "fingerprint"))
  .map(([b, form]) => {
    const pairs = [...b].map((byte) => byte.toString(16).padStart(2, "0"));
    const decimals = [...b].map(String);
    const buffer = Buffer.from(b);
    switch (form) {
      case "buffer":
        return { kind: "Buffer dump", text: inspect(buffer), fragments: byteWindows(pairs, " ") };
      case "arraybuffer":
        return { kind: "ArrayBuffer dump", text: inspect(new Uint8Array(b).buffer), fragments: byteWindows(pairs, " ") };
      case "uint8array":
        return { kind: "Uint8Array dump", text: inspect(new Uint8Array(b)), fragments: byteWindows(decimals, ",") };
      case "json":
        return { kind: "JSON Buffer", text: JSON.stringify({ ciphertextBlob: buffer }).replace("ciphertextBlob", "blob"), fragments: byteWindows(decimals, ",") };
      case "hexdump":
        return { kind: "hexdump", text: pairs.join(" "), fragments: byteWindows(pairs, " ") };
      default:
        return { kind: "fingerprint", text: pairs.join(":").toUpperCase(), fragments: byteWindows(pairs.map((pair) => pair.toUpperCase()), ":") };
    }
  });

const jwtSecret: fc.Arbitrary<Secret> = fc
  .tuple(fc.constantFrom("HS256", "RS256", "ES256"), fc.string({ minLength: 1, maxLength: 40 }), fc.integer({ min: 0, max: 2_000_000_000 }), bytes(32, 64))
  .map(([alg, subject, iat, signature]) => {
    const header = base64url(Buffer.from(JSON.stringify({ alg, typ: "JWT" })));
    const payload = base64url(Buffer.from(JSON.stringify({ sub: subject, iat })));
    const sig = base64url(signature);
    return { kind: "JWT", text: `${header}.${payload}.${sig}`, fragments: [...windows(payload.slice(4), 12), ...windows(sig, 12)] };
  });

const secret = fc.oneof(hexSecret, base32Secret, keyedBase64Secret, dumpSecret, jwtSecret);

/** What an operator must still read, each generated here and asserted on as generated. */
interface Readable {
  readonly uuid: string;
  readonly jobId: string;
  readonly timestamp: string;
  readonly sqlstate: string;
  readonly path: string;
  readonly ledgerKey: string;
  readonly shortSha: string;
  readonly traceId: string;
  readonly jobName: string;
}

const word = fc.stringMatching(/^[a-z]{3,10}$/);
const LEDGER_CRONS = ["0 8 * * 1-5", "*/15 * * * *", "0 0 L * *", "30 2 * * 0", "@daily"];
const ZONES = ["UTC", "Europe/Berlin", "America/Santiago", "Australia/Lord_Howe"];

const readable: fc.Arbitrary<Readable> = fc
  .record({
    uuid: fc.uuid(),
    jobId: fc.integer({ min: 1, max: 2 ** 40 }).map(String),
    timestamp: fc.date({ min: new Date("2000-01-01T00:00:00Z"), max: new Date("2099-12-31T23:59:59Z"), noInvalidDate: true }).map((d) => d.toISOString()),
    sqlstate: fc.constantFrom("23505", "40001", "40P01", "57P01", "57014", "08006", "22P02", "42P01", "53300", "XX000"),
    user: word,
    // A checkout under `mktemp -d`: a random mixed-case directory.
    tmp: fc.stringMatching(/^[A-Za-z0-9]{10}$/),
    file: fc.array(word, { minLength: 1, maxLength: 3 }).map((parts) => parts.join("-")),
    namespace: fc.constantFrom("default", "billing", "prod-eu1"),
    jobName: fc.tuple(word, word).map(([a, b]) => `${a}.${b}`),
    entryKey: fc.option(word, { nil: "" }),
    cron: fc.constantFrom(...LEDGER_CRONS),
    zone: fc.constantFrom(...ZONES),
    long: fc.boolean(),
    shortSha: fc.integer({ min: 7, max: 12 }).chain((length) => fc.stringMatching(new RegExp(`^[0-9a-f]{${length}}$`))),
    trace: bytes(16, 16).map(hexOf),
  })
  .map((r) => {
    let ledgerKey = `${r.namespace}|${r.jobName}|${r.entryKey}|${r.cron}|${r.zone}`;
    if (r.long) {
      // Over 255 characters: a readable prefix, `~` and the sha256 of the whole key (README, "Identity").
      const whole = `${ledgerKey}${"|tenant-".repeat(40)}`;
      ledgerKey = `${whole.slice(0, 190)}~${createHash("sha256").update(whole).digest("hex")}`;
    }
    return {
      uuid: r.uuid,
      jobId: r.jobId,
      timestamp: r.timestamp,
      sqlstate: r.sqlstate,
      path: `/tmp/tmp.${r.tmp}/src/jobs/${r.file}.ts`,
      ledgerKey,
      shortSha: r.shortSha,
      traceId: r.trace,
      jobName: r.jobName,
    };
  });

/** Realistic error text around one secret. */
const TEMPLATES: readonly ((s: string, r: Readable) => string)[] = [
  // postgres.js driver error with its detail and the stack
  (s, r) =>
    `PostgresError: duplicate key value violates unique constraint "tokens_pkey"\n  code: '${r.sqlstate}',\n  detail: 'Key (token)=(${s}) already exists.',\n  where: 'job ${r.jobId} at ${r.timestamp}',\n    at ErrorResponse (${r.path}:${r.jobId.length}:17)`,
  // undici / fetch error with a JSON body
  (s, r) =>
    `TypeError: fetch failed\ncaused by Error: HTTP 401 from https://kms.example.com/v1/decrypt: {"error":"invalid_request","detail":"${s.replace(/"/g, '\\"')}","request_id":"${r.uuid}"}`,
  // axios-style error
  (s, r) => `AxiosError: Request failed with status code 403 at ${r.timestamp}\n  traceparent: 00-${r.traceId}-00f067aa0ba902b7-01\n  response: ${s}`,
  // a stack trace
  (s, r) => `Error: decrypt failed for job ${r.jobId}: ${s}\n    at decrypt (${r.path}:42:11)\n    at async Job.run (${r.path}:7:3) [commit ${r.shortSha}]`,
  // a JSON body as a worker might log it
  (s, r) => `{"job":"${r.jobName}","id":${r.jobId},"at":"${r.timestamp}","error":{"code":"${r.sqlstate}","message":${JSON.stringify(s)}},"trace_id":"${r.traceId}"}`,
  // cronledger's own shapes: a ledger key next to the secret
  (s, r) => `slot ${r.timestamp} could not be enqueued (phase enqueue) for ledger key ${r.ledgerKey}: ${s}`,
  (s, r) => `job ${r.uuid} attempt 2 failed [${r.sqlstate}] in ${r.path}: ${s}`,
];

const scenario = fc.record({ secret, readable, template: fc.integer({ min: 0, max: TEMPLATES.length - 1 }) });

/** The outputs of every redacting surface for one text. */
function surfaces(text: string): Record<string, string> {
  return {
    redact: redact(text),
    "redact twice (the failures API redacts stored text again)": redact(redact(text)),
    redactError: redactError(new Error(text)),
    "redactError of a cause": redactError(new Error("fetch failed", { cause: new Error(text) })),
    "log line, message": formatLogLine(text),
    "log line, field": formatLogLine("job failed", { error: text, job: "x" }),
    "log field, error object": JSON.stringify(redactFields({ error: new Error(text) })),
  };
}

/** The readable parts the template wrote, leaving out any the generated secret happens to contain (all-zero bytes and an all-zero trace id). */
const kept = (r: Readable, text: string, secretText: string): string[] =>
  [r.uuid, r.jobId, r.timestamp, r.sqlstate, r.path, r.ledgerKey, r.shortSha, r.traceId, r.jobName].filter((part) => text.includes(part) && !secretText.includes(part));

describe("redaction of generated secrets in realistic error text (property test)", () => {
  it("redacts a secret's name followed by a space and a quoted value as it redacts `name: value`", () => {
    const cases = [
      { text: "webhook rejected: signing secret 'c2VjcmV0LXNpZ25pbmcta2V5' does not match", value: "c2VjcmV0LXNpZ25pbmcta2V5" },
      { text: 'refresh failed with token "tok_live_9f2Kx81mQz" (expired)', value: "tok_live_9f2Kx81mQz" },
      { text: 'bad password "correct horse battery staple" for user "ann"', value: "correct horse" },
      { text: JSON.stringify({ error: 'api token "tok_live_9f2Kx81mQz" revoked' }), value: "tok_live_9f2Kx81mQz" },
    ];
    for (const { text, value } of cases) {
      for (const [surface, output] of Object.entries(surfaces(text))) {
        expect(output, `${surface} of ${text}`).not.toContain(value);
        expect(output, `${surface} of ${text}`).toContain(REDACTED);
      }
    }
    // The words around the value stay, and an entry's key quoted in prose is no secret.
    expect(redact("signing secret 'c2VjcmV0LXNpZ25pbmcta2V5' does not match")).toBe("signing secret '[redacted]' does not match");
    expect(redact('key "nightly" is a static entry\'s key')).toBe('key "nightly" is a static entry\'s key');
  });

  it("leaves no generated secret on any surface and keeps what operators read", () => {
    const kinds = new Map<string, number>();
    fc.assert(
      fc.property(scenario, ({ secret: s, readable: r, template }) => {
        kinds.set(s.kind, (kinds.get(s.kind) ?? 0) + 1);
        const text = (TEMPLATES[template] as (s: string, r: Readable) => string)(s.text, r);
        // The readable parts the template wrote, as generated (not as the code under test printed them).
        const mustKeep = kept(r, text, s.text);
        for (const [surface, output] of Object.entries(surfaces(text))) {
          const view = output;
          for (const fragment of s.fragments) {
            if (view.replace(/\s+/g, fragment.includes(" ") ? " " : "").includes(fragment)) {
              expect.fail(`${s.kind} leaked on ${surface}: ${JSON.stringify(fragment)} in ${JSON.stringify(output)}`);
            }
          }
          for (const part of mustKeep) {
            if (!view.includes(part)) expect.fail(`${JSON.stringify(part)} lost on ${surface}: ${JSON.stringify(output)}`);
          }
        }
      }),
      { seed: SEED, numRuns: RUNS },
    );
    for (const kind of ["hex", "base32", "keyed base64", "Buffer dump", "ArrayBuffer dump", "Uint8Array dump", "JSON Buffer", "hexdump", "fingerprint", "JWT"]) {
      expect(kinds.get(kind) ?? 0, `${kind} cases generated`).toBeGreaterThan(RUNS / 100);
    }
  });
});

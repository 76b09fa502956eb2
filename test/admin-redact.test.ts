import { describe, expect, it, vi } from "vitest";
import { MAX_REDACTED_LENGTH, REDACTED, redact, redactError, redactFields } from "../src/redact.js";
import { JobNotRegisteredError, NonRetryableError, PayloadValidationError } from "../src/errors.js";
import { consoleLogger } from "../src/log.js";

/** Each case: input, the secret(s) that must be gone, and text that must survive. */
const CASES: readonly { name: string; input: string; secrets: string[]; kept?: string[] }[] = [
  { name: "authorization header", input: "request failed: Authorization: Bearer abc123\nstatus 401", secrets: ["abc123"], kept: ["status 401", "Authorization:"] },
  { name: "authorization with another scheme", input: "Authorization: Digest username=\"bob\", response=\"6629fae4\"", secrets: ["6629fae4", "bob"] },
  { name: "lowercase header", input: "authorization: token ghs_abcdef", secrets: ["ghs_abcdef"] },
  { name: "proxy-authorization", input: "Proxy-Authorization: Basic dXNlcjpwYXNz", secrets: ["dXNlcjpwYXNz"] },
  { name: "bare bearer string", input: "sent bearer eyJhbGciOi.payload.sig to upstream", secrets: ["eyJhbGciOi.payload.sig"], kept: ["to upstream"] },
  { name: "bearer in JSON header map", input: '{"headers":{"Authorization":"Bearer abc123","accept":"json"}}', secrets: ["abc123"], kept: ['"accept":"json"'] },
  { name: "x-api-key header", input: "X-Api-Key: k-123456789\nnext line", secrets: ["k-123456789"], kept: ["next line"] },
  { name: "api_key query parameter", input: "GET https://api.example.com/v1?api_key=s3cr3t&page=2 failed", secrets: ["s3cr3t"], kept: ["page=2", "failed"] },
  { name: "apikey and access_token", input: "apikey=one access_token=two refresh_token: three", secrets: ["one", "two", "three"] },
  { name: "password in JSON", input: '{"user":"bob","password":"hunter2"}', secrets: ["hunter2"], kept: ['"user":"bob"'] },
  { name: "password with escaped quote", input: '{"password":"hun\\"ter2"}', secrets: ["hun", "ter2"] },
  { name: "password in escaped JSON", input: 'body was "{\\"password\\":\\"hunter2\\",\\"id\\":1}"', secrets: ["hunter2"] },
  { name: "single-quoted secret", input: "config {'client_secret': 'xyz789'}", secrets: ["xyz789"] },
  { name: "camelCase and prefixed names", input: "dbPassword=p1 GITHUB_TOKEN=p2 stripeSecretKey=p3 user_pwd=p4", secrets: ["p1", "p2", "p3", "p4"] },
  { name: "cookie header keeps nothing of the line", input: "Cookie: theme=dark; sid=abc; csrftoken=xyz\nafter", secrets: ["dark", "abc", "xyz"], kept: ["after"] },
  { name: "set-cookie", input: "Set-Cookie: session=deadbeef; Path=/; HttpOnly", secrets: ["deadbeef"] },
  { name: "session id", input: "sessionId=4242abcd expired", secrets: ["4242abcd"], kept: ["expired"] },
  { name: "payload dump with braces", input: 'job failed with payload {"list":"daily","password":"x","nested":{"a":{"b":"deep"}}} at step 2', secrets: ['"daily"', "deep", '"x"'], kept: ["at step 2"] },
  { name: "payload: JSON", input: 'payload: {"email":"ann@example.com"}', secrets: ["ann@example.com"] },
  { name: "payload= array", input: "payload=[1,2,{\"card\":\"4111\"}] rejected", secrets: ["4111"], kept: ["rejected"] },
  { name: "unbalanced payload is redacted to the end", input: 'payload {"card":"4111", "cvv": 123', secrets: ["4111", "123"] },
  { name: "request body", input: 'POST /charge body: {"card":"4111"} -> 500', secrets: ["4111"], kept: ["-> 500"] },
  { name: "prompt", input: 'prompt: "tell me the launch codes"', secrets: ["launch codes"] },
  { name: "URL credentials", input: "connect postgres://app:pa55w0rd@db.internal:5432/app failed", secrets: ["pa55w0rd"], kept: ["db.internal:5432/app"] },
  { name: "JWT anywhere", input: "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sflKxwRJSMeKKF2QT4fwpM", secrets: ["eyJzdWIiOiIxMjM0In0", "sflKxwRJSMeKKF2QT4fwpM"] },
  { name: "known key shapes", input: "using sk-proj-abcdefghijklmnop1234 and ghp_abcdefghijklmnopqrstuvwxyz0123 and AKIAABCDEFGHIJKLMNOP", secrets: ["abcdefghijklmnop1234", "ghp_abcdefghij", "AKIAABCDEFGHIJKLMNOP"] },
  { name: "private key block", input: "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\ndone", secrets: ["MIIEow"], kept: ["done"] },
  { name: "secret with spaces around =", input: "secret = swordfish, retrying", secrets: ["swordfish"], kept: ["retrying"] },
  { name: "a passphrase of several words", input: "login failed, password: correct horse battery staple\nretrying", secrets: ["correct", "horse", "battery", "staple"], kept: ["retrying"] },
  { name: "a prompt in prose", input: "prompt: Summarize the file, then list SSN 123-45-6789 user: bob", secrets: ["Summarize", "123-45-6789"], kept: ["user: bob"] },
  { name: "a body up to the next field", input: "body: secret text here; status=500", secrets: ["secret text here"], kept: ["status=500"] },
  { name: "URL credentials with an empty user name", input: "connect redis://:s3cretpass@cache.internal:6379/0 refused", secrets: ["s3cretpass"], kept: ["cache.internal:6379/0 refused", "redis://"] },
  { name: "URL with a user and no password keeps it", input: "cannot reach postgres://app:pw@db:5432/x or redis://:p@h/1", secrets: [":pw@", ":p@"], kept: ["db:5432/x", "h/1"] },
  { name: "ciphertext field", input: "decrypt failed, ciphertext: 9f8e7d6c5b4a wrapped\nkey id 7", secrets: ["9f8e7d6c5b4a"], kept: ["decrypt failed", "key id 7"] },
  { name: "ciphertext in JSON", input: '{"ciphertext":"AAAAkQ==","iv":"00"}', secrets: ["AAAAkQ=="] },
  {
    name: "a long base64 run anywhere",
    input: "vault returned Zm9vYmFyMTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6QUJD== for the lookup",
    secrets: ["Zm9vYmFyMTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6QUJD"],
    kept: ["vault returned", "for the lookup"],
  },
  { name: "a base64url run with separators", input: "sig=ok blob q8Zk3_-Pf0aLm2N9xRt4Yw7Uv1Bc6De5Fg (expired)", secrets: ["q8Zk3_-Pf0aLm2N9xRt4Yw7Uv1Bc6De5Fg"], kept: ["(expired)"] },
  {
    name: "a base64 run with slashes, which is not a path",
    input: "key Qm9vL3Rlc3QK8xZ/aB9kR2mN7pL4/vT6yW1cE3gH5jK0 rejected",
    secrets: ["Qm9vL3Rlc3QK8xZ/aB9kR2mN7pL4/vT6yW1cE3gH5jK0"],
    kept: ["rejected"],
  },
  { name: "a sha256 hex digest or key", input: "digest 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 matched", secrets: ["9f86d081884c7d659a2feaa0c55ad015"], kept: ["digest", "matched"] },
  { name: "a full git SHA (a 40-hex token looks the same)", input: "deployed 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b", secrets: ["9f86d081884c7d659a2f"], kept: ["deployed"] },
  { name: "0x and bytea hex", input: "key 0x8F1A2B3C4D5E6F708192A3B4C5D6E7F8 and \\x8f1a2b3c4d5e6f708192a3b4c5d6e7f8", secrets: ["8F1A2B3C4D5E6F70", "8f1a2b3c4d5e6f70"] },
  { name: "base32", input: "otp seed JBSWY3DPEHPK3PXPJBSWY3DP rejected", secrets: ["JBSWY3DPEHPK3PXP"], kept: ["rejected"] },
  { name: "short base64 after a key's name", input: '{"encryptionKey":"q8Zk3Pf0aL==","user":"bob"}', secrets: ["q8Zk3Pf0aL"], kept: ['"user":"bob"'] },
  { name: "short base64 after a secret's name in prose", input: "invalid signature q8Zk3Pf0aLmN. retrying", secrets: ["q8Zk3Pf0aLmN"], kept: ["retrying"] },
  { name: "iv, nonce, hmac and passphrase", input: "iv=AAECAwQFBgc nonce: 0badc0de hmac=ffee passphrase=open sesame", secrets: ["AAECAwQFBgc", "0badc0de", "ffee", "open"] },
  { name: "a Buffer dump", input: "kms returned <Buffer 8f 1a 2b 3c 4d 5e 6f 70 ... 24 more bytes> for job 7", secrets: ["8f 1a 2b"], kept: ["for job 7"] },
  { name: "a Uint8Array dump", input: "Uint8Array(4) [ 143, 26, 43, 60 ] rejected", secrets: ["143, 26"], kept: ["rejected"] },
  { name: "a Buffer through JSON", input: '{"blob":{"type":"Buffer","data":[143,26,43,60]},"id":3}', secrets: ["143,26"], kept: ['"id":3'] },
  { name: "a colon-separated key", input: "fingerprint 8F:1A:2B:3C:4D:5E:6F:70:81:92 mismatch", secrets: ["8F:1A:2B"], kept: ["mismatch"] },
  { name: "a JWT glued to a word", input: "cache access_token_eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sflKxwRJSMeKKF2QT4fwpM hit", secrets: ["eyJzdWIiOiIxMjM0In0", "sflKxwRJSMeKKF2QT4fwpM"], kept: ["hit"] },
  { name: "a JWE's five parts", input: "jwe eyJhbGciOiJSU0EifQ.a2V5a2V5a2V5.aXZpdml2.Y2lwaGVydGV4dA.dGFndGFn end", secrets: ["a2V5a2V5a2V5", "Y2lwaGVydGV4dA", "dGFndGFn"], kept: ["end"] },
  { name: "JSON in a JSON string in JSON", input: JSON.stringify({ message: JSON.stringify({ body: JSON.stringify({ clientSecret: "q8Zk3Pf0aL" }) }) }), secrets: ["q8Zk3Pf0aL"] },
];

describe("redact", () => {
  it.each(CASES)("removes the secret: $name", ({ input, secrets, kept = [] }) => {
    const output = redact(input);
    for (const secret of secrets) expect(output, output).not.toContain(secret);
    for (const text of kept) expect(output, output).toContain(text);
    expect(output).toContain(REDACTED);
  });

  it("keeps ordinary error text intact", () => {
    const plain = [
      'Scheduler tick failed in phase "claim" for entry reports.rollup after 3 attempts: connection refused',
      "Basic authentication failed for user report-bot",
      "duplicate key value violates unique constraint \"jobs_pkey\"",
      "TypeError: Cannot read properties of undefined (reading 'total')",
      "Author: Ann; tokens were not consumed",
      // Long runs that are words, identifiers, digests and paths, not encoded bytes:
      "metric cronledger_schedule_slots_total_with_a_long_suffix_2 went up",
      "short sha 9f86d08 and 9f86d081884c matched",
      "trace_id=4bf92f3577b34da6a3ce929d0e0e4736 traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "ledger key default|email.send|x|0 8 * * 1-5|Europe/Berlin~9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 is locked",
      "ledger key prod-eu1|email.send||0 9 * * 1|UTC is locked",
      'insert or update on table "jobs" violates foreign key constraint "jobs_queue_fk"',
      "password authentication failed for user \"app\"; token expired at 2026-12-02T10:00:00.000Z",
      "with idempotency key daily-2026-12-02 vanished (job 42, SQLSTATE 40P01)",
      "    at SessionStore.load (/srv/app/src/token-session.ts:42:11)",
      "MAC aa:bb:cc:dd:ee:ff and retries 10 20 30",
      "ENOENT: /home/runner/work/Project2/src/Jobs/SendWeeklyReports/index.ts",
      // A checkout under a temporary directory with a random mixed-case name (mktemp -d):
      "Invalid config file /tmp/tmp.Xk29fLq0aB/test/fixtures/cli/settings.config.mjs: unknown option",
      "Cannot find module /srv/Alice2/projects/billing/config/cronledger.config.ts",
      "ScheduleValidationErrorForTenantAccountsWithoutDigits is thrown",
      "PayloadValidationError [invalid_payload]: list: expected string, received number",
      "JobNotRegisteredError [job_not_registered]: job \"email.sned\" is not registered (did you mean \"email.send\"?)",
      "connect ECONNREFUSED 127.0.0.1:5999: connection refused at 127.0.0.1:5999",
      "id 3f2b1c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d failed",
    ];
    for (const text of plain) expect(redact(text)).toBe(text);
  });

  it("is idempotent, so failures can be redacted again on the way out", () => {
    for (const { input } of CASES) {
      const once = redact(input);
      expect(redact(once)).toBe(once);
    }
  });

  it("bounds the result to 2,000 characters, redacting before it cuts", () => {
    const long = `password=${"p".repeat(5_000)} ${"x".repeat(5_000)}`;
    const output = redact(long);
    expect(output.length).toBe(MAX_REDACTED_LENGTH);
    expect(output).not.toContain("ppp");
    expect(output.endsWith("[truncated]")).toBe(true);
  });

  it("never leaks a payload cut open by the scan bound", () => {
    const huge = `x`.repeat(15_990) + `payload {"password":"${"s".repeat(100_000)}"}`;
    const output = redact(huge);
    expect(output).not.toContain("sss");
  });

  // No timing assertion (speed is measured in bench/, never asserted): catastrophic backtracking would blow the test timeout instead.
  it("finishes on hostile input", { timeout: 20_000 }, () => {
    const hostile = ["a".repeat(50_000), "{".repeat(50_000), `"password":"${'\\"'.repeat(30_000)}`, "token=".repeat(20_000)];
    for (const text of hostile) expect(redact(text).length).toBeLessThanOrEqual(MAX_REDACTED_LENGTH);
  });
});

describe("redactError", () => {
  it("keeps class, code and message, redacted", () => {
    const error = new NonRetryableError("upstream said 401 to Authorization: Bearer abc123");
    const stored = redactError(error);
    expect(stored).toMatch(/^NonRetryableError \[non_retryable\]: upstream said 401/);
    expect(stored).not.toContain("abc123");
  });

  it("does not repeat a class name the message already starts with", () => {
    expect(redactError(new JobNotRegisteredError("x.y"))).toMatch(/^JobNotRegisteredError \[job_not_registered\]: job "x.y" is not registered/);
  });

  it("follows causes, redacting them too", () => {
    const error = new Error("fetch failed", { cause: new Error("connect to https://u:hunter2@api.example.com refused") });
    const stored = redactError(error);
    expect(stored).toContain("caused by Error: connect to https://[redacted]@api.example.com refused");
    expect(stored).not.toContain("hunter2");
  });

  it("follows the attempts of an AggregateError and keeps a thrown string as the last cause", () => {
    const attempts = new AggregateError([Object.assign(new Error("connect ECONNREFUSED 10.0.0.7:5432"), { code: "ECONNREFUSED" })], "all attempts failed");
    expect(redactError(new Error("no connection", { cause: attempts }))).toBe(
      "Error: no connection\ncaused by AggregateError: all attempts failed\ncaused by Error [ECONNREFUSED]: connect ECONNREFUSED 10.0.0.7:5432",
    );
    expect(redactError(new Error("outer", { cause: "token=abc123" }))).toBe("Error: outer\ncaused by token=[redacted]");
  });

  it("serialises thrown objects and strings", () => {
    expect(redactError({ status: 401, headers: { authorization: "Bearer abc123" } })).toBe('{"status":401,"headers":{"authorization":"[redacted]"}}');
    expect(redactError("password=x")).toBe("password=[redacted]");
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(redactError(circular)).toBe("[object Object]");
  });

  it("keeps the code of an error class whose name contains a secret-looking word", () => {
    const stored = redactError(new PayloadValidationError("email.send", ["list: expected string"]));
    expect(stored.startsWith("PayloadValidationError [invalid_payload]: ")).toBe(true);
    expect(redact('TokenRefreshError [x]: payload {"password":"hunter2"}')).toBe("TokenRefreshError [x]: payload [redacted]");
  });
});

describe("redactFields", () => {
  it("drops the values of secret-named fields whatever their type, redacts strings and errors, and keeps the rest", () => {
    const fields = redactFields({
      job: "billing.charge",
      attempt: 2,
      payload: { user: "ann", card: "4111" },
      headers: { Authorization: "Bearer abc123", accept: "json" },
      note: "password: hunter2 again",
      error: new Error("upstream said 401 to Bearer abc123"),
      at: new Date(0),
    });
    const text = JSON.stringify(fields);
    for (const secret of ["4111", "abc123", "hunter2"]) expect(text).not.toContain(secret);
    expect(fields).toMatchObject({ job: "billing.charge", attempt: 2, payload: REDACTED, headers: { Authorization: REDACTED, accept: "json" } });
    expect(fields.error).toContain("upstream said 401");
    expect(fields.at).toEqual(new Date(0));
  });
});

describe("consoleLogger", () => {
  it("writes lines with messages and fields redacted", () => {
    const lines: string[] = [];
    const spy = vi.spyOn(console, "warn").mockImplementation((line: string) => void lines.push(line));
    try {
      consoleLogger.warn("retrying with Bearer abc123", { payload: { card: "4111" }, job: "billing.charge" });
    } finally {
      spy.mockRestore();
    }
    expect(lines).toEqual([`[cronledger] retrying with Bearer ${REDACTED} {"payload":"${REDACTED}","job":"billing.charge"}`]);
  });
});

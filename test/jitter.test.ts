import { describe, expect, it } from "vitest";
import { jitterMs } from "../src/schedule/jitter.js";

const IDENTITY = "reports.rollup|default|0 * * * *|UTC";
const SLOT = Date.parse("2026-03-08T07:00:00Z");
const HOUR = 3_600_000;

describe("jitterMs", () => {
  it("is deterministic per identity and slot", () => {
    expect(jitterMs(IDENTITY, SLOT, 60_000)).toBe(jitterMs(IDENTITY, SLOT, 60_000));
  });

  it("is a whole number of milliseconds within 0..max inclusive", () => {
    for (const max of [1, 2, 7, 999, 60_000, 1.5]) {
      for (let slot = 0; slot < 300; slot++) {
        const value = jitterMs(IDENTITY, SLOT + slot * HOUR, max);
        expect(Number.isInteger(value)).toBe(true);
        expect(value).toBeGreaterThanOrEqual(0);
        expect(value).toBeLessThanOrEqual(max);
      }
    }
  });

  it("reaches both ends of a small range", () => {
    const seen = new Set<number>();
    for (let slot = 0; slot < 200; slot++) seen.add(jitterMs(IDENTITY, SLOT + slot * HOUR, 2));
    expect([...seen].sort()).toEqual([0, 1, 2]);
  });

  it("is 0 when the maximum is 0", () => {
    for (let slot = 0; slot < 20; slot++) expect(jitterMs(IDENTITY, SLOT + slot * HOUR, 0)).toBe(0);
  });

  it("spreads consecutive slots and different identities", () => {
    const bySlot = new Set<number>();
    for (let slot = 0; slot < 100; slot++) bySlot.add(jitterMs(IDENTITY, SLOT + slot * HOUR, 60_000));
    expect(bySlot.size).toBeGreaterThan(90);
    const byIdentity = new Set<number>();
    for (let entry = 0; entry < 100; entry++) byIdentity.add(jitterMs(`${IDENTITY}#${entry}`, SLOT, 60_000));
    expect(byIdentity.size).toBeGreaterThan(90);
    const values = [...bySlot];
    expect(Math.min(...values)).toBeLessThan(6_000);
    expect(Math.max(...values)).toBeGreaterThan(54_000);
  });

  it("rejects a negative or non-finite maximum", () => {
    expect(() => jitterMs(IDENTITY, SLOT, -1)).toThrow(RangeError);
    expect(() => jitterMs(IDENTITY, SLOT, Number.NaN)).toThrow(RangeError);
    expect(() => jitterMs(IDENTITY, Number.NaN, 10)).toThrow(RangeError);
  });
});

/**
 * The lease rules that keep a trial from being counted twice (issue 24 §1), on the bare lease book: no engine, no
 * store, the clock passed in.
 */
import { describe, expect, it } from "vitest";
import { LeaseBook } from "./lease.ts";

describe("lease book", () => {
  it("hands out queued trials in order, one lease each, and nothing when the queue is empty", () => {
    const b = new LeaseBook(1000);
    b.enqueue("t1");
    b.enqueue("t2");
    b.enqueue("t1");
    const a = b.claim("w1", 0)!;
    const c = b.claim("w2", 0)!;
    expect([a.trial, c.trial]).toEqual(["t1", "t2"]);
    expect(a.key).not.toBe(c.key);
    expect(a.expiry).toBe(1000);
    expect(b.claim("w3", 0)).toBeNull();
  });

  it("a heartbeat pushes the expiry on; a lease not renewed expires and its trial goes back to the front", () => {
    const b = new LeaseBook(1000);
    b.enqueue("t1");
    b.enqueue("t2");
    const l = b.claim("w1", 0)!;
    expect(b.renew("t1", l.key, 900)).toMatchObject({ ok: true, lease: { expiry: 1900 } });
    expect(b.expire(1500)).toEqual([]);
    expect(b.expire(1900).map((x) => x.trial)).toEqual(["t1"]);
    expect(b.queued()).toEqual(["t1", "t2"]);
    expect(b.renew("t1", l.key, 1901)).toEqual({ ok: false, code: "lease_expired" });
  });

  it("a late result from an expired lease is refused, the new holder's is accepted, and only once", () => {
    const b = new LeaseBook(1000);
    b.enqueue("t1");
    const old = b.claim("w1", 0)!;
    b.expire(1000);
    const next = b.claim("w2", 1000)!;
    expect(next.trial).toBe("t1");
    expect(b.complete("t1", old.key, 1100)).toEqual({ ok: false, code: "lease_expired" });
    expect(b.complete("t1", next.key, 1100).ok).toBe(true);
    expect(b.complete("t1", next.key, 1100)).toEqual({ ok: false, code: "lease_moved" });
    expect(b.claim("w3", 1100)).toBeNull();
  });

  it("a result past its expiry is refused even before the sweep ran", () => {
    const b = new LeaseBook(1000);
    b.enqueue("t1");
    const l = b.claim("w1", 0)!;
    expect(b.complete("t1", l.key, 1000)).toEqual({ ok: false, code: "lease_expired" });
  });

  it("a withdrawn trial (the job stopped it) leaves the queue and its holder's calls are refused as moved", () => {
    const b = new LeaseBook(1000);
    b.enqueue("t1");
    b.enqueue("t2");
    const l = b.claim("w1", 0)!;
    b.withdraw("t1");
    b.withdraw("t2");
    expect(b.queued()).toEqual([]);
    expect(b.renew("t1", l.key, 10)).toEqual({ ok: false, code: "lease_moved" });
    expect(b.complete("t1", "forged", 10)).toEqual({ ok: false, code: "lease_unknown" });
  });
});

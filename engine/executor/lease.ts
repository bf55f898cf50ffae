/**
 * The coordinator's lease book: which worker holds which trial, until when. Pure bookkeeping (no store, no clock of
 * its own: every call is told the time), so the rules that keep a trial from being counted twice are tested without
 * an engine. A worker claims the next queued trial and gets a lease (trial, worker, expiry, key); a heartbeat with
 * that key pushes the expiry on; a lease not renewed in time expires and its trial goes back to the front of the
 * queue; a result is accepted only from the lease that still holds the trial, once. The store stays the only truth
 * of what settled: the book only says who may report.
 */
import { randomBytes } from "node:crypto";

/** One worker's hold on one trial. `key` is the lease's secret: a result or heartbeat must bring it back. */
export interface Lease {
  trial: string;
  worker: string;
  /** Epoch ms after which the lease is void unless renewed. */
  expiry: number;
  key: string;
}

/** Why a heartbeat or a result was refused: stable codes a worker acts on (it stops that trial, never retries it). */
export type LeaseRefusal = "lease_expired" | "lease_moved" | "lease_unknown";

/** A lease check: ok, or the refusal code. */
export type LeaseCheck = { ok: true; lease: Lease } | { ok: false; code: LeaseRefusal };

/** The lease book of one job's coordinator. */
export class LeaseBook {
  private readonly queue: string[] = [];
  private readonly held = new Map<string, Lease>();
  /** Keys of leases that ended (expired, revoked, reported): a later call with one is refused as moved or expired. */
  private readonly ended = new Map<string, { trial: string; why: LeaseRefusal }>();

  constructor(private readonly ttlMs: number) {}

  /** Queues `trial` to be claimed (at the back: new work; a requeued trial goes to the front, see expire). */
  enqueue(trial: string): void {
    if (!this.queue.includes(trial) && !this.held.has(trial)) this.queue.push(trial);
  }

  /** Takes `trial` out of the queue or its lease (cancel): no worker may report it afterwards. */
  withdraw(trial: string): void {
    const i = this.queue.indexOf(trial);
    if (i >= 0) this.queue.splice(i, 1);
    const l = this.held.get(trial);
    if (l) this.endLease(l, "lease_moved");
  }

  /** Trials waiting for a worker. */
  queued(): readonly string[] {
    return this.queue;
  }

  /** The lease currently holding `trial`, if any. */
  holder(trial: string): Lease | undefined {
    return this.held.get(trial);
  }

  /** Gives worker `worker` the next queued trial under a new lease, or null when the queue is empty. */
  claim(worker: string, now: number): Lease | null {
    const trial = this.queue.shift();
    if (trial === undefined) return null;
    const lease: Lease = { trial, worker, expiry: now + this.ttlMs, key: randomBytes(16).toString("hex") };
    this.held.set(trial, lease);
    return lease;
  }

  /** Renews the lease `key` for `trial` (a heartbeat): its new expiry, or why it no longer holds. */
  renew(trial: string, key: string, now: number): LeaseCheck {
    const c = this.check(trial, key, now);
    if (c.ok) c.lease.expiry = now + this.ttlMs;
    return c;
  }

  /**
   * Accepts the result of lease `key` for `trial` once: the lease ends, so a second report (a retried POST, a
   * duplicate worker) is refused. Refused when the lease expired or the trial moved to another lease meanwhile.
   */
  complete(trial: string, key: string, now: number): LeaseCheck {
    const c = this.check(trial, key, now);
    if (c.ok) this.endLease(c.lease, "lease_moved");
    return c;
  }

  /**
   * Ends every lease whose expiry passed by `now` and puts its trial back at the front of the queue (it waited
   * longest); returns the leases that expired, so the coordinator records each trial as re-queued.
   */
  expire(now: number): Lease[] {
    const gone = [...this.held.values()].filter((l) => l.expiry <= now);
    for (const l of gone) {
      this.endLease(l, "lease_expired");
      this.queue.unshift(l.trial);
    }
    return gone;
  }

  private check(trial: string, key: string, now: number): LeaseCheck {
    const l = this.held.get(trial);
    if (l && l.key === key) {
      // an expiry not yet swept is still an expiry: a result must not win a race against the sweep
      if (l.expiry <= now) return { ok: false, code: "lease_expired" };
      return { ok: true, lease: l };
    }
    const ended = this.ended.get(key);
    if (ended && ended.trial === trial) return { ok: false, code: ended.why };
    return { ok: false, code: "lease_unknown" };
  }

  private endLease(l: Lease, why: LeaseRefusal): void {
    this.held.delete(l.trial);
    this.ended.set(l.key, { trial: l.trial, why });
  }
}

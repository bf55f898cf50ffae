/**
 * The worker ↔ coordinator protocol as a small hono sub-app (issue 24 §1): the coordinator (`evolve run --executor
 * slurm`) serves it itself on the address it prints, and `evolve serve` can mount it later. Every route needs the
 * job's worker token (`Authorization: Bearer …`), a random secret the coordinator hands to Slurm in the job's
 * environment: never on a command line, never logged. The routes only translate HTTP; what a claim, heartbeat or
 * result does is the coordinator's (coordinator.ts), and a refused lease is a 409 with a stable `code`.
 */
import { timingSafeEqual } from "node:crypto";
import { createReadStream, statSync } from "node:fs";
import { Readable } from "node:stream";
import { Hono } from "hono";
import { EvolveError } from "../errors.ts";
import type { LeaseTotals } from "../gateway-host/model-gateway.ts";
import type { TrialRecord } from "../store/index.ts";
import type { TrialEvent, TrialRequest } from "../trial/types.ts";
import type { BundleEntry } from "./bundle.ts";
import type { Lease, LeaseRefusal } from "./lease.ts";
import type { RemoteGatewayGrant, RemoteGatewayState } from "./remote-gateway.ts";

/** The protocol's path prefix (under `evolve serve` it sits below /api/v1). */
export const WORKER_API = "/executor";

/** What a claim answers: a lease with what to run, or come back later, or stop (the job is over). */
export type ClaimAnswer =
  | { lease: Lease; trial: TrialRecord; request: TrialRequest }
  | { lease: null; wait_ms: number; done?: false }
  | { lease: null; done: true };

/** A lease-checked call's answer: ok, or refused with a stable code. */
export type Checked<T = object> = ({ ok: true } & T) | { ok: false; code: LeaseRefusal };

/** What the routes call. */
export interface CoordinatorDeps {
  /** The job's worker token. */
  token: string;
  claim(worker: string): ClaimAnswer;
  heartbeat(trial: string, key: string): Checked<{ expiry: number }>;
  events(trial: string, key: string, events: TrialEvent[]): Checked;
  result(trial: string, key: string, record: TrialRecord, tree: BundleEntry[]): Promise<Checked>;
  /** A stored task's folder as a bundle; null when the job has no such task. */
  taskBundle(digest: string): Promise<BundleEntry[] | null>;
  /**
   * The job's pack file (engine/pack: its tasks, images and vendored agents), built once on the first call; absent
   * where this coordinator ships nothing.
   */
  pack?(): Promise<string>;
  /**
   * The trial's lease on the coordinator's gateway, its keys minted now (the answer is never logged); refused with
   * `gateway_config_invalid` and the reason when the coordinator cannot meter.
   */
  gatewayLease(trial: string, key: string, caps: { capUsd?: number; judgeCapUsd?: number }): Promise<Checked<RemoteGatewayGrant> | { ok: false; code: "gateway_config_invalid"; message: string }>;
  /** The gateway lease's state, revoking a lane's keys first when asked. */
  gatewayState(trial: string, key: string, revoke?: "agent" | "judge"): Checked<RemoteGatewayState>;
  /** Ends the gateway lease: its totals and usage events. */
  gatewayEnd(trial: string, key: string): Promise<Checked<LeaseTotals>>;
}

/** The protocol's routes, relative to where they are mounted. */
export function coordinatorApp(deps: CoordinatorDeps): Hono {
  const app = new Hono();
  const want = Buffer.from(`Bearer ${deps.token}`);
  app.use("*", async (c, next) => {
    const got = Buffer.from(c.req.header("authorization") ?? "");
    if (got.length !== want.length || !timingSafeEqual(got, want)) return c.json({ code: "unauthorized" }, 401);
    await next();
  });
  const refused = (c: { json: (b: unknown, s: 409) => Response }, code: LeaseRefusal) => c.json({ code }, 409);
  app.post("/claim", async (c) => {
    const { worker } = await c.req.json<{ worker: string }>();
    return c.json(deps.claim(String(worker)));
  });
  app.post("/heartbeat", async (c) => {
    const b = await c.req.json<{ trial: string; key: string }>();
    const r = deps.heartbeat(b.trial, b.key);
    return r.ok ? c.json(r) : refused(c, r.code);
  });
  app.post("/events", async (c) => {
    const b = await c.req.json<{ trial: string; key: string; events: TrialEvent[] }>();
    const r = deps.events(b.trial, b.key, Array.isArray(b.events) ? b.events : []);
    return r.ok ? c.json(r) : refused(c, r.code);
  });
  app.post("/result", async (c) => {
    const b = await c.req.json<{ trial: string; key: string; record: TrialRecord; tree: BundleEntry[] }>();
    const r = await deps.result(b.trial, b.key, b.record, b.tree ?? []);
    return r.ok ? c.json(r) : refused(c, r.code);
  });
  app.post("/gateway/lease", async (c) => {
    const b = await c.req.json<{ trial: string; key: string; capUsd?: unknown; judgeCapUsd?: unknown }>();
    const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
    const caps = { ...(num(b.capUsd) !== undefined ? { capUsd: num(b.capUsd) } : {}), ...(num(b.judgeCapUsd) !== undefined ? { judgeCapUsd: num(b.judgeCapUsd) } : {}) };
    const r = await deps.gatewayLease(b.trial, b.key, caps);
    if (r.ok) return c.json(r);
    return r.code === "gateway_config_invalid" ? c.json(r, 422) : refused(c, r.code);
  });
  app.post("/gateway/state", async (c) => {
    const b = await c.req.json<{ trial: string; key: string; revoke?: string }>();
    const r = deps.gatewayState(b.trial, b.key, b.revoke === "agent" || b.revoke === "judge" ? b.revoke : undefined);
    return r.ok ? c.json(r) : refused(c, r.code);
  });
  app.post("/gateway/end", async (c) => {
    const b = await c.req.json<{ trial: string; key: string }>();
    const r = await deps.gatewayEnd(b.trial, b.key);
    return r.ok ? c.json(r) : refused(c, r.code);
  });
  app.get("/tasks/:digest", async (c) => {
    const entries = await deps.taskBundle(c.req.param("digest"));
    return entries ? c.json({ entries }) : c.json({ code: "task_not_found" }, 404);
  });
  // streamed from the file: a pack holds every image the job runs, far too large to hold in memory
  app.get("/pack", async (c) => {
    if (!deps.pack) return c.json({ code: "pack_not_served" }, 404);
    let file: string;
    try {
      file = await deps.pack();
    } catch (e) {
      return c.json({ code: e instanceof EvolveError ? e.code : "pack_failed", message: (e as Error).message }, 500);
    }
    const body = Readable.toWeb(createReadStream(file)) as unknown as ReadableStream<Uint8Array>;
    return new Response(body, { headers: { "content-type": "application/octet-stream", "content-length": String(statSync(file).size) } });
  });
  return app;
}

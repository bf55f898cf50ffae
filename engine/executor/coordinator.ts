/**
 * The coordinator of a job whose trials run on remote workers (issue 24 §1). It is the job runner's executor: each
 * trial the runner hands it is queued in the lease book, a worker claims it over the API, and the trial's promise
 * resolves once that worker's result was accepted. The coordinator is the only writer of the store: it records a
 * lease as the trial going RUNNING, an expired lease as the trial going back to QUEUED, and an accepted result as the
 * settled record, every status through engine/trial/lifecycle.ts. Retries, cancel, budgets and resume stay the job
 * runner's, unchanged. A remote trial's model calls come to the job's gateway over its TCP listener with keys minted
 * here per trial (remote-gateway.ts), so budgets, metering and the ledger are this process's, as for a local trial.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { Hono } from "hono";
import { packRef } from "../pack/mod.ts";
import { GatewayConfigError, ModelGateway, type GatewayLease, type LeaseTotals } from "../gateway-host/model-gateway.ts";
import type { JobExecutor } from "../job/executor.ts";
import { serveFetch, type HttpListener } from "../runtime.ts";
import { taskBlobDir, trialDir, type Store, type TrialRecord } from "../store/index.ts";
import { isSettledStatus, leasedTrial, plainException, remoteSettledTrial, requeuedTrial, settle, thrownVerdict } from "../trial/lifecycle.ts";
import { homeGateway, spendRecord } from "../trial/spend.ts";
import { watchStopRequest } from "../trial/stop.ts";
import type { TrialDeps, TrialEvent, TrialRequest } from "../trial/types.ts";
import { zeroLane } from "../../gateway/meter.ts";
import { packDir, unpackDir, type BundleEntry } from "./bundle.ts";
import { coordinatorApp, WORKER_API, type ClaimAnswer, type Checked } from "./coordinator-api.ts";
import { LeaseBook, type Lease } from "./lease.ts";
import type { RemoteGatewayGrant, RemoteGatewayState } from "./remote-gateway.ts";
import type { WorkerLauncher } from "./types.ts";

/**
 * How long a remote trial's gateway keys live at most: the trial's gateway lease ends sooner (its result, its lease
 * lost, the job stopped) and revokes them then; this bounds a key nothing ended.
 */
const REMOTE_KEY_TTL_MS = 24 * 3600_000;

/** Seconds a lease lasts without a heartbeat unless told otherwise (EVOLVE_LEASE_SECONDS, tests shorten it). */
export const DEFAULT_LEASE_SECONDS = 30;

interface Pending {
  req: TrialRequest;
  deps: TrialDeps;
  resolve: (r: TrialRecord) => void;
}

/** Options of a coordinator. */
export interface CoordinatorOptions {
  store: Store;
  home: string;
  launcher: WorkerLauncher;
  /** Address the API listens on and workers are told (default 127.0.0.1: one host). */
  host?: string;
  port?: number;
  leaseSeconds?: number;
  /** Most workers to start (default: the job's concurrency). */
  workers?: number;
  /** Lines for the user (the API's address, the cluster's job id); never the token. */
  say?: (line: string) => void;
  /**
   * The gateway remote trials' boxes reach (over TCP on `host`): by default the job's own (the one the job runner
   * hands each trial), else the home's.
   */
  gateway?: ModelGateway;
}

/** Where a job's submissions are remembered, so `job resume` after a lost coordinator cancels the old workers first. */
export function submissionsFile(home: string, jobId: string): string {
  return join(home, "executor", `${jobId}.json`);
}

/** A job's executor that leases its trials to remote workers. */
export class Coordinator implements JobExecutor {
  readonly kind: string;
  private readonly book: LeaseBook;
  private readonly pending = new Map<string, Pending>();
  /** The job's pack for workers that pull one (`evolve worker --ship images`): built once, on the first request. */
  private packing?: Promise<string>;
  /** Remote trials' leases on the coordinator's gateway, by trial. */
  private readonly gwLeases = new Map<string, GatewayLease>();
  private readonly leaseMs: number;
  private server: HttpListener | undefined;
  private sweep: ReturnType<typeof setInterval> | undefined;
  private submission: string | undefined;
  private jobId = "";
  private done = false;
  private inFlight = 0;
  /** The job's worker token. */
  private readonly token = randomBytes(24).toString("hex");

  constructor(private readonly o: CoordinatorOptions) {
    this.kind = o.launcher.kind;
    this.leaseMs = (o.leaseSeconds ?? DEFAULT_LEASE_SECONDS) * 1000;
    this.book = new LeaseBook(this.leaseMs);
  }

  /** The API's URL once started (with the protocol's prefix), for workers. */
  get url(): string | undefined {
    return this.server ? `${this.server.url}${WORKER_API}` : undefined;
  }

  /** Queues the trial for a worker; resolves with its settled record once a worker's result is accepted. */
  readonly runTrial = (req: TrialRequest, outer: TrialDeps): Promise<TrialRecord> =>
    new Promise<TrialRecord>((resolve) => {
      const id = req.trialId;
      // `evolve trial stop` marks the record; the watch turns that into this trial's abort, as for a local trial
      const watch = watchStopRequest(this.o.store, id, outer.signal);
      const deps = { ...outer, signal: watch.signal };
      const onAbort = () => {
        if (!this.pending.has(id)) return;
        this.pending.delete(id);
        this.book.withdraw(id);
        void this.endGateway(id);
        watch.dispose();
        resolve(this.settleStopped(id, watch.signal));
      };
      this.pending.set(id, {
        req,
        deps,
        resolve: (r) => {
          watch.signal.removeEventListener("abort", onAbort);
          watch.dispose();
          resolve(r);
        },
      });
      this.book.enqueue(id);
      if (watch.signal.aborted) onAbort();
      else watch.signal.addEventListener("abort", onAbort, { once: true });
    });

  /** Serves the API and submits the workers; cancels a lost coordinator's earlier submissions of this job first. */
  async start(o: { jobId: string; trials: number; concurrency: number }): Promise<void> {
    this.jobId = o.jobId;
    const file = submissionsFile(this.o.home, o.jobId);
    const earlier: string[] = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")).submissions ?? []) : [];
    for (const id of earlier) await this.o.launcher.cancel(id).catch(() => {});
    const app = new Hono().route(WORKER_API, coordinatorApp(this.api()));
    // requests in flight are counted so stop() lets a worker's last answer (its accepted result) reach it
    const fetch = async (req: Request) => {
      this.inFlight++;
      try {
        return await app.fetch(req);
      } finally {
        setTimeout(() => this.inFlight--, 50);
      }
    };
    this.server = await serveFetch(fetch, { host: this.o.host ?? "127.0.0.1", port: this.o.port ?? 0 });
    this.sweep = setInterval(() => this.expire(), Math.max(200, this.leaseMs / 4));
    this.o.say?.(`coordinator: workers claim trials at ${this.url}`);
    if (o.trials === 0) return;
    const logDir = join(this.o.home, "executor", o.jobId);
    mkdirSync(logDir, { recursive: true });
    const workers = Math.max(1, Math.min(this.o.workers ?? o.concurrency, o.trials));
    this.submission = await this.o.launcher.submit({ jobId: o.jobId, workers, coordinatorUrl: this.url!, token: this.token, leaseSeconds: this.leaseMs / 1000, logDir });
    writeFileSync(file, JSON.stringify({ kind: this.kind, submissions: [this.submission] }) + "\n");
    this.o.say?.(`coordinator: ${this.kind} job ${this.submission} submitted: ${workers} worker${workers === 1 ? "" : "s"}, logs in ${logDir}/`);
  }

  /** Tells idle workers the job is over, cancels the submission and stops serving. */
  async stop(): Promise<void> {
    this.done = true;
    if (this.sweep) clearInterval(this.sweep);
    if (this.submission) await this.o.launcher.cancel(this.submission).catch(() => {});
    await Promise.all([...this.gwLeases.keys()].map((t) => this.endGateway(t)));
    for (let waited = 0; this.inFlight > 0 && waited < 5000; waited += 50) await new Promise((r) => setTimeout(r, 50));
    await this.server?.close().catch(() => {});
    this.server = undefined;
    // the pack holds every image the job ran: it is not kept past the run that served it
    const packing = this.packing;
    this.packing = undefined;
    await packing?.then((f) => rm(f, { force: true })).catch(() => {});
  }

  /** The cluster's view of this job's workers (empty before submitting). */
  async status() {
    return this.submission ? await this.o.launcher.status(this.submission) : [];
  }

  private api() {
    return {
      token: this.token,
      claim: (worker: string) => this.claim(worker),
      heartbeat: (trial: string, key: string): Checked<{ expiry: number }> => {
        const r = this.book.renew(trial, key, Date.now());
        return r.ok ? { ok: true, expiry: r.lease.expiry } : r;
      },
      events: (trial: string, key: string, events: TrialEvent[]): Checked => {
        const r = this.book.renew(trial, key, Date.now());
        if (!r.ok) return r;
        const onEvent = this.pending.get(trial)?.deps.onEvent;
        for (const e of events) if (e && e.trialId === trial) onEvent?.(e);
        // the phase a remote trial is in shows in `job show` as a local one's does (no status moves here)
        const phase = events.filter((e) => e?.kind === "phase" && e.trialId === trial).pop();
        if (phase?.kind === "phase") {
          const { store } = this.o;
          store.transaction(() => {
            const t = store.getTrial(trial);
            if (t && !isSettledStatus(t.status)) store.putTrial({ ...t, attempt_phase: phase.phase, updated_at: new Date().toISOString() });
          });
        }
        return { ok: true };
      },
      result: (trial: string, key: string, record: TrialRecord, tree: BundleEntry[]) => this.accept(trial, key, record, tree),
      taskBundle: async (digest: string) => {
        const known = [...this.pending.values()].some((p) => p.req.task.digest === digest);
        const dir = taskBlobDir(this.o.home, digest);
        return known && existsSync(dir) ? await packDir(dir) : null;
      },
      pack: () => (this.packing ??= this.buildPack().catch((e) => {
        // a failed build (an image that would not build) is tried again on the next worker's request
        this.packing = undefined;
        throw e;
      })),
      gatewayLease: (trial: string, key: string, caps: { capUsd?: number; judgeCapUsd?: number }) => this.gatewayLease(trial, key, caps),
      gatewayState: (trial: string, key: string, revoke?: "agent" | "judge"): Checked<RemoteGatewayState> => {
        const r = this.book.renew(trial, key, Date.now());
        if (!r.ok) return r;
        const gl = this.gwLeases.get(trial);
        if (!gl) return { ok: true };
        if (revoke === "agent") gl.endAgent();
        if (revoke === "judge") gl.endJudge();
        const refusal = gl.budgetRefusal();
        const capReached = gl.capReached();
        const unavailable = gl.modelUnavailable();
        const stop = gl.unavailablePastCutoff();
        return { ok: true, ...(refusal ? { refusal } : {}), ...(capReached ? { capReached } : {}), ...(unavailable ? { unavailable } : {}), ...(stop ? { stop } : {}) };
      },
      gatewayEnd: async (trial: string, key: string): Promise<Checked<LeaseTotals>> => {
        const r = this.book.renew(trial, key, Date.now());
        if (!r.ok) return r;
        const totals = await this.endGateway(trial);
        return { ok: true, ...(totals ?? { agent: zeroLane(), judge: zeroLane(), events: [] }) };
      },
    };
  }

  /**
   * Packs the job (engine/pack: its tasks, the images they run, the vendored agents its trials use) into this home's
   * executor folder with the engine the job runs with, replacing what an earlier run of the job left there.
   */
  private async buildPack(): Promise<string> {
    const first = this.pending.values().next().value;
    if (!this.jobId || !first) throw new Error("the job has no trial left to pack for");
    const out = join(this.o.home, "executor", `${this.jobId}.evolvepack`);
    mkdirSync(join(this.o.home, "executor"), { recursive: true });
    this.o.say?.("coordinator: packing the job's tasks, images and agents for the workers");
    await packRef(this.o.store, this.o.home, first.deps.engine, this.jobId, { out });
    return out;
  }

  /** The gateway remote trials reach: the one given, else the job's (handed with the trial), else the home's. */
  private gatewayOf(p: Pending): ModelGateway {
    if (this.o.gateway) return this.o.gateway;
    return p.deps.gateway instanceof ModelGateway ? p.deps.gateway : homeGateway(this.o.home, this.o.store);
  }

  /**
   * Opens a remote trial's lease on the coordinator's gateway (its budgets, meter and ledger, as a local trial's)
   * and mints its keys; the gateway's TCP listener starts with the first. Live spend is written to the record as
   * the runner writes a local trial's.
   */
  private async gatewayLease(trial: string, key: string, caps: { capUsd?: number; judgeCapUsd?: number }): Promise<Checked<RemoteGatewayGrant> | { ok: false; code: "gateway_config_invalid"; message: string }> {
    const r = this.book.renew(trial, key, Date.now());
    if (!r.ok) return r;
    const p = this.pending.get(trial);
    if (!p) return { ok: false, code: "lease_moved" };
    await this.endGateway(trial);
    const gw = this.gatewayOf(p);
    const { store } = this.o;
    let lease: GatewayLease;
    let url: string;
    try {
      url = (await gw.serveRemote({ host: this.o.host ?? "127.0.0.1" })).url;
      lease = (await gw.lease({
        trialId: trial,
        jobId: p.req.jobId,
        capUsd: gw.trialCap(caps.capUsd),
        ...(caps.judgeCapUsd !== undefined ? { judgeCapUsd: caps.judgeCapUsd } : {}),
        remote: true,
        onSpend: (t) =>
          store.transaction(() => {
            const rec = store.getTrial(trial);
            if (rec && !isSettledStatus(rec.status)) store.putTrial({ ...rec, ...spendRecord(t, false), updated_at: new Date().toISOString() });
          }),
      })) as GatewayLease;
    } catch (e) {
      if (e instanceof GatewayConfigError) return { ok: false, code: "gateway_config_invalid", message: e.message };
      throw e;
    }
    // the trial's lease may have ended while the gateway started: then nobody may use these keys
    if (this.book.holder(trial)?.key !== key) {
      await lease.end();
      lease.forget();
      return { ok: false, code: "lease_moved" };
    }
    this.gwLeases.set(trial, lease);
    return { ok: true, url, keys: lease.remoteKeys(REMOTE_KEY_TTL_MS) };
  }

  /** Ends a remote trial's gateway lease (every key revoked, the ledger booked); its totals, if it had one. */
  private async endGateway(trial: string): Promise<LeaseTotals | undefined> {
    const gl = this.gwLeases.get(trial);
    if (!gl) return undefined;
    this.gwLeases.delete(trial);
    const totals = await gl.end();
    gl.forget();
    return totals;
  }

  private claim(worker: string): ClaimAnswer {
    if (this.done) return { lease: null, done: true };
    this.expire();
    const { store } = this.o;
    for (;;) {
      const lease = this.book.claim(worker, Date.now());
      if (!lease) return { lease: null, wait_ms: 1000 };
      const p = this.pending.get(lease.trial)!;
      const trial = store.transaction(() => {
        const rec = store.getTrial(lease.trial)!;
        // `trial stop` got there first (it settles a queued trial itself): not leased; the trial's watch settles it
        if (isSettledStatus(rec.status) || rec.stop_requested_at) return null;
        const leased = leasedTrial(rec, new Date().toISOString());
        store.putTrial(leased);
        return leased;
      });
      if (!trial) {
        this.book.withdraw(lease.trial);
        continue;
      }
      return this.leased(worker, lease, p, trial);
    }
  }

  private leased(worker: string, lease: Lease, p: Pending, trial: TrialRecord): ClaimAnswer {
    p.deps.onEvent?.({ kind: "log", trialId: lease.trial, stream: "system", line: `leased to worker ${worker}` });
    p.deps.onEvent?.({ kind: "status", trialId: lease.trial, status: trial.status });
    return { lease, trial, request: p.req };
  }

  /** Ends leases not renewed in time and records their trials as queued again. */
  private expire(): void {
    const { store } = this.o;
    for (const l of this.book.expire(Date.now())) {
      const why = `worker ${l.worker} was lost (its lease expired)`;
      store.transaction(() => {
        const t = store.getTrial(l.trial);
        if (t) store.putTrial(requeuedTrial(t, new Date().toISOString(), why));
      });
      // its boxes may still run on the lost node: its keys die with the lease
      void this.endGateway(l.trial);
      this.pending.get(l.trial)?.deps.onEvent?.({ kind: "log", trialId: l.trial, stream: "system", line: `${why}: queued again` });
    }
  }

  /** A worker's result: accepted once, from the lease that still holds the trial; then the tree and the record. */
  private async accept(trial: string, key: string, record: TrialRecord, tree: BundleEntry[]): Promise<Checked> {
    const r = this.book.complete(trial, key, Date.now());
    if (!r.ok) return r;
    const p = this.pending.get(trial);
    if (!p) return { ok: false, code: "lease_moved" };
    this.pending.delete(trial);
    await this.endGateway(trial);
    const dir = trialDir(this.o.home, trial);
    await rm(dir, { recursive: true, force: true });
    await unpackDir(dir, tree);
    const { store } = this.o;
    const settled = store.transaction(() => {
      const rec = remoteSettledTrial(store.getTrial(trial)!, record, new Date().toISOString());
      store.putTrial(rec);
      return rec;
    });
    p.resolve(settled);
    return { ok: true };
  }

  /**
   * Settles a trial the job stopped (cancel, interruption, `trial stop`) as the in-process runner would: CANCELLED or
   * INTERRUPTED; one that `trial stop` settled already (it was still queued) is kept as it is.
   */
  private settleStopped(id: string, signal: AbortSignal): TrialRecord {
    const { store } = this.o;
    return store.transaction(() => {
      const rec = store.getTrial(id)!;
      if (isSettledStatus(rec.status)) return rec;
      const at = new Date().toISOString();
      const v = thrownVerdict(signal.reason, plainException, signal);
      const out = { ...rec, ...settle(rec, v, at), updated_at: at };
      store.putTrial(out);
      return out;
    });
  }
}

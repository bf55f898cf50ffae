/**
 * `evolve worker`: one process a cluster starts for a job (issue 24 §1). It claims a trial by lease from the job's
 * coordinator, runs it in this node's own container engine with the same runner as `evolve run`, and streams its
 * events and then its settled record and trial tree back. It writes nothing to the coordinator's store: its runner
 * records into a scratch home of its own, which is where the tree is read from. A heartbeat keeps the lease; a
 * refused heartbeat (the lease expired or the trial was withdrawn) stops the trial at once, and a refused result is
 * dropped, so a trial is never counted twice. It exits when the coordinator says the job is over or stays
 * unreachable. Its trials' model calls go to the coordinator's gateway (remote-gateway.ts), never to one of its
 * own; what it creates is labelled with its id and cluster job, so what a killed worker left is removed (below, and
 * scripts/slurm/epilog.sh).
 */
import { createWriteStream, existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { LABEL_WORKER, LABEL_WORKER_JOB, type ContainerSpec, type Engine } from "../driver/types.ts";
import { EvolveError } from "../errors.ts";
import { GatewayConfigError, type LeaseTotals } from "../gateway-host/model-gateway.ts";
import { unpackFile } from "../pack/mod.ts";
import { openStore, taskBlobDir, trialDir, type TrialRecord } from "../store/index.ts";
import { runTrial, settleRemovals } from "../trial/run.ts";
import type { TrialEvent } from "../trial/types.ts";
import { packDir, unpackDir, type BundleEntry } from "./bundle.ts";
import type { ClaimAnswer } from "./coordinator-api.ts";
import { RemoteGateway, type RemoteGatewayApi, type RemoteGatewayGrant, type RemoteGatewayState } from "./remote-gateway.ts";

/** What a worker needs. */
export interface WorkerOptions {
  /** The coordinator's API (its printed URL with the protocol's prefix). */
  url: string;
  /** The job's worker token (from the environment, never a flag). */
  token: string;
  workerId: string;
  /** The worker's own home: its scratch store, task copies and trial trees. */
  home: string;
  engine: Engine;
  /** Seconds a lease lasts; heartbeats go at a third of it. */
  leaseSeconds: number;
  /** A folder holding the coordinator's `tasks/` (a shared filesystem); else tasks are fetched over the API. */
  sharedHome?: string;
  /**
   * `images`: pull the job's pack from the coordinator (`GET /pack`) and unpack it (images into this node's engine,
   * agents into `agentsRoot`) before the first claim; `none` (the default): the node has them already.
   */
  ship?: "images" | "none";
  /** Where a pulled pack's vendored agents go (default: the agents folder, EVOLVE_AGENTS_DIR). */
  agentsRoot?: string;
  /** How long the coordinator may stay unreachable before the worker gives up (ms). */
  giveUpMs?: number;
  /** The cluster's id of the job this worker runs in (SLURM_JOB_ID), labelled on its boxes for the node's epilog. */
  clusterJob?: string;
  signal?: AbortSignal;
  log?: (line: string) => void;
}

/** Runs trials for the coordinator until the job is over; resolves with how many results were accepted. */
export async function runWorker(o: WorkerOptions): Promise<number> {
  await removeLeftovers(o.engine, o.workerId, o.log);
  o = { ...o, engine: labelled(o.engine, { [LABEL_WORKER]: o.workerId, ...(o.clusterJob ? { [LABEL_WORKER_JOB]: o.clusterJob } : {}) }) };
  const store = openStore(o.home);
  const call = caller(o);
  let accepted = 0;
  try {
    if (o.ship === "images") await pullPack(o, store);
    while (!o.signal?.aborted) {
      const answer = (await call("POST", "/claim", { worker: o.workerId })) as ClaimAnswer;
      if (answer.lease === null) {
        if (answer.done) break;
        await sleep(answer.wait_ms, o.signal);
        continue;
      }
      if (await runLeased(o, store, call, answer)) accepted++;
    }
  } catch (e) {
    // stopped from outside (scancel's SIGTERM) while waiting on the coordinator: a normal end, not a failure
    if (!o.signal?.aborted) throw e;
  } finally {
    await settleRemovals();
    await store.close();
  }
  return accepted;
}

/** One call to the coordinator's API: its JSON answer, LeaseRefused on a 409. */
export type Call = (method: "GET" | "POST", path: string, body?: unknown) => Promise<unknown>;

/** Runs the leased trial and reports it; true when the coordinator accepted the result. */
async function runLeased(o: WorkerOptions, store: ReturnType<typeof openStore>, call: Call, a: Extract<ClaimAnswer, { lease: object }>): Promise<boolean> {
  const { lease, request } = a;
  const log = o.log ?? (() => {});
  log(`trial ${lease.trial}: leased (task ${request.task.name})`);
  const taskDir = await localTask(o, call, request.task.digest);
  // the scratch store holds the trial as the coordinator leased it, with no history: the runner opens the attempt
  store.putTrial({ ...a.trial, attempts: [] });
  const stop = new AbortController();
  const onOuter = () => stop.abort(o.signal?.reason);
  o.signal?.addEventListener("abort", onOuter, { once: true });
  const pending: TrialEvent[] = [];
  const leaseOk = { value: true };
  const beat = setInterval(
    () => {
      const events = pending.splice(0);
      call("POST", events.length > 0 ? "/events" : "/heartbeat", { trial: lease.trial, key: lease.key, events }).catch((e) => {
        if (e instanceof LeaseRefused) {
          leaseOk.value = false;
          log(`trial ${lease.trial}: lease lost (${e.code}): stopping it`);
          stop.abort(new Error(`the lease was refused: ${e.code}`));
        }
      });
    },
    Math.max(200, (o.leaseSeconds * 1000) / 3),
  );
  let rec: TrialRecord;
  try {
    // the trial's boxes reach the coordinator's gateway with keys it mints: its budgets and meter hold for them
    const gateway = new RemoteGateway(gatewayApi(call, lease.trial, lease.key));
    rec = await runTrial({ ...request, home: o.home, task: { ...request.task, dir: taskDir } }, { engine: o.engine, store, signal: stop.signal, onEvent: (e) => pending.push(e), gateway });
  } finally {
    clearInterval(beat);
    o.signal?.removeEventListener("abort", onOuter);
  }
  const tree = trialDir(o.home, lease.trial);
  try {
    if (!leaseOk.value) return false;
    const entries = existsSync(tree) ? await packDir(tree) : [];
    await call("POST", "/result", { trial: lease.trial, key: lease.key, record: rec, tree: entries });
    log(`trial ${lease.trial}: ${rec.status}, accepted`);
    return true;
  } catch (e) {
    if (!(e instanceof LeaseRefused)) throw e;
    log(`trial ${lease.trial}: result refused (${e.code}): another worker holds it or the job stopped it`);
    return false;
  } finally {
    await rm(tree, { recursive: true, force: true });
  }
}

/** The coordinator's gateway calls for one leased trial, checked against its lease there. */
export function gatewayApi(call: Call, trial: string, key: string): RemoteGatewayApi {
  return {
    open: async (caps) => {
      const { ok: _, ...grant } = (await call("POST", "/gateway/lease", { trial, key, ...caps })) as RemoteGatewayGrant & { ok: true };
      return grant;
    },
    state: async (revoke) => {
      const { ok: _, ...state } = (await call("POST", "/gateway/state", { trial, key, ...(revoke ? { revoke } : {}) })) as RemoteGatewayState & { ok: true };
      return state;
    },
    end: async () => {
      const { ok: _, ...totals } = (await call("POST", "/gateway/end", { trial, key })) as LeaseTotals & { ok: true };
      return totals;
    },
  };
}

/**
 * Removes the boxes and networks a previous incarnation of this worker left (it was killed outright: nothing of its
 * own cleanup ran). Its trials' leases expired meanwhile and were run again elsewhere, so nothing here is anyone's.
 */
export async function removeLeftovers(engine: Engine, workerId: string, log?: (line: string) => void): Promise<void> {
  const boxes = await engine.list({ [LABEL_WORKER]: workerId });
  for (const b of boxes) await engine.remove(b.id).catch(() => {});
  const nets = await engine.listNetworks({ [LABEL_WORKER]: workerId });
  for (const n of nets) await engine.removeNetwork(n.name).catch(() => {});
  if (boxes.length + nets.length > 0) log?.(`removed ${boxes.length} box(es) and ${nets.length} network(s) a previous run of this worker left`);
}

/** `engine` with `labels` added to every container and network it creates (the rest passes through unchanged). */
export function labelled(engine: Engine, labels: Record<string, string>): Engine {
  return new Proxy(engine, {
    get(target, prop, receiver) {
      if (prop === "create") return (spec: ContainerSpec) => target.create({ ...spec, labels: { ...spec.labels, ...labels } });
      if (prop === "createNetwork") return (name: string, opts: Parameters<Engine["createNetwork"]>[1]) => target.createNetwork(name, { ...opts, labels: { ...opts.labels, ...labels } });
      const v = Reflect.get(target, prop, receiver);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

/**
 * Downloads the job's pack into the worker's home (streamed to a file, never held whole) and unpacks it: verified
 * member by member first, so a pack changed on its way stops the worker with unpack's stable code before it claims
 * anything. Its tasks land in the scratch store, where the trials' task folders are then found without a fetch.
 */
export async function pullPack(o: Pick<WorkerOptions, "url" | "token" | "home" | "engine" | "agentsRoot" | "log">, store: ReturnType<typeof openStore>): Promise<void> {
  const log = o.log ?? (() => {});
  const file = join(o.home, "job.evolvepack");
  log("pulling the job's pack from the coordinator");
  const res = await fetch(`${o.url}/pack`, { headers: { authorization: `Bearer ${o.token}` } });
  if (!res.ok || !res.body) {
    const json = (await res.json().catch(() => ({}))) as { code?: string; message?: string };
    throw new EvolveError("coordinator_unreachable", `the coordinator answered ${res.status} to GET /pack${json.code ? ` (${json.code}${json.message ? `: ${json.message}` : ""})` : ""}`, "check the coordinator's log; `--ship none` runs with what the nodes hold");
  }
  try {
    await pipeline(Readable.fromWeb(res.body as unknown as WebReadableStream<Uint8Array>), createWriteStream(file));
    const r = await unpackFile(store, o.home, o.engine, file, { agentsRoot: o.agentsRoot, log });
    log(`unpacked ${r.dataset.tasks} task(s), ${r.images.length} image(s), ${r.agents.imported.length + r.agents.skipped.length} agent version(s)`);
  } finally {
    await rm(file, { force: true });
  }
}

/** The task's folder on this node: the shared one when configured and present, else a copy fetched once. */
async function localTask(o: WorkerOptions, call: Call, digest: string): Promise<string> {
  if (o.sharedHome) {
    const shared = taskBlobDir(o.sharedHome, digest);
    if (existsSync(shared)) return shared;
  }
  const dir = taskBlobDir(o.home, digest);
  if (existsSync(dir)) return dir;
  const { entries } = (await call("GET", `/tasks/${encodeURIComponent(digest)}`)) as { entries: BundleEntry[] };
  const part = `${dir}.part-${process.pid}`;
  await unpackDir(part, entries);
  const { rename } = await import("node:fs/promises");
  await rename(part, dir);
  return dir;
}

/** A refused lease (409): the worker drops the trial, never retries it. */
export class LeaseRefused extends Error {
  constructor(readonly code: string) {
    super(`lease refused: ${code}`);
  }
}

/** HTTP to the coordinator with the token; retries a connection failure until `giveUpMs`, then gives up. */
export function caller(o: Pick<WorkerOptions, "url" | "token" | "leaseSeconds" | "giveUpMs" | "signal">): Call {
  const giveUp = o.giveUpMs ?? Math.max(30_000, o.leaseSeconds * 3000);
  return async (method, path, body) => {
    const t0 = Date.now();
    for (;;) {
      if (o.signal?.aborted) throw new Error("the worker was stopped");
      let res: Response;
      try {
        res = await fetch(`${o.url}${path}`, {
          method,
          headers: { authorization: `Bearer ${o.token}`, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        });
      } catch (e) {
        if (Date.now() - t0 > giveUp) throw new EvolveError("coordinator_unreachable", `the coordinator at ${o.url} did not answer for ${Math.round((Date.now() - t0) / 1000)} s: ${(e as Error).message}`, "it was stopped or killed: `evolve job resume` starts a new one");
        await sleep(1000, o.signal);
        continue;
      }
      const json = (await res.json().catch(() => ({}))) as { code?: string; message?: string };
      if (res.status === 409) throw new LeaseRefused(json.code ?? "lease_unknown");
      if (json.code === "gateway_config_invalid") throw new GatewayConfigError(json.message ?? "the coordinator cannot read its gateway's configuration");
      if (!res.ok) throw new EvolveError("coordinator_unreachable", `the coordinator answered ${res.status} to ${method} ${path}${json.code ? ` (${json.code})` : ""}`, "check the worker token and that the coordinator serves this job");
      return json;
    }
  };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((r) => {
    const t = setTimeout(r, ms);
    signal?.addEventListener("abort", () => (clearTimeout(t), r()), { once: true });
  });
}

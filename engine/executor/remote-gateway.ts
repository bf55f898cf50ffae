/**
 * A worker's gateway (issue 24 §1): the trial's boxes reach the COORDINATOR's gateway, so the coordinator's budgets
 * (the user's credits, the team's month, the global cap, `gateway stop`), its metering and its ledger hold for a
 * remote trial as for a local one. The runner takes a lease here as it would from the process gateway; the lease
 * asks the coordinator for the trial's keys (minted there, over the lease-checked worker API, never logged) and
 * opens the trial's own unix socket on this node, which forwards every request to the coordinator's TCP gateway.
 * The box's relay holds that socket as it holds a local one (network.ts), so the network modes are unchanged.
 *
 * What the runner asks of a lease in between (a budget's refusal, the trial's cap reached, a model the agent never
 * met) is the coordinator's meter's word: a refusal shows at once in the forwarded answer's refused header, and
 * the rest is asked of the coordinator after every failed call and when the agent's phase ends.
 */
import { mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { agentEnv, judgeEnv, type JudgeFamily } from "../../gateway/credentials.ts";
import { REFUSED_HEADER, zeroLane } from "../../gateway/meter.ts";
import type { BudgetScope } from "../../gateway/types.ts";
import type { BudgetRefusal, LeaseRequest, LeaseTotals, RemoteKeys, TrialGateway, TrialGatewayLease } from "../gateway-host/model-gateway.ts";
import { serveFetch, type HttpListener } from "../runtime.ts";

/** The coordinator's word on a remote trial's gateway lease (what GatewayLease knows from its own meter). */
export interface RemoteGatewayState {
  refusal?: BudgetRefusal;
  capReached?: string;
  /** modelUnavailable() now: replaced by every answer (a later answered call clears it). */
  unavailable?: string;
  /** The agent's model unavailable past UNAVAILABLE_CUTOFF: the agent is stopped. */
  stop?: string;
}

/** What the coordinator answers a worker's gateway lease: where its gateway listens and the trial's keys. */
export interface RemoteGatewayGrant {
  url: string;
  keys: RemoteKeys;
}

/** The lease-checked calls a worker's gateway makes to its coordinator (worker.ts binds them to the trial's lease). */
export interface RemoteGatewayApi {
  /** Opens the trial's lease on the coordinator's gateway; throws GatewayConfigError when the coordinator cannot meter. */
  open(req: { capUsd?: number; judgeCapUsd?: number }): Promise<RemoteGatewayGrant>;
  /** The coordinator's state of the lease, revoking `lane`'s key first when given. */
  state(revoke?: "agent" | "judge"): Promise<RemoteGatewayState>;
  /** Ends the lease there (every key revoked, the ledger booked) and returns its totals and usage events. */
  end(): Promise<LeaseTotals>;
}

/** Where per-trial sockets live on this node: short (a unix socket path holds ~107 bytes), private to this user. */
function socketRoot(): string {
  const uid = process.getuid?.() ?? 0;
  return process.env.XDG_RUNTIME_DIR ? join(process.env.XDG_RUNTIME_DIR, "evolve", "wgw") : join(tmpdir(), `evolve-${uid}`, "wgw");
}

/** The gateway a worker's runner takes its one trial's lease from. */
export class RemoteGateway implements TrialGateway {
  constructor(private readonly api: RemoteGatewayApi) {}

  /** The smallest of the caps given: the coordinator applies its own config's trial cap on top. */
  trialCap(...caps: (number | undefined)[]): number | undefined {
    const all = caps.filter((c): c is number => c !== undefined);
    return all.length > 0 ? Math.min(...all) : undefined;
  }

  /** Opens the trial's lease on the coordinator and the trial's forwarding socket here. */
  async lease(req: LeaseRequest): Promise<TrialGatewayLease> {
    const grant = await this.api.open({ ...(req.capUsd !== undefined ? { capUsd: req.capUsd } : {}), ...(req.judgeCapUsd !== undefined ? { judgeCapUsd: req.judgeCapUsd } : {}) });
    const dir = join(socketRoot(), req.trialId);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    const lease = new RemoteLease(this.api, grant, dir);
    try {
      lease.listener = await serveFetch((r) => lease.forward(r), { path: join(dir, "gateway.sock") });
    } catch (e) {
      await this.api.end().catch(() => {});
      throw e;
    }
    return lease;
  }
}

// hop-by-hop and length headers: fetch re-frames the body (and decodes it), so these would lie on the other side
const DROP = ["host", "connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"];

/** A remote trial's lease: its socket forwards to the coordinator's gateway; its state is the coordinator's. */
class RemoteLease implements TrialGatewayLease {
  listener?: HttpListener;
  private state: RemoteGatewayState = {};
  private readonly refusalListeners: ((r: BudgetRefusal) => void)[] = [];
  private readonly unavailableListeners: ((why: string) => void)[] = [];
  /** Keys whose phase ended: refused here at once, whatever the coordinator still knows of them. */
  private readonly revoked = new Set<string>();
  private asking?: Promise<void>;
  private ended?: Promise<LeaseTotals>;

  constructor(
    private readonly api: RemoteGatewayApi,
    private readonly grant: RemoteGatewayGrant,
    readonly socketDir: string,
  ) {}

  /** Forwards one request from the trial's relay to the coordinator's gateway, streaming both ways. */
  async forward(req: Request): Promise<Response> {
    const u = new URL(req.url);
    const headers = new Headers(req.headers);
    for (const h of DROP) headers.delete(h);
    const auth = [headers.get("authorization"), headers.get("x-api-key"), headers.get("x-goog-api-key"), u.searchParams.get("key")].join(" ");
    if ([...this.revoked].some((k) => auth.includes(k))) {
      return Response.json({ error: { type: "authentication_error", message: "this trial's phase has ended: its gateway key was revoked" } }, { status: 401 });
    }
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    let res: Response;
    try {
      res = await fetch(this.grant.url.replace(/\/+$/, "") + u.pathname + u.search, {
        method: req.method,
        headers,
        ...(hasBody ? { body: req.body, duplex: "half" } : {}),
        signal: req.signal,
      } as RequestInit);
    } catch (e) {
      return Response.json({ error: { type: "api_error", message: `the coordinator's gateway did not answer: ${(e as Error).message}` } }, { status: 502 });
    }
    const scope = res.headers.get(REFUSED_HEADER);
    if (scope && scope !== "trial") this.refused({ scope: scope as Exclude<BudgetScope, "trial">, message: `${scope}: budget exceeded` });
    // a failed call may be the one that shows a budget, the cap or a dead model: the coordinator's meter says which
    if (!res.ok) void this.ask();
    const out = new Headers(res.headers);
    for (const h of DROP) out.delete(h);
    return new Response(res.body, { status: res.status, statusText: res.statusText, headers: out });
  }

  /** Asks the coordinator for the lease's state (one question at a time), revoking `lane` first when given. */
  private ask(revoke?: "agent" | "judge"): Promise<void> {
    const run = async () => {
      try {
        this.apply(await this.api.state(revoke));
      } catch {
        // the lease was lost or the coordinator is away: the worker's heartbeat deals with that
      }
    };
    const next = (this.asking ?? Promise.resolve()).then(run);
    this.asking = next;
    return next;
  }

  private apply(s: RemoteGatewayState): void {
    if (s.refusal) this.refused(s.refusal);
    if (s.capReached) this.state.capReached ??= s.capReached;
    this.state.unavailable = s.unavailable;
    if (s.stop && !this.state.stop) {
      this.state.stop = s.stop;
      for (const fn of this.unavailableListeners.splice(0)) fn(s.stop);
    }
  }

  private refused(r: BudgetRefusal): void {
    if (this.state.refusal) return;
    this.state.refusal = r;
    for (const fn of this.refusalListeners.splice(0)) fn(r);
  }

  agentEnv(baseUrl: string): Record<string, string> {
    return agentEnv(this.grant.keys.agent, baseUrl);
  }

  judgeEnv(families: Iterable<JudgeFamily>, baseUrl: string): Record<string, string> {
    const out: Record<string, string> = {};
    for (const f of new Set(families)) Object.assign(out, judgeEnv(f, this.grant.keys.judge[f], baseUrl));
    return out;
  }

  secretValues(): string[] {
    return [this.grant.keys.agent, ...Object.values(this.grant.keys.judge)];
  }

  endAgent(): void {
    this.revoked.add(this.grant.keys.agent);
    void this.ask("agent");
  }

  endJudge(): void {
    for (const k of Object.values(this.grant.keys.judge)) this.revoked.add(k);
    void this.ask("judge");
  }

  budgetRefusal(): BudgetRefusal | undefined {
    return this.state.refusal;
  }

  capReached(): string | undefined {
    return this.state.capReached;
  }

  modelUnavailable(): string | undefined {
    return this.state.unavailable;
  }

  onModelUnavailable(fn: (why: string) => void): void {
    if (this.state.stop) fn(this.state.stop);
    else this.unavailableListeners.push(fn);
  }

  onBudgetRefusal(fn: (r: BudgetRefusal) => void): void {
    if (this.state.refusal) fn(this.state.refusal);
    else this.refusalListeners.push(fn);
  }

  /** Closes the socket and ends the coordinator's lease: its totals are the trial's (zero if it cannot answer). */
  end(): Promise<LeaseTotals> {
    this.ended ??= (async () => {
      await this.listener?.close().catch(() => {});
      rmSync(this.socketDir, { recursive: true, force: true });
      await this.asking;
      try {
        return await this.api.end();
      } catch {
        return { agent: zeroLane(), judge: zeroLane(), events: [] };
      }
    })();
    return this.ended;
  }

  forget(): void {}
}

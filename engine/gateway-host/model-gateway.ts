/**
 * The process gateway (its own room: trials know it only through the lease it hands them, and `gateway serve`
 * runs it alone). The LLM gateway as trials use it: one in-process gateway per evolve process (`evolve run`, `job resume`, …),
 * and per trial a lease: the trial's own unix socket, its agent credential (revoked the moment the agent phase
 * ends), judge credentials for an LLM-graded verifier, its spend cap, and the metering that ends in the store.
 *
 * Why a socket per trial: the box reaches the gateway through a relay that holds only this socket (network.ts), so
 * the trial needs no route to the host, and closing the socket when the trial ends cuts anything left talking.
 *
 * Money: every call reserves its worst case against the trial's cap, the user's credits, the team's month and the
 * global cap before it goes upstream (gateway/budget.ts). Settled spend against the user and the team is added to
 * the store's ledger as each call settles, so credits carry over between runs and processes. Refusals by a budget
 * above the trial (`user:`, `team:`, `other:`) are reported to the lease, which the runner turns into `BUDGET`.
 *
 * Secrets: provider keys stay in `Upstreams` in this process; what reaches a box is a gateway key, shown once,
 * stored nowhere but as its hash in memory.
 */
import { randomUUID } from "node:crypto";
import { mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Store } from "../store/index.ts";
import { loadConfig, type BudgetConfig } from "../config.ts";
import { serveFetch } from "../runtime.ts";
import { Budgets, monthOf } from "../../gateway/budget.ts";
import { agentEnv, Credentials, JUDGE_FAMILIES, judgeEnv, type JudgeFamily } from "../../gateway/credentials.ts";
import { agentModelCall, CallMeter, modelUnavailable, unavailableCall, usageEvents, type GatewayUsageEvent, type LaneTotals } from "../../gateway/meter.ts";
import { Prices } from "../../gateway/prices.ts";
import { serveGateway, type GatewayListenAt, type GatewayListener, type ServeFetch } from "../../gateway/serve.ts";
import type { BudgetScope, CallRecord } from "../../gateway/types.ts";
import { loadUpstreams, type Upstreams } from "../../gateway/upstreams.ts";
import { EvolveError } from "../errors.ts";

/** How often a running trial's `spend.live_usd` is written back (platform-trials.md: about every 30 s). */
/** gateway.toml or the price overrides cannot be read: the run cannot meter, so no model call may start. */
export class GatewayConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GatewayConfigError";
  }
}

/** How often a trial's live spend is written to its record while calls are made. */
export const LIVE_SPEND_REFRESH_MS = 30_000;

/** The global stop's key among the store's settings (`evolve gateway stop` sets it). */
export const STOP_SETTING = "gateway_stop";

/**
 * The store setting where each gateway publishes what it holds in flight against its user and team, so the others
 * count it: `{ [gatewayId]: InFlightEntry }`.
 */
export const INFLIGHT_SETTING = "gateway_inflight";
/** A published entry older than this is a gateway that died without removing it: ignored and pruned. */
const INFLIGHT_STALE_MS = 5_000;
/** An unchanged entry is published again this often, so the others can tell it is alive. */
const INFLIGHT_HEARTBEAT_MS = 2_000;

/** One gateway's published reservations (USD) against its user and its team's month. */
interface InFlightEntry {
  user: string | null;
  team: string | null;
  month: string;
  user_usd: number;
  team_usd: number;
  /** Epoch ms of publication. */
  at: number;
}

/** The trial id that `evolve gateway serve`'s calls are metered under. */
export const LOCAL_TRIAL = "local";

/** Options of the process's gateway. */
export interface ModelGatewayOptions {
  home: string;
  store: Store;
  /** Upstreams; read from `<home>/gateway.toml` and the environment when absent. */
  upstreams?: Upstreams;
  /** `[budget]` of config.toml; read from the home when absent. */
  budget?: BudgetConfig;
  serve?: ServeFetch;
  /** Live spend refresh period (ms); tests shorten it. */
  refreshMs?: number;
  /** How often the store is polled for the global stop and other processes' spend (ms, default 1000); tests shorten it. */
  pollMs?: number;
  /** Called after each poll of the store has been applied, so a test waits for polls rather than for the clock. */
  onPoll?: () => void;
  /** Warnings (an unknown model's price) for the process's log. */
  warn?: (message: string) => void;
}

/** What a trial asks of the gateway when it takes its lease. */
export interface LeaseRequest {
  trialId: string;
  jobId: string;
  /** The agent lane's cap for this trial, USD (task's or job's, the smaller). */
  capUsd?: number;
  /** The judge lane's cap, USD. */
  judgeCapUsd?: number;
  /** Called with the current totals at the first call, then at most once per refresh period (`end()` gives the final ones). */
  onSpend?: (totals: { agent: LaneTotals; judge: LaneTotals }) => void;
  /**
   * A trial run by a remote worker (engine/executor): no socket here, its boxes come in through the gateway's TCP
   * listener (`serveRemote`) with the keys `remoteKeys` mints; budgets, metering and the ledger are as for a local one.
   */
  remote?: boolean;
}

/**
 * What a trial's runner needs of its gateway lease (engine/trial/run.ts and its phases): a local GatewayLease, or
 * a remote worker's stand-in that forwards to its coordinator's gateway (engine/executor/remote-gateway.ts).
 */
export interface TrialGatewayLease {
  /** Host folder holding `gateway.sock`, mounted into the trial's relay. */
  readonly socketDir: string;
  agentEnv(baseUrl: string, ttlMs: number): Record<string, string>;
  secretValues(): string[];
  endAgent(): void;
  judgeEnv(families: Iterable<JudgeFamily>, baseUrl: string, ttlMs: number): Record<string, string>;
  endJudge(): void;
  budgetRefusal(): BudgetRefusal | undefined;
  capReached(): string | undefined;
  modelUnavailable(): string | undefined;
  onModelUnavailable(fn: (why: string) => void): void;
  onBudgetRefusal(fn: (r: BudgetRefusal) => void): void;
  end(): Promise<LeaseTotals>;
  forget(): void;
}

/** What a trial's runner needs of the gateway: its per-trial cap and a lease. */
export interface TrialGateway {
  trialCap(...caps: (number | undefined)[]): number | undefined;
  lease(req: LeaseRequest): Promise<TrialGatewayLease>;
}

/** The keys a remote trial's boxes use (minted once per trial lease, revoked with it): the agent's and one per judge family. */
export interface RemoteKeys {
  agent: string;
  judge: Record<JudgeFamily, string>;
}

/** A budget above the trial refused a call: the trial settles `BUDGET`. */
export interface BudgetRefusal {
  scope: Exclude<BudgetScope, "trial">;
  message: string;
}

/** A trial's gateway totals once its lease has ended. */
export interface LeaseTotals {
  agent: LaneTotals;
  judge: LaneTotals;
  /** The gateway's trace events, one per model call with usage, to follow the harness's in the trace. */
  events: GatewayUsageEvent[];
}

/**
 * When a trial's agent is stopped for a model it cannot reach: this many calls, the first this long ago, every one
 * failed for the gateway's or the provider's reason and none answered. The CLIs' own retries against a dead upstream
 * run half a minute (codex) to minutes (claude-code) and cannot end otherwise; a blip shorter than this passes, and a
 * trial stopped by it settles ModelUnavailableError, which the job's retries run again: never a score.
 */
export const UNAVAILABLE_CUTOFF = { calls: 4, ms: 10_000 };

/** One trial's access to the gateway. */
export class GatewayLease implements TrialGatewayLease {
  private refusal: BudgetRefusal | undefined;
  /** The agent's calls so far, while none was answered: how many failed and when the first did. */
  private agentFailing: { calls: number; since: number } | "answered" = { calls: 0, since: 0 };
  private unavailable: string | undefined;
  private readonly unavailableListeners: ((why: string) => void)[] = [];
  private capMessage: string | undefined;
  private lastRefresh = 0;
  private readonly refusalListeners: ((r: BudgetRefusal) => void)[] = [];
  private ended = false;
  /** Every credential issued to this trial's boxes, for redaction of the trial tree. */
  private readonly issued: string[] = [];

  /** @internal taken with ModelGateway.lease */
  constructor(
    private readonly gw: ModelGateway,
    readonly req: LeaseRequest,
    /** Host folder holding `gateway.sock`, mounted into the trial's relay ("" for a remote trial: no socket here). */
    readonly socketDir: string,
    private readonly listener: GatewayListener | undefined,
  ) {}

  /**
   * A remote trial's keys (engine/executor): the agent's and one per judge family, minted at once because the
   * worker, not this process, decides when its phases start. `ttlMs` bounds them; the lease's end revokes them.
   */
  remoteKeys(ttlMs: number): RemoteKeys {
    const agent = this.gw.credentials.issueAgent({ trialId: this.req.trialId, jobId: this.req.jobId, ttlMs }).key;
    const judge = {} as Record<JudgeFamily, string>;
    for (const family of JUDGE_FAMILIES) judge[family] = this.gw.credentials.issueJudge({ trialId: this.req.trialId, jobId: this.req.jobId, family, ttlMs }).key;
    this.issued.push(agent, ...Object.values(judge));
    return { agent, judge };
  }

  /** Issues the agent's credential (scoped to this trial, expiring with it) and returns the variables for its box. */
  agentEnv(baseUrl: string, ttlMs: number): Record<string, string> {
    const { key } = this.gw.credentials.issueAgent({ trialId: this.req.trialId, jobId: this.req.jobId, ttlMs });
    this.issued.push(key);
    return agentEnv(key, baseUrl);
  }

  /** The values no trial file may keep: every credential this lease issued and the provider keys behind them. */
  secretValues(): string[] {
    return [...this.issued, ...this.gw.providerKeys()];
  }

  /** Revokes the agent's credentials: nothing the agent left running can spend after its phase. */
  endAgent(): void {
    this.gw.credentials.revokeTrial(this.req.trialId, "agent");
  }

  /**
   * The verifier's judge variables for the families its `[verifier.env]` asks for: one credential per family,
   * admitting only that family's models, with its base-URL companions, so litellm-style clients work unchanged.
   */
  judgeEnv(families: Iterable<JudgeFamily>, baseUrl: string, ttlMs: number): Record<string, string> {
    const out: Record<string, string> = {};
    for (const family of new Set(families)) {
      const { key } = this.gw.credentials.issueJudge({ trialId: this.req.trialId, jobId: this.req.jobId, family, ttlMs });
      this.issued.push(key);
      Object.assign(out, judgeEnv(family, key, baseUrl));
    }
    return out;
  }

  /** Revokes the judge credentials once the verifier is done. */
  endJudge(): void {
    this.gw.credentials.revokeTrial(this.req.trialId, "judge");
  }

  /** The first refusal by a budget above the trial, if any. */
  budgetRefusal(): BudgetRefusal | undefined {
    return this.refusal;
  }

  /** The refusal message when the agent hit the trial's own cap (it ran out, like a timeout), if it did. */
  capReached(): string | undefined {
    return this.capMessage;
  }

  /**
   * Why the trial's agent never met its model (gateway/meter.ts modelUnavailable: every one of its calls so far
   * failed for the gateway's or the provider's reason), or undefined when it got an answer or made no call.
   */
  modelUnavailable(): string | undefined {
    return modelUnavailable(this.gw.meter.records(this.req.trialId));
  }

  /** Why the agent's model was found unavailable past UNAVAILABLE_CUTOFF (what `onModelUnavailable` was told), if it was. */
  unavailablePastCutoff(): string | undefined {
    return this.unavailable;
  }

  /**
   * Calls `fn` once the agent's calls show its model unavailable past UNAVAILABLE_CUTOFF (at once if they already
   * did), so the runner can stop an agent retrying against a dead upstream.
   */
  onModelUnavailable(fn: (why: string) => void): void {
    if (this.unavailable) fn(this.unavailable);
    else this.unavailableListeners.push(fn);
  }

  /** Calls `fn` at the first refusal by a budget above the trial (at once if one already happened). */
  onBudgetRefusal(fn: (r: BudgetRefusal) => void): void {
    if (this.refusal) fn(this.refusal);
    else this.refusalListeners.push(fn);
  }

  /** Current totals per lane (lower bounds while calls are in flight). */
  totals(): { agent: LaneTotals; judge: LaneTotals } {
    return this.gw.meter.trial(this.req.trialId);
  }

  /** @internal every metered call of this trial. */
  observe(call: CallRecord): void {
    if (call.refused === "trial") {
      if (call.lane === "agent") this.capMessage ??= call.error;
    } else if (call.refused && !this.refusal) {
      this.refusal = { scope: call.refused, message: call.error ?? `${call.refused}: budget exceeded` };
      for (const fn of this.refusalListeners.splice(0)) fn(this.refusal);
    }
    const now = Date.now();
    if (agentModelCall(call) && this.agentFailing !== "answered") {
      if (!unavailableCall(call)) this.agentFailing = "answered";
      else {
        if (this.agentFailing.calls++ === 0) this.agentFailing.since = now;
        if (!this.unavailable && this.agentFailing.calls >= UNAVAILABLE_CUTOFF.calls && now - this.agentFailing.since >= UNAVAILABLE_CUTOFF.ms) {
          this.unavailable = this.modelUnavailable();
          if (this.unavailable) for (const fn of this.unavailableListeners.splice(0)) fn(this.unavailable);
        }
      }
    }
    if (this.req.onSpend && (this.lastRefresh === 0 || now - this.lastRefresh >= this.gw.refreshMs)) {
      this.lastRefresh = now;
      this.req.onSpend(this.totals());
    }
  }

  /**
   * Ends the lease: revokes every credential of the trial, closes its socket (cutting anything still connected)
   * and returns its totals and trace events. Idempotent.
   */
  async end(): Promise<LeaseTotals> {
    if (!this.ended) {
      this.ended = true;
      this.gw.credentials.revokeTrial(this.req.trialId);
      await this.listener?.close().catch(() => {});
      if (this.socketDir) rmSync(this.socketDir, { recursive: true, force: true });
      this.gw.release(this.req.trialId);
      this.gw.flushLedger();
    }
    const totals = this.totals();
    return { ...totals, events: usageEvents(this.gw.meter.records(this.req.trialId)) };
  }

  /** Drops the trial's records from memory once the runner has stored them. */
  forget(): void {
    this.gw.meter.forget(this.req.trialId);
  }
}

/** Where per-trial sockets live: short (a unix socket path holds ~107 bytes) and private to this user. */
function socketRoot(): string {
  const uid = process.getuid?.() ?? 0;
  return process.env.XDG_RUNTIME_DIR ? join(process.env.XDG_RUNTIME_DIR, "evolve", "gw") : join(tmpdir(), `evolve-${uid}`, "gw");
}

/** The gateway of this process: upstreams, prices, credentials, budgets and the meter, shared by its trials. */
export class ModelGateway implements TrialGateway {
  /** @internal */ readonly credentials = new Credentials();
  /** @internal */ readonly meter: CallMeter;
  /** @internal */ readonly refreshMs: number;
  private readonly budgets = new Budgets();
  private readonly leases = new Map<string, GatewayLease>();
  private upstreams?: Upstreams;
  private prices?: Prices;
  private readonly budgetCfg: BudgetConfig;
  private stopPoll?: ReturnType<typeof setInterval>;
  private readonly owed = new Map<string, number>();
  /** What this process has booked in the ledger, per ledger key: the rest of the ledger was spent elsewhere. */
  private readonly booked = new Map<string, number>();
  /** This gateway's key in the published in-flight entries. */
  private readonly gatewayId = randomUUID();
  private published = { sig: "", at: 0 };
  private lastShareError?: string;
  private flushTimer?: ReturnType<typeof setTimeout>;
  private local?: { listener: GatewayListener; onCall?: (call: CallRecord) => void };
  private remote?: Promise<GatewayListener>;

  constructor(private readonly opts: ModelGatewayOptions) {
    this.refreshMs = opts.refreshMs ?? LIVE_SPEND_REFRESH_MS;
    this.budgetCfg = opts.budget ?? loadConfig(opts.home).budget;
    this.meter = new CallMeter({ sink: (c) => this.onCall(c), onSinkError: (e) => opts.warn?.(`gateway: could not record a call: ${(e as Error).message}`) });
  }

  /** The per-trial cap from config, a task's `[agent] max_spend_usd` and the job's, whichever is smallest. */
  trialCap(...caps: (number | undefined)[]): number | undefined {
    const all = [this.budgetCfg.trial_cap_usd, ...caps].filter((c): c is number => c !== undefined);
    return all.length > 0 ? Math.min(...all) : undefined;
  }

  /** The real provider keys this gateway sends upstream (redacted from every trial tree). */
  providerKeys(): string[] {
    return [...(this.upstreams?.byName.values() ?? [])].map((u) => u.apiKey).filter((k): k is string => !!k);
  }

  /** Reads the configuration once, at the first trial that needs a model, so model-free jobs never depend on it. */
  private init(): void {
    if (this.upstreams) return;
    const { home, store } = this.opts;
    try {
      this.upstreams = this.opts.upstreams ?? loadUpstreams({ home });
    } catch (e) {
      throw new GatewayConfigError(`cannot read the gateway's upstreams (${join(home, "gateway.toml")}): ${(e as Error).message}`);
    }
    try {
      this.prices = Prices.fromHome(home, (m) => this.opts.warn?.(m));
    } catch (e) {
      throw new GatewayConfigError(`cannot read the price overrides: ${(e as Error).message}`);
    }
    const b = this.budgetCfg;
    if (b.user_credits_usd !== undefined) this.budgets.setUserCredits(b.user, b.user_credits_usd, store.getSpend("user", b.user, ""));
    if (b.team !== undefined && b.team_monthly_usd !== undefined) {
      this.budgets.setTeamBudget(b.team, b.team_monthly_usd, store.getSpend("team", b.team, monthOf(Date.now())));
    }
    this.budgets.setGlobalCap(b.global_cap_usd);
    // `evolve gateway stop` in any process sets the store's stop; polled so a running job obeys it within a second
    const poll = () => {
      let reason: unknown;
      try {
        reason = store.getSetting(STOP_SETTING);
      } catch (e) {
        // the store was closed under a gateway nobody closed (a lone trial's): nothing left to obey, stop asking
        if (this.stopPoll) clearInterval(this.stopPoll);
        this.opts.warn?.(`gateway: stopped polling the global stop: ${(e as Error).message}`);
        return;
      }
      if (typeof reason === "string") this.budgets.stop(reason);
      else this.budgets.resume();
      try {
        this.refreshElsewhere();
        this.shareInFlight();
      } catch (e) {
        // the store failing here must not end the process from a timer; the limits keep what they last knew
        const m = `gateway: cannot share spend with other processes: ${(e as Error).message}`;
        if (m !== this.lastShareError) this.opts.warn?.(m);
        this.lastShareError = m;
      }
      this.opts.onPoll?.();
    };
    poll();
    this.stopPoll = setInterval(poll, this.opts.pollMs ?? 1000);
    this.stopPoll.unref?.();
  }

  /**
   * Reads the ledger's user and team spend and tells the budgets what of it other processes made (the ledger less
   * what this one booked), so that two runs billing one user or team stop at the limit together, not each at it.
   * Only where a limit applies; polled with the global stop, so another process's settled spend counts here
   * within about a second (its calls still in flight come in through `shareInFlight`).
   */
  private refreshElsewhere(): void {
    const { store } = this.opts;
    const { user, team } = this.sharedScopes();
    if (user !== undefined) {
      const total = store.getSpend("user", user, "");
      this.budgets.setSpentElsewhere("user", user, total - (this.booked.get(ledgerKey("user", user, "")) ?? 0));
    }
    if (team !== undefined) {
      const month = monthOf(Date.now());
      const total = store.getSpend("team", team, month);
      this.budgets.setSpentElsewhere("team", team, total - (this.booked.get(ledgerKey("team", team, month)) ?? 0), month);
    }
  }

  /** The user and team whose limits other processes must see this one's reservations against (none: no limit). */
  private sharedScopes(): { user?: string; team?: string } {
    const b = this.budgetCfg;
    return {
      ...(b.user_credits_usd !== undefined ? { user: b.user } : {}),
      ...(b.team !== undefined && b.team_monthly_usd !== undefined ? { team: b.team } : {}),
    };
  }

  /**
   * Publishes what this gateway holds in flight against its user and team (when it changed, else every 2 s as a
   * heartbeat), and counts what the other live gateways published against the same ones. Each process's
   * reservations are atomic within it; across processes a reservation is seen once it is published and read (two
   * polls, about 2 s), so two runs near one limit can overshoot it by at most what they reserved in that window,
   * not by all they hold.
   */
  private shareInFlight(): void {
    const { user, team } = this.sharedScopes();
    if (user === undefined && team === undefined) return;
    const { store } = this.opts;
    const now = Date.now();
    const month = monthOf(now);
    const mine: InFlightEntry = {
      user: user ?? null,
      team: team ?? null,
      month,
      user_usd: user !== undefined ? this.budgets.ownReservedUsd("user", user) : 0,
      team_usd: team !== undefined ? this.budgets.ownReservedUsd("team", team, month) : 0,
      at: now,
    };
    const sig = `${mine.user_usd}|${mine.team_usd}|${month}`;
    let all: Record<string, InFlightEntry>;
    if (sig !== this.published.sig || now - this.published.at >= INFLIGHT_HEARTBEAT_MS) {
      all = store.transaction(() => {
        const next: Record<string, InFlightEntry> = {};
        for (const [id, e] of Object.entries(readInFlight(store.getSetting(INFLIGHT_SETTING)))) if (now - e.at < INFLIGHT_STALE_MS) next[id] = e;
        next[this.gatewayId] = mine;
        store.putSetting(INFLIGHT_SETTING, next);
        return next;
      });
      this.published = { sig, at: now };
    } else {
      all = readInFlight(store.getSetting(INFLIGHT_SETTING));
    }
    const others = sumInFlight(all, { user, team, month }, now, this.gatewayId);
    if (user !== undefined) this.budgets.setReservedElsewhere("user", user, others.user_usd);
    if (team !== undefined) this.budgets.setReservedElsewhere("team", team, others.team_usd, month);
  }

  /** Takes this gateway's entry out of the published in-flight ones (at close). */
  private withdrawInFlight(): void {
    if (this.published.at === 0) return;
    const { store } = this.opts;
    try {
      store.transaction(() => {
        const all = readInFlight(store.getSetting(INFLIGHT_SETTING));
        delete all[this.gatewayId];
        store.putSetting(INFLIGHT_SETTING, Object.keys(all).length ? all : undefined);
      });
    } catch (e) {
      // a closed store: the entry goes stale and the others drop it within seconds
      this.opts.warn?.(`gateway: could not withdraw its in-flight entry: ${(e as Error).message}`);
    }
    this.published = { sig: "", at: 0 };
  }

  /**
   * What the gateway app gets from this process: the shared upstreams, credentials, meter, budgets and prices, for a
   * listener bound to one trial (its socket answers that trial's keys only).
   */
  private deps(trialId: string | undefined) {
    return {
      ...(trialId !== undefined ? { trialId } : {}),
      upstreams: this.upstreams!,
      authenticate: this.credentials.authenticate,
      meter: this.meter.meter,
      budget: this.budgets,
      prices: (m: string, upstreamModel: string) => this.prices!.priceOf(m, upstreamModel) ?? undefined,
      ...(this.upstreams!.maxBodyBytes !== undefined ? { maxBodyBytes: this.upstreams!.maxBodyBytes } : {}),
    };
  }

  /**
   * Serves the gateway on its own (`evolve gateway serve`) at `at`, with one credential for trial `local`: the same
   * budgets as a run's gateway (the user's credits, the team's month, the global cap; no trial cap), spend booked in
   * the store's ledger, and the global stop obeyed within a second. `onCall` gets every call once metered; the
   * records are not kept in memory, since a standalone gateway may serve for weeks. One per gateway.
   */
  async serveLocal(at: GatewayListenAt, onCall?: (call: CallRecord) => void): Promise<{ url: string; key: string }> {
    if (this.local) throw new Error("this gateway already serves locally");
    try {
      this.init();
    } catch (e) {
      if (e instanceof GatewayConfigError) throw new EvolveError("gateway_config_invalid", e.message, "fix the file named, or move it aside");
      throw e;
    }
    const b = this.budgetCfg;
    this.budgets.setTrial(LOCAL_TRIAL, { user: b.user, team: b.team });
    const { key } = this.credentials.issueAgent({ trialId: LOCAL_TRIAL });
    const listener = await serveGateway(this.deps(LOCAL_TRIAL), at, this.opts.serve ?? serveFetch);
    this.local = { listener, onCall };
    return { url: listener.url, key };
  }

  /**
   * Serves the gateway over TCP at `at` for remote workers' trials (engine/executor), once per gateway: bound to no
   * trial, so a key is the only way in and each call is metered, capped and booked under the key's own trial, as
   * on that trial's socket. Resolves with the listener (its `url` is what workers forward to).
   */
  serveRemote(at: { host: string; port?: number }): Promise<GatewayListener> {
    this.init();
    this.remote ??= serveGateway(this.deps(undefined), { host: at.host, port: at.port ?? 0 }, this.opts.serve ?? serveFetch);
    return this.remote;
  }

  /** Opens a trial's lease: its socket listener and its budget. */
  async lease(req: LeaseRequest): Promise<GatewayLease> {
    this.init();
    const b = this.budgetCfg;
    this.budgets.setTrial(req.trialId, {
      capUsd: req.capUsd,
      judgeCapUsd: req.judgeCapUsd ?? b.judge_trial_cap_usd,
      user: b.user,
      team: b.team,
    });
    if (req.remote) {
      const lease = new GatewayLease(this, req, "", undefined);
      this.leases.set(req.trialId, lease);
      return lease;
    }
    const dir = join(socketRoot(), req.trialId);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    const listener = await serveGateway(this.deps(req.trialId), { path: join(dir, "gateway.sock") }, this.opts.serve ?? serveFetch);
    const lease = new GatewayLease(this, req, dir, listener);
    this.leases.set(req.trialId, lease);
    return lease;
  }

  /** @internal a lease ended */
  release(trialId: string): void {
    this.leases.delete(trialId);
  }

  private onCall(call: CallRecord): void {
    this.leases.get(call.trialId)?.observe(call);
    if (call.cost_usd !== null && call.cost_usd > 0) {
      const b = this.budgetCfg;
      this.owe(ledgerKey("user", b.user, ""), call.cost_usd);
      if (b.team !== undefined) this.owe(ledgerKey("team", b.team, monthOf(Date.parse(call.started_at) || Date.now())), call.cost_usd);
      if (call.jobId !== undefined) this.owe(ledgerKey("job", call.jobId, call.lane), call.cost_usd);
    }
    if (call.trialId === LOCAL_TRIAL && this.local) {
      this.meter.forget(LOCAL_TRIAL);
      this.local.onCall?.(call);
    }
  }

  /**
   * Ledger writes are batched off the call's path: a store commit syncs to disk, which would otherwise add its
   * latency to every model call. The in-memory budgets already hold the spend, so nothing is admitted meanwhile.
   */
  private owe(key: string, usd: number): void {
    this.owed.set(key, (this.owed.get(key) ?? 0) + usd);
    if (!this.flushTimer) this.flushTimer = setTimeout(() => this.flushLedger(), 50);
  }

  /** Writes what the ledger is owed (also at every lease end and at close, so a settled trial is fully booked). */
  flushLedger(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    if (this.owed.size === 0) return;
    const owed = [...this.owed];
    this.owed.clear();
    try {
      this.opts.store.transaction(() => {
        for (const [key, usd] of owed) {
          const [scope, name, period] = key.split("\0") as [LedgerScope, string, string];
          this.opts.store.addSpend(scope, name, period, usd);
        }
      });
      for (const [key, usd] of owed) this.booked.set(key, (this.booked.get(key) ?? 0) + usd);
    } catch (e) {
      this.opts.warn?.(`gateway: could not book spend in the ledger: ${(e as Error).message}`);
    }
  }

  /** Ends every open lease and the local listener, books the ledger, withdraws its in-flight entry and stops polling. */
  async close(): Promise<void> {
    if (this.stopPoll) clearInterval(this.stopPoll);
    await Promise.all([...this.leases.values()].map((l) => l.end()));
    await this.local?.listener.close().catch(() => {});
    this.local = undefined;
    const remote = this.remote;
    this.remote = undefined;
    await remote?.then((l) => l.close()).catch(() => {});
    this.flushLedger();
    this.withdrawInFlight();
  }
}

/**
 * What the running gateways have published as in flight against a user and a team's month (USD), and how many are
 * live: what `evolve gateway status` shows beside the ledger.
 */
export function publishedInFlight(store: Store, who: { user: string; team?: string; month: string }, now = Date.now()): { user_usd: number; team_usd: number; gateways: number } {
  return sumInFlight(readInFlight(store.getSetting(INFLIGHT_SETTING)), who, now);
}

/** Sums the live entries (all but `except`'s) against a user and a team's month, and counts those gateways. */
function sumInFlight(
  entries: Record<string, InFlightEntry>,
  who: { user?: string; team?: string; month: string },
  now: number,
  except?: string,
): { user_usd: number; team_usd: number; gateways: number } {
  let user_usd = 0;
  let team_usd = 0;
  let gateways = 0;
  for (const [id, e] of Object.entries(entries)) {
    if (id === except || now - e.at >= INFLIGHT_STALE_MS) continue;
    gateways++;
    if (who.user !== undefined && e.user === who.user) user_usd += e.user_usd;
    if (who.team !== undefined && e.team === who.team && e.month === who.month) team_usd += e.team_usd;
  }
  return { user_usd, team_usd, gateways };
}

/** The published in-flight entries as stored; anything malformed is left out rather than trusted. */
function readInFlight(v: unknown): Record<string, InFlightEntry> {
  const out: Record<string, InFlightEntry> = {};
  if (!v || typeof v !== "object") return out;
  for (const [id, e] of Object.entries(v as Record<string, Partial<InFlightEntry>>)) {
    if (e && typeof e.at === "number" && typeof e.user_usd === "number" && typeof e.team_usd === "number" && typeof e.month === "string") {
      out[id] = { user: typeof e.user === "string" ? e.user : null, team: typeof e.team === "string" ? e.team : null, month: e.month, user_usd: e.user_usd, team_usd: e.team_usd, at: e.at };
    }
  }
  return out;
}

/**
 * The ledger's scopes: a user's credits, a team's month, and a job's spend per lane, which every call of the job
 * books as it settles, whichever attempt of a trial made it and whether or not the trial's record kept it.
 */
type LedgerScope = "user" | "team" | "job";

/** A ledger entry's key in `owed` and `booked`: scope, name and period (a team's UTC month, a job's lane; "" for a user). */
function ledgerKey(scope: LedgerScope, name: string, period: string): string {
  return `${scope}\0${name}\0${period}`;
}

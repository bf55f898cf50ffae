/**
 * Budgets: a per-trial spend cap, per-user credits, a per-team monthly budget and a global stop.
 *
 * A request reserves its worst-case cost before it goes upstream and settles to the measured cost afterwards.
 * `reserve` is synchronous — check and add happen in one turn of the event loop — so concurrent requests in one
 * process cannot overshoot: for every capped scope, settled spend plus open reservations never exceed the cap
 * (LiteLLM's budget races, issues #34732/#40095, came from checking spend that was recorded only after the call).
 * Other processes billing the same user or team come in as spend and reservations made elsewhere, which the engine
 * refreshes from the store (`setSpentElsewhere`, `setReservedElsewhere`).
 *
 * Unknown worst case (a model with no price, or no output bound): refused wherever a cap applies to the
 * request, because a cap that admits unpriceable calls is not a cap; admitted with nothing reserved where no cap
 * applies, and counted in `unpricedCalls` so the spend reads as a lower bound, never as zero.
 */
import { randomUUID } from "node:crypto";
import type { Budget, BudgetScope, Credential, Lane, Reservation } from "./types.ts";

export { worstCaseUsd } from "./prices.ts";

/** Who a trial bills to and what it may spend. */
export interface TrialBudget {
  /** The agent lane's spend cap for this trial (the task's or the job's), USD. */
  capUsd?: number;
  /** The judge lane's own cap, USD; absent = judge spend is not capped per trial. */
  judgeCapUsd?: number;
  user?: string;
  team?: string;
}

/** Spend in one scope. `spentUsd` is settled; `reservedUsd` is held by requests in flight. */
export interface ScopeSpend {
  spentUsd: number;
  reservedUsd: number;
  limitUsd?: number;
  /** Calls that could not be priced (admitted only where no cap applied): spend is a lower bound. */
  unpricedCalls: number;
}

type ScopeName = BudgetScope;

interface Scope extends ScopeSpend {
  kind: ScopeName;
  label: string;
  /**
   * Settled spend this process did not make (other processes', through the store's ledger): counted against the
   * limit, never settled here. `spentUsd` is this process's own.
   */
  elsewhereUsd: number;
  /** What other processes hold in flight against this scope (as they last published it). */
  reservedElsewhereUsd: number;
  /** Open reservations; at 0 `reservedUsd` is reset exactly, so float residue cannot build up and block. */
  open: number;
}

interface Held {
  reservedUsd: number;
  scopes: Scope[];
  priced: boolean;
}

const money = (v: number) => `$${v.toFixed(6).replace(/0+$/, "").replace(/\.$/, ".00")}`;

/** The UTC month a team's budget is counted in. */
export function monthOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 7);
}

/** In-memory budgets implementing the gateway's `Budget` contract. */
export class Budgets implements Budget {
  private readonly scopes = new Map<string, Scope>();
  private readonly trials = new Map<string, TrialBudget>();
  private readonly userCredits = new Map<string, number>();
  private readonly teamMonthly = new Map<string, number>();
  private readonly held = new Map<string, Held>();
  private stopReason: string | undefined;
  private globalCapUsd: number | undefined;

  constructor(private readonly now: () => number = Date.now) {}

  /** Sets who a trial bills to and its caps (the engine calls this when it issues the trial's credentials). */
  setTrial(trialId: string, b: TrialBudget): void {
    this.trials.set(trialId, { ...b });
    this.scope(`trial:${trialId}:agent`, "trial", `trial ${trialId}`).limitUsd = b.capUsd;
    this.scope(`trial:${trialId}:judge`, "trial", `trial ${trialId} judge`).limitUsd = b.judgeCapUsd;
  }

  /** A user's credits, USD, and what was already spent elsewhere (the store's ledger, before this process). */
  setUserCredits(user: string, creditsUsd: number, alreadySpentUsd = 0): void {
    this.userCredits.set(user, creditsUsd);
    this.scope(`user:${user}`, "user", `user ${user}`).limitUsd = creditsUsd;
    this.setSpentElsewhere("user", user, alreadySpentUsd);
  }

  /** A team's monthly budget, USD, and this month's spend so far elsewhere (from the store). */
  setTeamBudget(team: string, monthlyUsd: number, spentThisMonthUsd = 0): void {
    this.teamMonthly.set(team, monthlyUsd);
    this.scope(`team:${team}:${monthOf(this.now())}`, "team", `team ${team}`).limitUsd = monthlyUsd;
    this.setSpentElsewhere("team", team, spentThisMonthUsd);
  }

  /**
   * What a user (or a team, in `month`, this UTC month by default) has spent outside this process: the ledger's
   * figure less what this process booked there. The engine refreshes it as other processes book theirs, so two
   * runs billing one user see each other's settled spend within a poll.
   */
  setSpentElsewhere(kind: "user" | "team", name: string, usd: number, month = monthOf(this.now())): void {
    this.shared(kind, name, month).elsewhereUsd = Number.isFinite(usd) && usd > 0 ? usd : 0;
  }

  /** What other processes hold in flight against a user (or a team's month), as they published it. */
  setReservedElsewhere(kind: "user" | "team", name: string, usd: number, month = monthOf(this.now())): void {
    this.shared(kind, name, month).reservedElsewhereUsd = Number.isFinite(usd) && usd > 0 ? usd : 0;
  }

  /** This process's own reservations against a user (or a team's month), to publish to the others. */
  ownReservedUsd(kind: "user" | "team", name: string, month = monthOf(this.now())): number {
    return this.shared(kind, name, month).reservedUsd;
  }

  private shared(kind: "user" | "team", name: string, month: string): Scope {
    return kind === "user" ? this.scope(`user:${name}`, "user", `user ${name}`) : this.scope(`team:${name}:${month}`, "team", `team ${name}`);
  }

  /** An optional cap on everything this gateway sends, USD. */
  setGlobalCap(usd: number | undefined): void {
    this.globalCapUsd = usd;
    this.scope("global", "other", "global").limitUsd = usd;
  }

  /** The global stop: every new request is refused until `resume()`; requests in flight settle normally. */
  stop(reason = "spending is stopped"): void {
    this.stopReason = reason;
  }

  /** Lifts the global stop. */
  resume(): void {
    this.stopReason = undefined;
  }

  private scope(key: string, kind: ScopeName, label: string): Scope {
    let s = this.scopes.get(key);
    if (!s) {
      s = { kind, label, spentUsd: 0, elsewhereUsd: 0, reservedUsd: 0, reservedElsewhereUsd: 0, unpricedCalls: 0, open: 0 };
      this.scopes.set(key, s);
    }
    return s;
  }

  /** Every scope a credential's request counts against, in the order refusals are reported: user, team, trial, other (global). */
  private scopesFor(cred: Credential): Scope[] {
    const t = this.trials.get(cred.trialId) ?? {};
    const out: Scope[] = [];
    if (t.user !== undefined) {
      const s = this.scope(`user:${t.user}`, "user", `user ${t.user}`);
      s.limitUsd = this.userCredits.get(t.user);
      out.push(s);
    }
    if (t.team !== undefined) {
      const s = this.scope(`team:${t.team}:${monthOf(this.now())}`, "team", `team ${t.team}`);
      s.limitUsd = this.teamMonthly.get(t.team);
      out.push(s);
    }
    const lane: Lane = cred.lane;
    const trial = this.scope(`trial:${cred.trialId}:${lane}`, "trial", lane === "agent" ? `trial ${cred.trialId}` : `trial ${cred.trialId} judge`);
    trial.limitUsd = lane === "agent" ? t.capUsd : t.judgeCapUsd;
    out.push(trial);
    const global = this.scope("global", "other", "global");
    global.limitUsd = this.globalCapUsd;
    out.push(global);
    return out;
  }

  /**
   * Reserves `worstCaseUsd` in every scope the request counts against, or refuses naming the first scope that
   * cannot hold it. Atomic: nothing awaits between the check and the add. `unboundedWhy` says, in a refusal of a
   * null worst case, why no bound exists.
   */
  reserve(cred: Credential, worstCaseUsd: number | null, unboundedWhy = "model has no price"): Reservation {
    if (this.stopReason !== undefined) return { ok: false, scope: "other", message: `other: ${this.stopReason}` };
    const scopes = this.scopesFor(cred);
    if (worstCaseUsd === null || !Number.isFinite(worstCaseUsd) || worstCaseUsd < 0) {
      const capped = scopes.find((s) => s.limitUsd !== undefined);
      if (capped) {
        return {
          ok: false,
          scope: capped.kind,
          message: `${capped.kind}: ${capped.label} has a spend cap and this request's cost cannot be bounded (${unboundedWhy})`,
        };
      }
      const id = `res_${randomUUID()}`;
      for (const s of scopes) s.unpricedCalls++;
      this.held.set(id, { reservedUsd: 0, scopes, priced: false });
      return { ok: true, id, reservedUsd: 0 };
    }
    for (const s of scopes) {
      if (s.limitUsd === undefined) continue;
      const spent = s.spentUsd + s.elsewhereUsd;
      const inFlight = s.reservedUsd + s.reservedElsewhereUsd;
      if (spent + inFlight + worstCaseUsd > s.limitUsd) {
        return {
          ok: false,
          scope: s.kind,
          message:
            `${s.kind}: ${s.label} budget of ${money(s.limitUsd)} would be exceeded ` +
            `(spent ${money(spent)}, in flight ${money(inFlight)}, this request up to ${money(worstCaseUsd)})`,
        };
      }
    }
    const id = `res_${randomUUID()}`;
    for (const s of scopes) {
      s.reservedUsd += worstCaseUsd;
      s.open++;
    }
    this.held.set(id, { reservedUsd: worstCaseUsd, scopes, priced: true });
    return { ok: true, id, reservedUsd: worstCaseUsd };
  }

  /**
   * Replaces a reservation by the measured cost. `null` (the cost could not be measured: a cut stream, a model
   * without a price) keeps the whole reservation as spent rather than counting it as free. Settling an unknown
   * or already settled id does nothing, so a retry path cannot count a call twice.
   */
  settle(reservationId: string, actualUsd: number | null): void {
    const h = this.held.get(reservationId);
    if (!h) return;
    this.held.delete(reservationId);
    const measured = actualUsd !== null && Number.isFinite(actualUsd) && actualUsd >= 0 ? actualUsd : null;
    const spent = measured ?? h.reservedUsd;
    for (const s of h.scopes) {
      if (h.priced) s.open--;
      s.reservedUsd = s.open > 0 ? Math.max(0, s.reservedUsd - h.reservedUsd) : 0;
      s.spentUsd += spent;
      // an admitted unpriced call that later got a measured cost is priced after all
      if (!h.priced && measured !== null) s.unpricedCalls = Math.max(0, s.unpricedCalls - 1);
    }
  }

  private view(key: string): ScopeSpend {
    const s = this.scopes.get(key);
    if (!s) return { spentUsd: 0, reservedUsd: 0, unpricedCalls: 0 };
    return {
      spentUsd: s.spentUsd + s.elsewhereUsd,
      reservedUsd: s.reservedUsd + s.reservedElsewhereUsd,
      ...(s.limitUsd !== undefined ? { limitUsd: s.limitUsd } : {}),
      unpricedCalls: s.unpricedCalls,
    };
  }

  /** A trial's spend in one lane (agent by default). */
  trialSpend(trialId: string, lane: Lane = "agent"): ScopeSpend {
    return this.view(`trial:${trialId}:${lane}`);
  }

  /** A user's spend against their credits. */
  userSpend(user: string): ScopeSpend {
    return this.view(`user:${user}`);
  }

  /** A team's spend in a month (`YYYY-MM`, UTC; this month by default). */
  teamSpend(team: string, month = monthOf(this.now())): ScopeSpend {
    return this.view(`team:${team}:${month}`);
  }

  /** Everything this gateway has spent and holds. */
  globalSpend(): ScopeSpend {
    return this.view("global");
  }
}

/**
 * Model preflight: before anything is recorded (no job, no box), a run checks that the gateway could serve the
 * agent's model at all. Without it, a run with no upstream for the model's provider, or no key for it, records a
 * job whose every trial the agent fails without ever meeting its model: a fabricated score.
 *
 * What is checked, all from what the gateway itself reads (`$EVOLVE_HOME/gateway.toml` and the `ANTHROPIC_*`,
 * `OPENAI_*`, `GEMINI_*` variables, gateway/upstreams.ts), with no network call:
 * - an upstream serves the model: the one named by `-m`'s provider, else one that lists the model (`models`);
 * - a Gemini API call goes to a Gemini upstream and the others never to one (the gateway's own rule);
 * - the upstream has a credential, where it is the provider's own service (a local server or a proxy at a base URL
 *   of the user's may need none);
 * - where the upstream lists its models, the model is one of them (`model_unknown`, with did-you-mean).
 * Agents that call no model (oracle, nop) are not checked. `--preflight-call` adds one tiny real call through the
 * gateway (off by default: it costs money).
 */
import type { Store } from "./store/index.ts";
import { EvolveError } from "./errors.ts";
import { getHarness } from "./harness/index.ts";
import { didYouMean } from "./task/findings.ts";
import { agentSpec } from "./harness/manifest.ts";
import { splitModel } from "./harness/cli.ts";
import type { WireApi as AgentApi } from "./providers.ts";
import { GatewayConfigError, ModelGateway } from "./gateway-host/model-gateway.ts";
import { loadUpstreams, type Upstream, type Upstreams } from "../gateway/upstreams.ts";
import type { WireApi as GatewayApi } from "../gateway/usage.ts";

/** The gateway route an agent's wire API arrives on. */
const GATEWAY_API: Record<AgentApi, GatewayApi> = { anthropic: "messages", "openai-chat": "chat", "openai-responses": "responses", gemini: "gemini" };

/** The provider's own service per upstream kind: an upstream there cannot answer without a key. */
const PROVIDER_BASE: Partial<Record<Upstream["kind"], string>> = {
  anthropic: "https://api.anthropic.com",
  openai: "https://api.openai.com/v1",
  gemini: "https://generativelanguage.googleapis.com",
};

/** The variable that holds a built-in upstream's key when gateway.toml names none. */
const KEY_VARIABLE: Record<string, string> = { anthropic: "ANTHROPIC_API_KEY", openai: "OPENAI_API_KEY", gemini: "GEMINI_API_KEY" };

/** What a run's model resolves to once the preflight passed. */
export interface ModelTarget {
  /** `-m` as given. */
  requested: string;
  provider: string;
  /** The agent's wire API for that provider, as the gateway's route names it. */
  api: GatewayApi;
  upstream: string;
  /** The name the upstream is sent. */
  upstreamModel: string;
}

/** What the preflight is asked about. */
export interface PreflightRequest {
  home: string;
  agent: string;
  model?: string;
  /** The upstreams; read as the gateway reads them (`home`'s gateway.toml and `env`) when absent. */
  upstreams?: Upstreams;
  env?: Record<string, string | undefined>;
}

/**
 * Checks that the gateway has an upstream and a credential for the agent's model, and that the model is one the
 * upstream lists where it lists any; throws `model_upstream_missing` or `model_unknown` (one line, naming what is
 * missing and how to set it), `gateway_config_invalid` for a gateway.toml that cannot be read. Returns undefined for
 * an agent that calls no model, or one whose request the agent's own check refuses (that check speaks for it).
 */
export function preflightModel(req: PreflightRequest): ModelTarget | undefined {
  const harness = getHarness(req.agent);
  if (!harness?.usesModel) return undefined;
  const spec = agentSpec(req.agent, req.home);
  const m = splitModel(req.model);
  const agentApi = m && spec ? spec.apiFor(m.provider) : undefined;
  if (!m || !agentApi) return undefined;
  const api = GATEWAY_API[agentApi];
  let ups: Upstreams;
  try {
    ups = req.upstreams ?? loadUpstreams({ home: req.home, ...(req.env ? { env: req.env } : {}) });
  } catch (e) {
    throw new EvolveError("gateway_config_invalid", `cannot read the gateway's upstreams (${req.home}/gateway.toml): ${(e as Error).message}`, "fix the file named, or move it aside");
  }
  const requested = req.model!;
  const name = ups.aliases.get(requested) ?? requested;
  const named = splitModel(name) ?? m;
  let upstream = ups.byName.get(named.provider);
  let upstreamModel = named.model;
  if (!upstream) {
    // a bare name the gateway routes by listing: the first upstream whose `models` holds it
    for (const u of ups.byName.values()) {
      if (u.models.includes(named.model) || u.models.includes(name)) {
        upstream = u;
        upstreamModel = u.models.includes(named.model) ? named.model : name;
        break;
      }
    }
  }
  if (!upstream) {
    const have = [...ups.byName.keys()];
    const key = KEY_VARIABLE[named.provider];
    throw new EvolveError(
      "model_upstream_missing",
      `-m ${requested}: no upstream serves provider ${named.provider} (${have.length > 0 ? `the gateway has ${have.join(", ")}` : `no gateway.toml upstream and no ${Object.values(KEY_VARIABLE).join("/")} set`}); every trial would fail without meeting its model`,
      key ? `export ${key}=… (or add [upstreams.${named.provider}] to ${req.home}/gateway.toml)` : `add [upstreams.${named.provider}] with base_url (and api_key or api_key_env) to ${req.home}/gateway.toml`,
    );
  }
  if ((api === "gemini") !== (upstream.kind === "gemini")) {
    throw new EvolveError(
      "model_upstream_missing",
      `-m ${requested}: ${req.agent} calls it on the ${api === "gemini" ? "Gemini" : "Anthropic/OpenAI"} API, and upstream ${upstream.name} (kind ${upstream.kind}) does not serve that API`,
      `give [upstreams.${upstream.name}] the kind its server speaks in ${req.home}/gateway.toml`,
    );
  }
  if (!upstream.apiKey && PROVIDER_BASE[upstream.kind] === upstream.baseUrl) {
    const variable = KEY_VARIABLE[upstream.name];
    throw new EvolveError(
      "model_upstream_missing",
      `-m ${requested}: upstream ${upstream.name} (${upstream.baseUrl}) has no credential; every call would be refused`,
      variable ? `export ${variable}=… (or set api_key_env in [upstreams.${upstream.name}] of ${req.home}/gateway.toml)` : `set api_key or api_key_env in [upstreams.${upstream.name}] of ${req.home}/gateway.toml (and export that variable)`,
    );
  }
  if (upstream.models.length > 0 && !upstream.models.includes(upstreamModel)) {
    const near = didYouMean(upstreamModel, upstream.models);
    throw new EvolveError(
      "model_unknown",
      `-m ${requested}: upstream ${upstream.name} does not list ${upstreamModel}${near ? `; did you mean ${upstream.name}/${near}?` : ""} (it lists ${upstream.models.slice(0, 10).join(", ")}${upstream.models.length > 10 ? ", …" : ""})`,
      `pick a listed model, or add it to models in [upstreams.${upstream.name}] of ${req.home}/gateway.toml`,
    );
  }
  return { requested, provider: named.provider, api, upstream: upstream.name, upstreamModel };
}

/** How long the preflight's one real call may take before it counts as no answer. */
const PREFLIGHT_CALL_MS = 60_000;

/** The smallest request of each API: one short prompt, a token budget no larger than the API's minimum. */
function tinyCall(t: ModelTarget): { path: string; headers: Record<string, string>; body: unknown } {
  const model = `${t.upstream}/${t.upstreamModel}`;
  const prompt = "Reply with the word ok.";
  switch (t.api) {
    case "messages":
      return { path: "/v1/messages", headers: { "anthropic-version": "2023-06-01" }, body: { model, max_tokens: 16, messages: [{ role: "user", content: prompt }] } };
    case "chat":
      return { path: "/v1/chat/completions", headers: {}, body: { model, max_completion_tokens: 16, messages: [{ role: "user", content: prompt }] } };
    case "responses":
      return { path: "/v1/responses", headers: {}, body: { model, max_output_tokens: 16, input: prompt } };
    case "gemini":
      return { path: `/v1beta/models/${encodeURIComponent(model)}:generateContent`, headers: {}, body: { contents: [{ role: "user", parts: [{ text: prompt }] }], generationConfig: { maxOutputTokens: 16 } } };
  }
}

/**
 * `--preflight-call`: one tiny real call through a gateway of this process (metered and booked like any other),
 * before any box starts; throws `model_preflight_failed` with the upstream's status and first words when the model
 * does not answer. It costs money, so it runs only when asked.
 */
export async function preflightCall(target: ModelTarget, o: { home: string; store: Store; upstreams?: Upstreams; timeoutMs?: number }): Promise<void> {
  const gw = new ModelGateway({ home: o.home, store: o.store, ...(o.upstreams ? { upstreams: o.upstreams } : {}) });
  try {
    let local: { url: string; key: string };
    try {
      local = await gw.serveLocal({ host: "127.0.0.1", port: 0 });
    } catch (e) {
      if (e instanceof GatewayConfigError) throw new EvolveError("gateway_config_invalid", e.message, "fix the file named, or move it aside");
      throw e;
    }
    const call = tinyCall(target);
    let status: number;
    let text: string;
    try {
      const r = await fetch(local.url + call.path, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${local.key}`, "x-api-key": local.key, "x-goog-api-key": local.key, ...call.headers },
        body: JSON.stringify(call.body),
        signal: AbortSignal.timeout(o.timeoutMs ?? PREFLIGHT_CALL_MS),
      });
      status = r.status;
      text = await r.text();
    } catch (e) {
      throw new EvolveError("model_preflight_failed", `--preflight-call: ${target.requested} gave no answer through the gateway: ${(e as Error).message}`, "check the upstream's base_url and that it is up");
    }
    if (status >= 400) {
      const words = text.replace(/\s+/g, " ").trim().slice(0, 200);
      throw new EvolveError("model_preflight_failed", `--preflight-call: ${target.requested} via upstream ${target.upstream} answered ${status}: ${words}`, "check the upstream's key, base_url and the model's name");
    }
  } finally {
    await gw.close();
  }
}

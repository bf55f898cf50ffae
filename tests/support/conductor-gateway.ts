/**
 * The conductor tests' model: the real process gateway (ModelGateway.serveLocal, on loopback with its local
 * credential) in front of the scripted upstream, with all three provider upstreams pointed at the fixture. What the
 * conductor sends reaches `upstream.requests` through the gateway, as a real provider would get it.
 */
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ModelGateway } from "../../engine/gateway-host/model-gateway.ts";
import { openStore, type Store } from "../../engine/store/index.ts";
import type { WireApi } from "../../engine/providers.ts";
import type { ModelEndpoint } from "../../engine/conductor/types.ts";
import { ScriptedUpstream } from "../../fixtures/upstream/server.ts";
import { buildUpstreams } from "../../gateway/upstreams.ts";

/** The gateway and its upstream, started; `close()` ends both and removes the home. */
export interface ConductorGateway {
  upstream: ScriptedUpstream;
  url: string;
  key: string;
  home: string;
  /** An endpoint of the gateway in `api`, for a model of that API's provider. */
  endpoint(api: WireApi): ModelEndpoint;
  close(): Promise<void>;
}

/** The model each API is asked for (bare names route by the API's own upstream). */
export const MODEL_OF: Record<WireApi, string> = {
  anthropic: "claude-sonnet-4-5",
  "openai-responses": "gpt-5",
  "openai-chat": "gpt-5",
  gemini: "gemini-2.5-flash",
};

/** Starts the scripted upstream and a ModelGateway serving locally in front of it. */
export async function startConductorGateway(): Promise<ConductorGateway> {
  const upstream = new ScriptedUpstream();
  await upstream.start();
  const home = mkdtempSync(join(tmpdir(), "evolve-conductor-gw-"));
  mkdirSync(home, { recursive: true });
  const store: Store = openStore(home);
  const upstreams = buildUpstreams(
    {
      upstreams: {
        anthropic: { base_url: upstream.url, api_key: "sk-ant-real" },
        openai: { base_url: `${upstream.url}/v1`, api_key: "sk-openai-real" },
        gemini: { base_url: upstream.url, api_key: "AIza-real" },
      },
    },
    {},
  );
  const gw = new ModelGateway({ home, store, upstreams, budget: { user: "conductor-tests" }, warn: () => {} });
  const { url, key } = await gw.serveLocal({ port: 0, host: "127.0.0.1" });
  return {
    upstream,
    url,
    key,
    home,
    endpoint: (api) => ({ api, baseUrl: url, key, model: MODEL_OF[api] }),
    async close() {
      await gw.close();
      await upstream.close();
      await store.close();
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/**
 * A trial's network policy, per box and per phase (platform-tasks.md "Network access", "Verifier network";
 * Harbor's `[agent]`/`[verifier]` phase overrides).
 *
 * Design. The engine's networks are the only tools, so every guarantee is a missing route, never a rule a process
 * in the box could undo:
 * - `public`: the box is on the engine's guarded egress network (Engine.egressNetwork, engine/driver/hostguard.ts):
 *   the internet, but no service on the host's own addresses and no private or link-local range unless config.toml
 *   `[network]` opens them. Compose sidecars of a public baseline join it too.
 * - `no-network`: the box is on no network with a route out: the engine's "none" network (loopback only), or,
 *   when something must stay reachable (compose sidecars) or the policy changes between phases, only the trial's
 *   INTERNAL service network `evolve-<trial>-svc` (no gateway, no route off the host bridge). With the model
 *   gateway, the trial's internal gw network takes the place of "none" (below).
 * - `allowlist`: the box is on the trial's INTERNAL proxy network `evolve-<trial>-egress`, whose only other member is
 *   the trial's egress proxy (a python3 asyncio proxy, proxy/script.ts, labelled with the trial). The proxy is on
 *   that network and on the guarded egress network (so an allowed name that resolves to the host or a private
 *   address gets a 502, as a public box would get no route); it forwards CONNECT and plain-HTTP requests whose host
 *   matches `allowed_hosts` (exact names; `*.x` matches names below x, never x) and answers 403 otherwise. The box
 *   finds it as `evolve-proxy:3128` (an /etc/hosts entry: internal networks get no DNS from podman's CNI) through
 *   HTTP_PROXY/HTTPS_PROXY/http_proxy/https_proxy; NO_PROXY keeps loopback and compose services direct. A process
 *   that ignores those variables has no route anywhere but the proxy and the services.
 * - Phase overrides switch a running box by connecting and disconnecting networks (both engines do that on a live
 *   container): `enter(box, "agent")` before the agent, `enter(box, "verify")` before a shared verifier (back to
 *   the baseline, as Harbor restores it after the agent). Each switch is written to the trial's system log.
 * - A separate verifier box gets its own policy at creation (`[verifier.environment]`, else `[environment]`, with
 *   `[verifier] network_mode`/`allowed_hosts` over either); the proxy's allowlist is rewritten for it.
 *
 * The gateway relay. The LLM gateway runs in the evolve process and listens on a unix socket per trial on the host
 * (`<socketDir>/gateway.sock`, TrialNetworkOptions.gateway). A trial with a gateway gets an INTERNAL network
 * `evolve-<trial>-gw` and on it a relay container (python3, proxy/script.ts RELAY_SCRIPT, labelled with the trial)
 * that pipes TCP `evolve-gateway:4000` to that socket, bind-mounted into the relay ONLY. The relay is created on the
 * gw network and nothing else: it holds the socket and needs no route at all. Every box of the trial is on a gw
 * network for its whole life, whatever its policy and through every phase switch, and finds the relay by an
 * /etc/hosts entry; a client just uses `http://evolve-gateway:4000` (gatewayUrl()). The agent box has the gw
 * network; a separate verifier box has one of its own, `evolve-<trial>-gwv`, which the relay joins too: the two
 * boxes share no network through the relay, so what the agent left running cannot reach the verifier's box, nor
 * the verifier the agent's (a separate verifier judges artifacts, not the agent's box). So:
 * - a `no-network` box is created on the gw network instead of "none" (or, when it lives on the service network,
 *   keeps the gw network beside it): internal networks have no route out, so it reaches the relay and nothing else,
 *   and the spend cap stays airtight without relaxing any seal;
 * - a `public` box is on its egress network plus the gw network;
 * - an `allowlist` box is on the proxy network plus the gw network, with `evolve-gateway` in NO_PROXY so clients go
 *   straight to the relay (the proxy would refuse it: the gateway is never an allowed host).
 * Why a relay and not the socket mounted into the box: a task's image may have no runtime to forward a socket, and
 * most model clients speak only TCP HTTP; the relay runs in evolve's own image, the same for every task. A trial
 * without a gateway (oracle, nop) gets no gw network and no relay.
 *
 * Known gap on Docker (20.10, not podman): Docker gives an internal bridge a host address and its members a default
 * route through it, so a box on any internal network (gw, svc, egress) still reaches services listening on the
 * host's own addresses; remote destinations stay cut. The driver closes it by creating Docker's internal networks
 * with `com.docker.network.bridge.inhibit_ipv4` (tests/trial-gateway-net.engine.test.ts pins the gap until then).
 */
import { helperImage } from "../driver/hostguard.ts";
import { LABEL_HOME, LABEL_JOB, LABEL_MANAGED, LABEL_TRIAL, type Engine } from "../driver/types.ts";
import { baselineNetwork, verifierMode, type NetworkMode, type TaskConfig } from "../task/model.ts";
import { TrialFailure } from "../outcome.ts";
export { hostAllowed } from "../task/rules-network.ts";
import { PROXY_SCRIPT, RELAY_SCRIPT } from "./proxy/script.ts";

/** The name the box reaches the egress proxy by. */
export const PROXY_ALIAS = "evolve-proxy";
export const PROXY_PORT = 3128;
/** The name every box of a gateway trial reaches the gateway relay by (an /etc/hosts entry). */
export const GATEWAY_HOST = "evolve-gateway";
/** The relay's TCP port inside the trial's gw network. */
export const GATEWAY_RELAY_PORT = 4000;
/** Where the trial's socket folder is mounted in the relay (the relay only; never in a box). */
const RELAY_SOCKET_DIR = "/run/evolve";

/** The image the egress proxy and the gateway relay run in (python3 needed); EVOLVE_PROXY_IMAGE overrides. */
export function proxyImage(): string {
  return helperImage();
}

/** One network policy: the mode and, for `allowlist`, its host patterns. */
export interface NetPolicy {
  mode: NetworkMode;
  hosts: string[];
}

/** The policy of each place a trial runs code. */
export interface TrialPolicies {
  /** `[environment]`: boot, install, a shared verifier. */
  baseline: NetPolicy;
  /** `[agent] network_mode`/`allowed_hosts` over the baseline, for the agent phase. */
  agent: NetPolicy;
  /** A separate verifier box's policy; undefined for a shared verifier. */
  separateVerifier?: NetPolicy;
}

/** Reads the policies out of a task (validated tasks only: allowed_hosts comes with allowlist). */
export function trialPolicies(cfg: TaskConfig): TrialPolicies {
  const env = cfg.environment;
  const baseline: NetPolicy = { mode: baselineNetwork(env), hosts: env.allowed_hosts ?? [] };
  const agent: NetPolicy = cfg.agent.network_mode ? { mode: cfg.agent.network_mode, hosts: cfg.agent.allowed_hosts ?? [] } : baseline;
  let separateVerifier: NetPolicy | undefined;
  if (verifierMode(cfg.verifier) === "separate") {
    const venv = cfg.verifier.environment ?? env;
    separateVerifier = { mode: baselineNetwork(venv), hosts: venv.allowed_hosts ?? [] };
    if (cfg.verifier.network_mode) {
      separateVerifier = { mode: cfg.verifier.network_mode, hosts: cfg.verifier.allowed_hosts ?? (cfg.verifier.network_mode === "allowlist" ? separateVerifier.hosts : []) };
    }
  }
  return { baseline, agent, separateVerifier };
}

/** A python3 one-liner that exits 0 once something listens on 127.0.0.1:`port` (5 s at most). */
function listening(port: number): string {
  return `import socket,time\nfor i in range(200):\n  try:\n    socket.create_connection(("127.0.0.1",${port}),1).close();break\n  except OSError: time.sleep(0.025)\nelse: raise SystemExit(1)`;
}

function samePolicy(a: NetPolicy, b: NetPolicy): boolean {
  return a.mode === b.mode && (a.mode !== "allowlist" || a.hosts.join("\n") === b.hosts.join("\n"));
}

function describe(p: NetPolicy): string {
  return p.mode === "allowlist" ? `allowlist [${p.hosts.join(", ")}]` : p.mode;
}

/** How one box is to be created: its first network and what goes into its /etc/hosts and environment. */
export interface BoxNetworking {
  network: string;
  extraHosts: string[];
  env: Record<string, string>;
  aliases?: string[];
}

/** Options of a trial's network. */
export interface TrialNetworkOptions {
  trialId: string;
  jobId: string;
  home: string;
  policies: TrialPolicies;
  /** The task runs compose sidecars: the box lives on the service network whatever its policy. */
  compose: boolean;
  /** "name:ip" entries for every box's and the proxy's /etc/hosts (private mirrors; tests). */
  extraHosts?: string[];
  /** The trial's system log (trial.log). */
  log: (line: string) => void;
  /** Hands a container the network created (the proxy, the relay) to the trial, which removes it with its boxes. */
  track: (id: string) => void;
  /** The trial's gateway: the host folder holding its `gateway.sock`, which the relay forwards to. */
  gateway?: { socketDir: string };
}

/**
 * The networks, egress proxy and gateway relay of one trial. Created lazily: a plain public or no-network trial
 * without phase overrides, sidecars or a gateway makes nothing and pays nothing.
 */
export class TrialNetwork {
  private svcNet?: string;
  private gwNet?: string;
  private relayId?: string;
  private relayIp?: string;
  /** The separate verifier's own gw network and the relay's address on it; made at the first verifier box. */
  private verifierGw?: Promise<{ net: string; ip: string }>;
  private gwvNet?: string;
  /** Each box's gw network, so a phase switch keeps the right one. */
  private readonly boxGw = new Map<string, string>();
  private relaying?: Promise<void>;
  private relayReady?: Promise<void>;
  private egressNet?: string;
  private proxyId?: string;
  private proxyIp?: string;
  private proxyHosts?: string[];
  private readonly applied = new Map<string, NetPolicy>();
  private readonly networks: string[] = [];
  /** Compose service names, reachable directly (NO_PROXY), and their /etc/hosts entries. */
  private readonly services: string[] = [];
  private readonly serviceHosts: string[] = [];

  constructor(
    private readonly engine: Engine,
    private readonly opts: TrialNetworkOptions,
  ) {}

  private get labels(): Record<string, string> {
    return { [LABEL_MANAGED]: "true", [LABEL_TRIAL]: this.opts.trialId, [LABEL_JOB]: this.opts.jobId, [LABEL_HOME]: this.opts.home };
  }


  /** The engine's guarded egress network (public boxes, the proxy); a setup failure is the trial's NetworkSetupError. */
  private async egress(): Promise<string> {
    try {
      return await this.engine.egressNetwork();
    } catch (e) {
      throw new TrialFailure("NetworkSetupError", (e as Error).message);
    }
  }

  /** True when the agent box must live on managed networks: sidecars, an allowlist, or a policy that switches. */
  get managed(): boolean {
    const { baseline, agent } = this.opts.policies;
    return this.opts.compose || baseline.mode === "allowlist" || agent.mode === "allowlist" || !samePolicy(baseline, agent);
  }

  /** The internal network compose services (and a switching box) live on; created on first use. */
  async serviceNetwork(): Promise<string> {
    if (!this.svcNet) this.svcNet = await this.makeNetwork(`evolve-${this.opts.trialId.toLowerCase()}-svc`);
    return this.svcNet;
  }

  private async makeNetwork(name: string): Promise<string> {
    try {
      await this.engine.createNetwork(name, { internal: true, labels: this.labels });
    } catch (e) {
      throw new TrialFailure("NetworkSetupError", `cannot create the trial network ${name}: ${(e as Error).message}`);
    }
    this.networks.push(name);
    return name;
  }

  /** /etc/hosts entries a new container gets: the caller's, and the compose services started so far. */
  hostsForServices(): string[] {
    return [...(this.opts.extraHosts ?? []), ...this.serviceHosts];
  }

  /** Records a started compose service, reachable as `name` from containers created after it. */
  addService(name: string, ip: string): void {
    this.services.push(name);
    this.serviceHosts.push(`${name}:${ip}`);
  }

  /** A sidecar keeps egress on a public baseline (as in Harbor) and has none otherwise; it never switches. */
  async attachService(id: string): Promise<void> {
    if (this.opts.policies.baseline.mode === "public") await this.engine.connect(await this.egress(), id);
  }

  /** The gateway's URL inside every box of this trial, or undefined when the trial has no gateway. */
  gatewayUrl(): string | undefined {
    return this.opts.gateway ? `http://${GATEWAY_HOST}:${GATEWAY_RELAY_PORT}` : undefined;
  }

  /** The environment that sends a client through the proxy (the relay stays direct: the proxy would refuse it). */
  proxyEnv(): Record<string, string> {
    const url = `http://${PROXY_ALIAS}:${PROXY_PORT}`;
    const noProxy = ["localhost", "127.0.0.1", "::1", ...(this.opts.gateway ? [GATEWAY_HOST] : []), ...this.services].join(",");
    return { HTTP_PROXY: url, HTTPS_PROXY: url, http_proxy: url, https_proxy: url, NO_PROXY: noProxy, no_proxy: noProxy };
  }

  /**
   * Starts the egress proxy (once per trial) with `hosts` as its allowlist, or rewrites the allowlist of the
   * running one. The proxy sits on the default network (egress) and on the trial's internal egress network.
   */
  private async ensureProxy(hosts: string[]): Promise<void> {
    if (this.proxyId) {
      if (this.proxyHosts?.join("\n") !== hosts.join("\n")) await this.writeAllowlist(hosts);
      return;
    }
    const image = proxyImage();
    if (!(await this.engine.imageExists(image))) {
      throw new TrialFailure("ImageNotFoundError", `the egress proxy image ${image} is not present locally (set EVOLVE_PROXY_IMAGE to a local image with python3)`);
    }
    this.egressNet ??= await this.makeNetwork(`evolve-${this.opts.trialId.toLowerCase()}-egress`);
    const id = await this.engine.create({
      image,
      cmd: ["python3", "-c", PROXY_SCRIPT, String(PROXY_PORT)],
      env: { EVOLVE_ALLOWED_HOSTS: hosts.join(",") },
      labels: { ...this.labels, "dev.evolve.role": "proxy" },
      network: await this.egress(),
      extraHosts: this.opts.extraHosts,
      memoryMb: 128,
    });
    this.opts.track(id);
    this.proxyId = id;
    await this.engine.start(id);
    await this.engine.connect(this.egressNet, id, [PROXY_ALIAS]);
    const st = await this.engine.inspect(id);
    this.proxyIp = st?.networks?.[this.egressNet]?.ip;
    if (!this.proxyIp) throw new TrialFailure("NetworkSetupError", "the egress proxy got no address on the trial's egress network");
    const ready = await this.engine.exec(id, ["python3", "-c", listening(PROXY_PORT)], { timeoutMs: 15_000 });
    if (ready.exitCode !== 0) throw new TrialFailure("NetworkSetupError", `the egress proxy did not start listening: ${ready.stderr.trim().slice(-300)}`);
    this.proxyHosts = hosts;
    this.opts.log(`egress proxy ${id.slice(0, 12)} at ${PROXY_ALIAS}:${PROXY_PORT} (${this.proxyIp}) allows [${hosts.join(", ")}]`);
  }

  /** Starts the trial's gateway relay once; later calls share the first start (and its failure). */
  private ensureRelay(): Promise<void> {
    this.relaying ??= this.startRelay(this.opts.gateway!.socketDir);
    return this.relaying;
  }

  /**
   * Creates the gw network and the relay on it, with the socket folder mounted and no other network: the relay needs
   * no route, only the socket. Resolves once the relay has its address; `relayReady` settles when it listens, which
   * the first attach() awaits, so the wait overlaps creating the box.
   */
  private async startRelay(socketDir: string): Promise<void> {
    const image = proxyImage();
    if (!(await this.engine.imageExists(image))) {
      throw new TrialFailure("ImageNotFoundError", `the gateway relay image ${image} is not present locally (set EVOLVE_PROXY_IMAGE to a local image with python3)`);
    }
    const net = await this.makeNetwork(`evolve-${this.opts.trialId.toLowerCase()}-gw`);
    const id = await this.engine.create({
      image,
      cmd: ["python3", "-c", RELAY_SCRIPT, String(GATEWAY_RELAY_PORT), `${RELAY_SOCKET_DIR}/gateway.sock`],
      labels: { ...this.labels, "dev.evolve.role": "gateway-relay" },
      mounts: [{ host: socketDir, container: RELAY_SOCKET_DIR }],
      network: net,
      memoryMb: 64,
    });
    this.opts.track(id);
    await this.engine.start(id);
    const st = await this.engine.inspect(id);
    const ip = st?.networks?.[net]?.ip;
    if (!ip) throw new TrialFailure("NetworkSetupError", "the gateway relay got no address on the trial's gw network");
    this.gwNet = net;
    this.relayId = id;
    this.relayIp = ip;
    this.relayReady = this.engine
      .exec(id, ["python3", "-c", listening(GATEWAY_RELAY_PORT)], { timeoutMs: 15_000 })
      .then((r) => {
        if (r.exitCode !== 0) throw new TrialFailure("NetworkSetupError", `the gateway relay did not start listening: ${r.stderr.trim().slice(-300)}`);
        this.opts.log(`gateway relay ${id.slice(0, 12)} at ${GATEWAY_HOST}:${GATEWAY_RELAY_PORT} (${ip}) forwards to ${socketDir}/gateway.sock`);
      });
    // awaited by attach(); until then a rejection must not count as unhandled
    this.relayReady.catch(() => {});
  }

  /** The gw network and relay address a box of `role` gets (a verifier's own, joined by the relay on first use). */
  private async gatewayFor(role: "agent" | "verifier"): Promise<{ net: string; ip: string }> {
    await this.ensureRelay();
    if (role === "agent") return { net: this.gwNet!, ip: this.relayIp! };
    this.verifierGw ??= (async () => {
      const net = await this.makeNetwork(`evolve-${this.opts.trialId.toLowerCase()}-gwv`);
      try {
        await this.engine.connect(net, this.relayId!);
      } catch (e) {
        throw new TrialFailure("NetworkSetupError", `cannot put the gateway relay on the verifier's gw network: ${(e as Error).message}`);
      }
      const ip = (await this.engine.inspect(this.relayId!))?.networks?.[net]?.ip;
      if (!ip) throw new TrialFailure("NetworkSetupError", "the gateway relay got no address on the verifier's gw network");
      this.opts.log(`gateway relay also at ${GATEWAY_HOST}:${GATEWAY_RELAY_PORT} (${ip}) on ${net}, the separate verifier's own`);
      this.gwvNet = net;
      return { net, ip };
    })();
    return this.verifierGw;
  }

  private async writeAllowlist(hosts: string[]): Promise<void> {
    const r = await this.engine.exec(this.proxyId!, ["sh", "-c", 'printf "%s\\n" "$@" > /tmp/evolve-allow.new && mv /tmp/evolve-allow.new /tmp/evolve-allow', "sh", ...hosts], {});
    if (r.exitCode !== 0) throw new TrialFailure("NetworkSetupError", `cannot update the egress proxy's allowlist: ${r.stderr.trim()}`);
    this.proxyHosts = hosts;
    this.opts.log(`egress proxy now allows [${hosts.join(", ")}]`);
  }

  /**
   * How to create a box of `role` so that `policy` holds from its first instant. The agent box of a managed trial
   * starts on the service network and is switched to its policy by `attach` right after it starts.
   */
  async boxNetworking(role: "agent" | "verifier", policy: NetPolicy): Promise<BoxNetworking> {
    const extraHosts = this.hostsForServices();
    const gw = this.opts.gateway ? await this.gatewayFor(role) : undefined;
    if (gw) extraHosts.push(`${GATEWAY_HOST}:${gw.ip}`);
    const needsProxy = role === "agent" ? [this.opts.policies.baseline, this.opts.policies.agent].some((p) => p.mode === "allowlist") : policy.mode === "allowlist";
    if (needsProxy) {
      // eager: the box's /etc/hosts must name the proxy from creation (internal networks have no DNS)
      await this.ensureProxy((role === "agent" && policy.mode !== "allowlist" ? this.opts.policies.agent : policy).hosts);
      extraHosts.push(`${PROXY_ALIAS}:${this.proxyIp}`);
    }
    const env = policy.mode === "allowlist" ? this.proxyEnv() : {};
    const onServices = this.opts.compose || (role === "agent" && this.managed);
    if (onServices) {
      return { network: await this.serviceNetwork(), extraHosts, env, aliases: role === "agent" ? ["main"] : [] };
    }
    if (policy.mode === "allowlist") return { network: this.egressNet!, extraHosts, env };
    // the gw network is internal: a no-network box on it reaches the relay and nothing else
    return { network: policy.mode === "no-network" ? (gw?.net ?? "none") : await this.egress(), extraHosts, env };
  }

  /** Records the policy a box of `role` was created under (no switching needed when it already holds). */
  created(box: string, policy: NetPolicy, network: string, role: "agent" | "verifier" = "agent"): void {
    // boxNetworking(role) made the role's gw network before the box was created
    const gw = !this.opts.gateway ? undefined : role === "agent" ? this.gwNet : this.gwvNet;
    if (gw) this.boxGw.set(box, gw);
    if (network === this.svcNet) return; // a service-network box is switched by attach()
    if (gw && network !== gw) return; // attach() adds the gw network beside its first one
    this.applied.set(box, policy);
  }

  /** Puts a started box under `policy` by connecting and disconnecting networks; logs the switch. */
  async attach(box: string, policy: NetPolicy, why: string): Promise<void> {
    await this.relayReady;
    const before = this.applied.get(box);
    if (before && samePolicy(before, policy)) return;
    if (policy.mode === "allowlist") await this.ensureProxy(policy.hosts);
    const want = new Set<string>();
    if (this.svcNet) want.add(this.svcNet);
    const gw = this.boxGw.get(box) ?? this.gwNet;
    if (gw) want.add(gw); // every policy keeps the relay: no switch may cut the model off
    if (policy.mode === "public") want.add(await this.egress());
    if (policy.mode === "allowlist") want.add(this.egressNet!);
    const st = await this.engine.inspect(box);
    const have = new Set(Object.keys(st?.networks ?? {}));
    const changes: string[] = [];
    try {
      for (const n of have) {
        if (!want.has(n)) {
          await this.engine.disconnect(n, box);
          changes.push(`-${n}`);
        }
      }
      for (const n of want) {
        if (!have.has(n)) {
          await this.engine.connect(n, box, n === this.svcNet ? ["main"] : []);
          changes.push(`+${n}`);
        }
      }
    } catch (e) {
      throw new TrialFailure("NetworkSetupError", `cannot switch the box to ${describe(policy)} for ${why}: ${(e as Error).message}`);
    }
    this.applied.set(box, policy);
    if (before) this.opts.log(`network: ${why}: ${describe(before)} → ${describe(policy)} (${changes.join(" ") || "no change of networks"})`);
    else this.opts.log(`network: ${why}: ${describe(policy)} (${changes.join(" ") || "as created"})`);
  }

  /** Switches the agent box to the policy of the phase it enters (the agent's override, or back to the baseline). */
  async enter(box: string, phase: "agent" | "verify"): Promise<void> {
    if (!this.managed) return;
    const p = this.opts.policies;
    await this.attach(box, phase === "agent" ? p.agent : p.baseline, `${phase} phase`);
  }

  /** Extra exec environment for a phase in the agent box: the proxy when the phase is allowlisted, else none. */
  execEnv(phase: "agent" | "verify"): Record<string, string> {
    const { baseline, agent } = this.opts.policies;
    const p = phase === "agent" ? agent : baseline;
    if (p.mode === "allowlist") return this.proxyEnv();
    // the box was created with the proxy variables: a non-allowlist phase clears them
    if (baseline.mode === "allowlist") return Object.fromEntries(Object.keys(this.proxyEnv()).map((k) => [k, ""]));
    return {};
  }

  /** Removes the trial's networks (after its containers are gone); `evolve gc` collects any this misses. */
  async removeNetworks(): Promise<void> {
    for (const n of this.networks.splice(0)) {
      await this.engine.removeNetwork(n).catch(() => {});
    }
  }
}

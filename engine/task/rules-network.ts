/**
 * Network rules: allowed_hosts only with an allowlist (baseline and phase overrides), well-formed host entries,
 * a shared verifier that cannot differ from the agent box, and MCP servers reachable under the task's own
 * declarations (platform-tasks.md, "Network access", "Verifier network", "MCP servers").
 */
import { arr, didYouMean, type Findings, showList, showPath, showValue, str, tbl } from "./findings.ts";
import { baselineNetwork, NETWORK_MODES, type NetworkMode, verifierMode } from "./model.ts";
import type { KeyPath } from "./toml-lines.ts";

const HOST_LABEL = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$/;

/** Why an allowed_hosts entry is malformed, or undefined when it is a hostname, `*.` wildcard or IP. */
export function hostProblem(h: string): string | undefined {
  if (h.includes("://")) return "is a URL; give the bare host name";
  if (h.includes("/")) return "has a path; give the bare host name";
  if (/^\[?[0-9a-f:]+\]?$/i.test(h) && h.includes(":") && h.split(":").length > 2) return undefined; // IPv6
  if (h.includes(":")) return "has a port; allowlists match host names only";
  const body = h.startsWith("*.") ? h.slice(2) : h;
  if (body.length === 0 || body.length > 253) return "is not a host name";
  if (!body.split(".").every((l) => HOST_LABEL.test(l))) return "is not a host name";
  return undefined;
}

/** Whether `host` matches an allowlist: exact names, and `*.example.com` for subdomains (not the apex). */
export function hostAllowed(host: string, allowed: readonly string[]): boolean {
  return hostMatcher(allowed)(host);
}

/**
 * {@link hostAllowed} for one allowlist and many hosts: the list is read once into a set, and a host is looked up by
 * itself and by each `*.` + suffix after one of its dots (a dot past its first character, so `*.example.com` never
 * matches the apex), which costs a host its own length instead of the list's (thousands of MCP servers against a
 * 1 MB allowlist were a scan each).
 */
export function hostMatcher(allowed: readonly string[]): (host: string) => boolean {
  const names = new Set(allowed.map((a) => a.toLowerCase()));
  return (host) => {
    const h = host.toLowerCase().replace(/\.$/, "");
    if (names.has(h)) return true;
    for (let i = h.indexOf(".", 1); i > 0; i = h.indexOf(".", i + 1)) if (names.has(`*${h.slice(i)}`)) return true;
    return false;
  };
}

function modeOf(v: unknown): NetworkMode | undefined {
  return typeof v === "string" && (NETWORK_MODES as readonly string[]).includes(v) ? (v as NetworkMode) : undefined;
}

/** One network policy declaration (baseline or phase override) at `path`. */
function checkPolicy(t: Record<string, unknown> | undefined, path: KeyPath, out: Findings, isBaseline: boolean): void {
  if (!t || t.allowed_hosts === undefined) return;
  const where = showPath(path);
  if (t.network_mode !== "allowlist") {
    const legacy = isBaseline && t.network_mode === undefined && t.allow_internet !== undefined;
    out.toml(
      "allowed_hosts_without_allowlist",
      [...path, "allowed_hosts"],
      `[${where}] allowed_hosts is set but network_mode is ${
        t.network_mode === undefined ? (isBaseline ? 'not set (defaults to "public")' : "not set") : showValue(t.network_mode)
      }: hosts apply only with network_mode = "allowlist"`,
      legacy ? `replace allow_internet with network_mode = "allowlist"` : `set network_mode = "allowlist" in [${where}], or remove allowed_hosts`,
    );
  }
  arr(t.allowed_hosts).forEach((h, i) => {
    if (typeof h !== "string") return;
    const p = hostProblem(h);
    if (p) {
      out.toml("allowed_host_invalid", [...path, "allowed_hosts", i], `[${where}] allowed_hosts entry ${showValue(h)} ${p}`, `write it as "example.com" or "*.example.com"`);
    }
  });
}

/** The agent phase's effective policy: its override, else the baseline. */
function agentPolicy(raw: Record<string, unknown>): { mode: NetworkMode; hosts: string[] } {
  const env = tbl(raw.environment) ?? {};
  const agent = tbl(raw.agent) ?? {};
  const override = modeOf(agent.network_mode);
  if (override) return { mode: override, hosts: override === "allowlist" ? strings(agent.allowed_hosts) : [] };
  const mode = baselineNetwork(env);
  return { mode, hosts: mode === "allowlist" ? strings(env.allowed_hosts) : [] };
}

function strings(v: unknown): string[] {
  return arr(v).filter((x): x is string => typeof x === "string");
}

/**
 * The network the verifier runs under: a shared verifier sees the agent box's baseline; a separate one uses
 * `[verifier.environment]`'s mode, else a copy of `[environment]`'s, with `[verifier] network_mode` overriding.
 */
export function verifierNetwork(raw: Record<string, unknown>): NetworkMode {
  const env = tbl(raw.environment) ?? {};
  const ver = tbl(raw.verifier) ?? {};
  if (verifierMode(ver) === "shared") return baselineNetwork(env);
  const venv = tbl(ver.environment);
  return modeOf(ver.network_mode) ?? baselineNetwork(venv ?? env);
}

/** Network declarations of the task, its phases and its separate verifier environment. */
export function checkNetwork(raw: Record<string, unknown>, out: Findings): void {
  const env = tbl(raw.environment);
  const ver = tbl(raw.verifier);
  checkPolicy(env, ["environment"], out, true);
  checkPolicy(tbl(raw.agent), ["agent"], out, false);
  checkPolicy(ver, ["verifier"], out, false);
  checkPolicy(tbl(ver?.environment), ["verifier", "environment"], out, true);

  if (ver && verifierMode(ver) === "shared") {
    const declared = modeOf(ver.network_mode);
    const baseline = baselineNetwork(env ?? {});
    if (declared !== undefined && declared !== baseline) {
      out.toml(
        "verifier_network_mismatch",
        ["verifier", "network_mode"],
        `[verifier] network_mode = "${declared}" differs from the agent box's "${baseline}": a shared verifier runs in that box`,
        `remove [verifier] network_mode, or set environment_mode = "separate"`,
      );
    }
  }
}

const LOCAL_HOSTS = new Set(["localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0", "main"]);
const CREDENTIAL_PARAMS = /^(token|access_token|auth|auth_token|api_key|apikey|api-key|key|secret|password|pass|pwd|client_secret|sig|signature)$/i;

/** MCP server declarations under [[environment.mcp_servers]]. */
export function checkMcp(raw: Record<string, unknown>, composeServices: readonly string[], out: Findings): void {
  const servers = tbl(raw.environment)?.mcp_servers;
  if (!Array.isArray(servers)) return;
  const policy = agentPolicy(raw);
  const allowed = hostMatcher(policy.hosts);
  const services = new Set(composeServices);
  const seen = new Set<string>();
  servers.forEach((s, i) => {
    const t = tbl(s);
    if (!t) return;
    const path: KeyPath = ["environment", "mcp_servers", i];
    const name = str(t.name);
    const label = name !== undefined ? `MCP server "${name}"` : `MCP server #${i + 1}`;
    if (name !== undefined) {
      if (seen.has(name)) out.toml("mcp_name_duplicate", [...path, "name"], `two MCP servers are named "${name}"`, "give each server a unique name");
      seen.add(name);
    }
    const transport = t.transport === undefined ? "sse" : str(t.transport);
    if (transport === "stdio") {
      if (typeof t.command !== "string" || t.command.trim() === "") {
        out.toml("mcp_stdio_without_command", path, `${label} uses transport "stdio" but has no command`, `add command = "…" (and args = [...]) to the server`);
      }
      return;
    }
    if (transport !== "sse" && transport !== "streamable-http" && transport !== "http") return; // schema reports it
    const urlText = str(t.url);
    let url: URL | undefined;
    try {
      url = urlText !== undefined ? new URL(urlText) : undefined;
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== "http:" && url.protocol !== "https:") || url.hostname === "") {
      out.toml(
        "mcp_url_invalid",
        t.url !== undefined ? [...path, "url"] : path,
        `${label} (transport "${transport}") needs an http or https url, got ${showValue(t.url)}`,
        `set url = "http://<host>:<port>/mcp"`,
      );
      return;
    }
    const credParam = [...url.searchParams.keys()].find((k) => CREDENTIAL_PARAMS.test(k));
    if (url.username !== "" || url.password !== "" || credParam !== undefined) {
      out.toml(
        "mcp_url_credential",
        [...path, "url"],
        `${label} url carries a credential (${credParam !== undefined ? `?${credParam}=` : "user:password@"}); task files are dataset content, never secrets`,
        "serve the MCP endpoint without a credential in the url (e.g. a compose service inside the task)",
      );
    }
    const host = url.hostname.toLowerCase();
    if (LOCAL_HOSTS.has(host) || /^127\./.test(host) || services.has(url.hostname)) return;
    // A one-label name is no public host whatever the policy: it can only be a compose service, and not this one.
    if (!host.includes(".") && !host.includes(":")) {
      // message and hint made only for a finding the report keeps: the did-you-mean reads every service
      out.toml(
        "mcp_url_unreachable",
        [...path, "url"],
        () => `${label} url host "${host}" is not a compose service of this task (services: ${showList(composeServices, "none, no docker-compose.yaml")})`,
        () => {
          const guess = didYouMean(host, composeServices);
          return composeServices.length === 0
            ? `add environment/docker-compose.yaml with a "${host}" service, or use localhost`
            : guess
              ? `did you mean "${guess}"?`
              : `use one of the service names, or add a "${host}" service to environment/docker-compose.yaml`;
        },
      );
      return;
    }
    const reachable = policy.mode === "public" || (policy.mode === "allowlist" && allowed(host));
    if (!reachable) {
      out.toml(
        "mcp_url_unreachable",
        [...path, "url"],
        `${label} url host "${host}" is not reachable under network_mode = "${policy.mode}"${policy.mode === "allowlist" ? ` (allowed_hosts: ${showList(policy.hosts, "none")})` : ""}`,
        policy.mode === "allowlist"
          ? `add "${host}" to allowed_hosts, or run the server as a compose service`
          : "run the server as a compose service or inside the agent's container, or allow its host",
      );
    }
  });
}

/**
 * Choosing and opening the engine: `--engine`, else `EVOLVE_ENGINE`, else podman when it is installed, else docker.
 */
import { loadConfig } from "../config.ts";
import { EvolveError } from "../errors.ts";
import { RestEngine } from "./engine.ts";
import { DOCKERD_HINT, ensureDockerSocket, ensurePodmanSocket, notFound, which } from "./socket.ts";
import type { EngineKind } from "./types.ts";

/** Which engine to use, from the argument, EVOLVE_ENGINE, or what is installed. */
export function resolveKind(kind?: string): EngineKind {
  const chosen = kind ?? process.env.EVOLVE_ENGINE;
  if (chosen) {
    if (chosen === "podman" || chosen === "docker") return chosen;
    throw new EvolveError("engine_unknown", `unknown engine "${chosen}"`, "use --engine podman or --engine docker (or EVOLVE_ENGINE)");
  }
  if (which("podman")) return "podman";
  if (which("docker")) return "docker";
  throw new EvolveError("engine_not_found", "no container engine found: neither podman nor docker is on PATH", "install one: apt-get install -y podman runc");
}

/**
 * Opens the engine: finds (podman: or starts) its REST socket under `home` and returns an Engine speaking to it.
 * Throws `engine_not_found` or `engine_unavailable` with a hint naming the fix.
 */
export async function openEngine(opts: { kind?: EngineKind; home: string }): Promise<RestEngine> {
  const kind = resolveKind(opts.kind);
  const net = loadConfig(opts.home).network;
  const guard = { allowHost: net.allow_host, allowRanges: net.allow_ranges };
  if (kind === "podman") {
    if (!process.env.CONTAINER_HOST && !which("podman")) throw notFound("podman");
    const socket = await ensurePodmanSocket(opts.home);
    return new RestEngine("podman", socket, {
      hint: "run `evolve doctor` to check podman",
      reconnect: () => ensurePodmanSocket(opts.home),
      guard,
    });
  }
  const socket = await ensureDockerSocket();
  return new RestEngine("docker", socket, { hint: DOCKERD_HINT, guard });
}

/**
 * Which container engine a command gets, and how it is guarded: `--engine`, else `EVOLVE_ENGINE`, else podman when
 * it is installed, else docker; its network guard from config.toml's `[network]`. The driver opens exactly what it
 * is given (engine/driver/open.ts): the defaults live here, one room above the config they read.
 */
import { loadConfig } from "./config.ts";
import { connectEngine } from "./driver/open.ts";
import type { RestEngine } from "./driver/engine.ts";
import { which } from "./driver/socket.ts";
import type { EngineKind } from "./driver/types.ts";
import { EvolveError } from "./errors.ts";

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
 * Harbor's `-e/--env` values for remote sandboxes (its environment_type.py), which evolve does not run: it runs its
 * boxes on this machine's podman or docker. Named so that a Harbor command line is refused with the reason, not as
 * an unknown engine.
 */
export const HARBOR_CLOUD_ENVIRONMENTS = [
  "daytona", "e2b", "modal", "runloop", "langsmith", "gke", "novita", "apple-container", "singularity",
  "islo", "tensorlake", "cwsandbox", "wandb", "use-computer", "blaxel",
] as const;

/**
 * The engine Harbor's `-e/--env NAME` asks for (`run`, `check`): `docker` and `podman` are the engine choice (as
 * `--engine`); a cloud environment is refused (`environment_unsupported`), anything else is `engine_unknown`.
 */
export function engineFromEnvFlag(env: string): EngineKind {
  const v = env.trim().toLowerCase();
  if (v === "docker" || v === "podman") return v;
  if ((HARBOR_CLOUD_ENVIRONMENTS as readonly string[]).includes(v)) {
    throw new EvolveError(
      "environment_unsupported",
      `--env ${env} is one of Harbor's cloud environments: evolve runs every trial on this machine, in local podman or docker`,
      "drop --env (evolve picks podman, else docker), or give --env podman / --env docker",
    );
  }
  throw new EvolveError("engine_unknown", `--env ${env}: unknown environment`, "evolve runs local podman or docker: --env podman or --env docker (an alias of --engine)");
}


/**
 * Opens the engine `kind` names, else the default one (resolveKind), guarded as `home`'s config.toml says: finds
 * (podman: or starts) its REST socket under `home`. Throws `engine_unknown`, `engine_not_found` or
 * `engine_unavailable` with a hint naming the fix.
 */
export async function openEngine(opts: { kind?: EngineKind; home: string }): Promise<RestEngine> {
  const kind = resolveKind(opts.kind);
  const net = loadConfig(opts.home).network;
  return connectEngine({ kind, home: opts.home, guard: { allowHost: net.allow_host, allowRanges: net.allow_ranges } });
}

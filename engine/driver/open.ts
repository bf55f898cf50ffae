/**
 * Opening the engine the caller chose: the choice (`--engine`, `EVOLVE_ENGINE`, what is installed) and the network
 * guard (config.toml's `[network]`) are decided above the driver, in engine/engine-choice.ts, so the driver reads no
 * settings of its own.
 */
import { RestEngine } from "./engine.ts";
import type { GuardPolicy } from "./hostguard.ts";
import { DOCKERD_HINT, ensureDockerSocket, ensurePodmanSocket, notFound, which } from "./socket.ts";
import type { EngineKind } from "./types.ts";

/**
 * Opens engine `kind`: finds (podman: or starts) its REST socket under `home` and returns an Engine speaking to it,
 * its boxes and builds guarded by `guard`. Throws `engine_not_found` or `engine_unavailable` with a hint naming the fix.
 */
export async function connectEngine(opts: { kind: EngineKind; home: string; guard: GuardPolicy }): Promise<RestEngine> {
  const { kind, guard } = opts;
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

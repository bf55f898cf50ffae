/**
 * Multi-container tasks (platform-tasks.md "environment/"): `environment/docker-compose.yaml`, the agent in service
 * `main`, sidecars reachable by service name.
 *
 * Why not `podman-compose` / `docker compose`: the Docker CLI here has no compose plugin, podman-compose 1.0 (Debian
 * bookworm) spawns one CLI per step and puts services in a pod with its own networking, and neither can express
 * the trial's network design (network.ts: an internal service network, the egress proxy, phase switches). So the
 * subset of compose that tasks use is run directly over the engine's REST API: per service `image` or `build`
 * (string or {context, dockerfile}), `environment` (map or list), `command`, `entrypoint`, `working_dir`, `user`,
 * `depends_on` (start order); other keys (ports, volumes, healthcheck, networks…) are logged as ignored.
 * `${VAR}`, `${VAR:-default}` and `$VAR` are interpolated from the task's resolved `[environment.env]`, as Harbor
 * passes it to compose. A build whose context or dockerfile lies outside the task is refused (engine/task/compose-build.ts).
 *
 * Placement: every service joins the trial's internal service network under its name; names resolve through
 * /etc/hosts entries (podman gives internal networks no DNS), so a service finds those started before it
 * (depends_on order) and `main` finds them all. Sidecars keep egress on a `public` baseline (as in Harbor) and
 * have none otherwise. `main` is the box: its image is environment/Dockerfile (or docker_image), else main's own
 * `image`/`build`; its CMD becomes a keep-alive, its `environment`, `working_dir` and `user` hold there (run.ts
 * startBox), the trial's /logs folders are mounted in it alone. A `working_dir` the image lacks is made at start,
 * for main and sidecars alike, as Docker does (engine.ts; in a user namespace it is then given to the box's ids).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { buildEscape, composeBuildEscapes, interpolate, serviceBuild } from "../task/compose-build.ts";
import { LABEL_HOME, LABEL_JOB, LABEL_MANAGED, LABEL_TRIAL, type Engine, type IdMapping } from "../driver/types.ts";
import { ensureBuilt, requireImage, startFailure, taskImageTag } from "./box.ts";
import { TrialFailure } from "../outcome.ts";
import type { TrialNetwork } from "./network.ts";

/** One compose service, as evolve runs it. */
export interface ComposeService {
  name: string;
  image?: string;
  build?: { context: string; dockerfile?: string };
  environment: Record<string, string>;
  command?: string[];
  entrypoint?: string[];
  workdir?: string;
  user?: string;
  dependsOn: string[];
  /** Keys evolve does not apply. */
  ignored: string[];
}

const SUPPORTED = new Set(["image", "build", "environment", "command", "entrypoint", "working_dir", "user", "depends_on", "container_name", "restart"]);

function invalid(msg: string): TrialFailure {
  return new TrialFailure("TaskInvalidError", `environment/docker-compose.yaml: ${msg}`);
}

/** A compose command string split like a shell would (quotes, backslashes), without running a shell. */
export function shellSplit(s: string): string[] {
  const out: string[] = [];
  let cur = "";
  let any = false;
  let q: '"' | "'" | null = null;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (q) {
      if (c === q) q = null;
      else if (c === "\\" && q === '"' && i + 1 < s.length) cur += s[++i];
      else cur += c;
    } else if (c === '"' || c === "'") {
      q = c;
      any = true;
    } else if (c === "\\" && i + 1 < s.length) {
      cur += s[++i];
      any = true;
    } else if (/\s/.test(c)) {
      if (any || cur) out.push(cur);
      cur = "";
      any = false;
    } else cur += c;
  }
  if (any || cur) out.push(cur);
  return out;
}

function argv(v: unknown, what: string): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === "string") return shellSplit(v);
  if (Array.isArray(v)) return v.map(String);
  throw invalid(`${what} must be a string or a list`);
}

function envOf(v: unknown, name: string, taskEnv: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  if (v === undefined || v === null) return out;
  if (Array.isArray(v)) {
    for (const e of v.map(String)) {
      const i = e.indexOf("=");
      if (i > 0) out[e.slice(0, i)] = e.slice(i + 1);
      else if (taskEnv[e] !== undefined) out[e] = taskEnv[e];
    }
  } else if (typeof v === "object") {
    for (const [k, val] of Object.entries(v as Record<string, unknown>)) {
      if (val === null || val === undefined) {
        if (taskEnv[k] !== undefined) out[k] = taskEnv[k];
      } else out[k] = String(val);
    }
  } else throw invalid(`services.${name}.environment must be a map or a list`);
  return out;
}

/**
 * Parses the compose file into services; `main` first, sidecars in depends_on order. `envTable`, the task's
 * `[environment.env]` as written, is what `task validate` judges builds by: with it, a build the validator refuses
 * (a context a secret can set, one out of the task) is refused here by the same function, before the resolved
 * values are looked at.
 */
export function parseCompose(text: string, taskEnv: Record<string, string>, envTable?: Record<string, string>): ComposeService[] {
  if (envTable !== undefined) {
    const e = composeBuildEscapes(text, envTable)[0];
    if (e) throw invalid(`services.${e.service}.build: ${e.reason}; a task builds from its own files only${e.fromSecret !== undefined ? ", never from a path a secret chooses" : ""}`);
  }
  let doc: any;
  try {
    doc = parse(interpolate(text, taskEnv));
  } catch (e) {
    throw invalid(`not valid YAML: ${(e as Error).message.split("\n")[0]}`);
  }
  const raw = doc?.services;
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw invalid("no `services:` map");
  if (!raw.main) throw invalid("no `main` service (the agent runs in `main`)");
  const services = new Map<string, ComposeService>();
  for (const [name, s] of Object.entries<any>(raw)) {
    if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(name)) throw invalid(`service name ${JSON.stringify(name)} is not usable as a host name`);
    const svc = s ?? {};
    const build = serviceBuild(svc);
    // every build input stays inside the task: the same rule `task validate` applies, checked again here since
    // interpolation from the resolved environment (secrets, host variables) can only happen at run time
    const escape = build && buildEscape(build);
    if (escape) throw invalid(`services.${name}.build: ${escape}; a task builds from its own files only`);
    if (name !== "main" && !svc.image && !build) throw invalid(`service ${name} has neither image nor build`);
    const dependsOn = Array.isArray(svc.depends_on) ? svc.depends_on.map(String) : svc.depends_on && typeof svc.depends_on === "object" ? Object.keys(svc.depends_on) : [];
    services.set(name, {
      name,
      image: svc.image ? String(svc.image) : undefined,
      build,
      environment: envOf(svc.environment, name, taskEnv),
      command: argv(svc.command, `services.${name}.command`),
      entrypoint: argv(svc.entrypoint, `services.${name}.entrypoint`),
      workdir: svc.working_dir ? String(svc.working_dir) : undefined,
      user: svc.user !== undefined ? String(svc.user) : undefined,
      dependsOn,
      ignored: Object.keys(svc).filter((k) => !SUPPORTED.has(k)),
    });
  }
  // depends_on order (main last among its dependencies: it is started as the box, after every sidecar)
  const order: ComposeService[] = [];
  const state = new Map<string, "visiting" | "done">();
  const visit = (n: string, from: string) => {
    const svc = services.get(n);
    if (!svc) throw invalid(`${from} depends on unknown service ${n}`);
    if (state.get(n) === "done") return;
    if (state.get(n) === "visiting") throw invalid(`depends_on has a cycle through ${n}`);
    state.set(n, "visiting");
    for (const d of svc.dependsOn) if (d !== "main") visit(d, n);
    state.set(n, "done");
    if (n !== "main") order.push(svc);
  };
  for (const n of services.keys()) visit(n, n);
  return [services.get("main")!, ...order];
}

/** A task's compose project for one trial. */
export class ComposeTask {
  readonly main: ComposeService;
  readonly sidecars: ComposeService[];
  private readonly images = new Map<string, string>();
  /** main's own image when the task has no Dockerfile and no docker_image. */
  mainImage?: string;

  private constructor(
    private readonly envDir: string,
    services: ComposeService[],
  ) {
    [this.main, ...this.sidecars] = services;
  }

  /**
   * The task's compose project, or undefined when it has no environment/docker-compose.yaml. `taskEnv` is the resolved
   * `[environment.env]`, `envTable` the table as written (the validator's view: see {@link parseCompose}).
   */
  static load(taskDir: string, taskEnv: Record<string, string>, envTable: Record<string, string>): ComposeTask | undefined {
    const envDir = join(taskDir, "environment");
    const file = join(envDir, "docker-compose.yaml");
    if (!existsSync(file)) return undefined;
    return new ComposeTask(envDir, parseCompose(readFileSync(file, "utf8"), taskEnv, envTable));
  }

  /** Builds (or checks) every sidecar's image, and main's when `mainFromCompose`; tags are per task digest. */
  async build(engine: Engine, o: { digest: string; force: boolean; timeoutMs: number; log: (l: string) => void; mainFromCompose: boolean }): Promise<void> {
    const services = o.mainFromCompose ? [this.main, ...this.sidecars] : this.sidecars;
    for (const s of services) {
      let image: string;
      if (s.build) {
        image = s.name === "main" ? taskImageTag(o.digest) : `${taskImageTag(o.digest)}-${s.name.toLowerCase().replace(/[^a-z0-9_.-]/g, "-")}`;
        await ensureBuilt(engine, { context: join(this.envDir, s.build.context), dockerfile: s.build.dockerfile, tag: image, key: o.digest, force: o.force, timeoutMs: o.timeoutMs, log: o.log });
      } else if (s.image) {
        await requireImage(engine, s.image);
        image = s.image;
      } else {
        throw invalid("service main has neither image nor build, and the task has no environment/Dockerfile or docker_image");
      }
      if (s.name === "main") this.mainImage = image;
      else this.images.set(s.name, image);
    }
  }

  /** Every image `build` made or checked (main's when it came from compose, then the sidecars'): what a pack carries. */
  imageRefs(): string[] {
    return [...(this.mainImage ? [this.mainImage] : []), ...this.images.values()];
  }

  /**
   * Starts the sidecars in depends_on order on the trial's service network, each named by its service; returns
   * once all run. A sidecar that exits at once is logged (one-shot init services exist), not fatal.
   */
  async start(engine: Engine, net: TrialNetwork, o: { trialId: string; jobId: string; home: string; userns?: IdMapping; track: (id: string) => void; log: (l: string) => void }): Promise<void> {
    const network = await net.serviceNetwork();
    for (const s of [this.main, ...this.sidecars]) {
      if (s.ignored.length > 0) o.log(`compose: service ${s.name}: ignored keys ${s.ignored.join(", ")}`);
    }
    for (const s of this.sidecars) {
      let id: string;
      try {
        id = await engine.create({
          image: this.images.get(s.name)!,
          cmd: s.command ?? [],
          entrypoint: s.entrypoint,
          env: s.environment,
          workdir: s.workdir,
          user: s.user,
          labels: { [LABEL_MANAGED]: "true", [LABEL_TRIAL]: o.trialId, [LABEL_JOB]: o.jobId, [LABEL_HOME]: o.home, "dev.evolve.role": "service", "dev.evolve.service": s.name },
          network,
          aliases: [s.name],
          extraHosts: net.hostsForServices(),
          // the trial's user namespace (run.ts): a service's root is no more host root than the agent's box's
          ...(o.userns ? { userns: o.userns } : {}),
        });
        o.track(id);
        await engine.start(id);
      } catch (e) {
        throw startFailure(e, `compose service ${s.name}`);
      }
      const st = await engine.inspect(id);
      const ip = st?.networks?.[network]?.ip;
      if (!ip) throw new TrialFailure("EnvironmentStartError", `compose service ${s.name} got no address on the trial's service network`);
      net.addService(s.name, ip);
      await net.attachService(id);
      o.log(`compose: service ${s.name} ${id.slice(0, 12)} started from ${this.images.get(s.name)} at ${ip}${st?.running ? "" : ` (already exited with code ${st?.exitCode})`}`);
    }
  }
}

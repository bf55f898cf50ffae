/**
 * The Engine over the Docker-compatible REST API, shared by Podman and Docker: they differ only in how the socket
 * is found (socket.ts), in the GPU request, and in the CLI used for builds (build.ts).
 *
 * Exec timeouts: every exec with a timeout carries a random marker in its environment (EVOLVE_EXEC_ID). On expiry a
 * second exec, as the same user, kills every process whose environment holds the marker, and their process groups; so a
 * command's children die with it, whatever `timeout` binary the image has or lacks. If that fails (no /bin/sh in the
 * image), the exec's host pid from `GET /exec/{id}/json` is killed directly, which works for a local engine.
 */
import { randomBytes } from "node:crypto";
import { closeSync, openSync, readFileSync, rmSync } from "node:fs";
import { join, posix } from "node:path";
import { EvolveError, firstLine } from "../errors.ts";
import { cliBuild, refuseHostLocalRefs } from "./build.ts";
import { DEFAULT_GUARD, guardNames, guardNeeded, helperImage, installGuard, keepGuardFirst, type GuardPolicy } from "./hostguard.ts";
import { RestClient, seg } from "./rest.ts";
import { Demuxer, TailBuffer } from "./stream.ts";
import { tarDirectory, tarSingleFile } from "./tar.ts";
import { mapEngineMade, mapWorkdirPath } from "./userns.ts";
import { ownersInLayer, parseIdMap } from "./layer.ts";
import { LABEL_MANAGED, MOUNT_HARDENING, type ContainerLogs, type ContainerSpec, type ContainerState, type Engine, type EngineKind, type ExecOptions, type ExecResult, type IdMapping, type ImageInfo, type LogsOptions, type PathStat } from "./types.ts";

/**
 * A guarded build's download of its ADD URLs (argv: the output folder, then the URLs): each to `<out>/<index>`,
 * streamed, with the Last-Modified time ADD would give it; the first failure's reason goes to `<out>/.error`.
 */
const FETCH_SCRIPT = String.raw`
import email.utils, os, sys, urllib.request
out = sys.argv[1]
for i, url in enumerate(sys.argv[2:]):
    try:
        with urllib.request.urlopen(url, timeout=60) as r, open(os.path.join(out, str(i)), "wb") as f:
            while True:
                b = r.read(1 << 20)
                if not b:
                    break
                f.write(b)
            lm = r.headers.get("Last-Modified")
        if lm:
            t = email.utils.parsedate_to_datetime(lm).timestamp()
            os.utime(os.path.join(out, str(i)), (t, t))
    except Exception as e:
        with open(os.path.join(out, ".error"), "w") as f:
            f.write("%s: %s" % (url, getattr(e, "reason", e)))
        sys.exit(1)
`;

/** Bytes of a box's own output `logs` keeps by default (the tail). */
const LOGS_LIMIT = 1024 * 1024;
/** How long a killed exec's stream may take to close before we stop waiting for it. */
const KILL_GRACE_MS = 3000;
/** State reads (20 ms apart) a halted box gets to stop running before halt gives up: 10 s. */
const HALT_POLLS = 500;

/** The in-container killer for a timed-out exec (argument: the marker). */
const KILL_SCRIPT = [
  'm="EVOLVE_EXEC_ID=$1"; pids=""',
  'for f in /proc/[0-9]*/environ; do',
  '  if grep -q "$m" "$f" 2>/dev/null; then p=${f#/proc/}; pids="$pids ${p%/environ}"; fi',
  "done",
  '[ -z "$pids" ] && exit 3',
  "kill -STOP $pids 2>/dev/null",
  "for p in $pids; do kill -9 -$p 2>/dev/null; done",
  "kill -9 $pids 2>/dev/null",
  "exit 0",
].join("\n");

function envList(env?: Record<string, string>): string[] | undefined {
  return env ? Object.entries(env).map(([k, v]) => `${k}=${v}`) : undefined;
}

function labelFilter(labels: Record<string, string>): string {
  return JSON.stringify({ label: Object.entries(labels).map(([k, v]) => (v === "" ? k : `${k}=${v}`)) });
}

/** The engine's name for a spec's network, and whether it is a user network (joined with the spec's aliases). */
function specNetwork(spec: ContainerSpec): { network: string; named: boolean } {
  const network = spec.network === "default" ? "bridge" : spec.network;
  return { network, named: network !== "none" && network !== "bridge" && network !== "host" };
}

/** The exit code in a list entry's Status ("Exited (137) 2 seconds ago"). */
function exitFromStatus(status: unknown): number | null {
  const m = /Exited \((-?\d+)\)/.exec(String(status ?? ""));
  return m ? Number(m[1]) : null;
}

/** An Engine speaking the Docker API on one unix socket. */
export class RestEngine implements Engine {
  readonly rest: RestClient;
  /** What public boxes and builds may reach beyond the internet (config.toml [network]). */
  readonly guard: GuardPolicy;
  private egress?: Promise<string>;

  constructor(
    readonly kind: EngineKind,
    socket: string,
    opts: { hint: string; reconnect?: () => Promise<string>; guard?: GuardPolicy },
  ) {
    this.guard = opts.guard ?? DEFAULT_GUARD;
    const reconnect = opts.reconnect;
    this.rest = new RestClient(
      socket,
      kind,
      opts.hint,
      reconnect
        ? async () => {
            this.rest.socketPath = await reconnect();
          }
        : undefined,
    );
  }

  get socket(): string {
    return this.rest.socketPath;
  }

  private version?: string;

  /**
   * Engine version and socket. Podman's `/version` takes over a second (it asks conmon and the OCI runtime), so its
   * version comes from the `Libpod-Api-Version` header of `/_ping`, and the answer is kept for this Engine's life.
   */
  async info(): Promise<{ kind: EngineKind; version: string; socket: string }> {
    if (!this.version) {
      const ping = await this.rest.request("GET", "/_ping");
      const libpod = ping.headers["libpod-api-version"];
      if (typeof libpod === "string" && libpod) this.version = libpod;
      else {
        const { data } = await this.rest.json("GET", "/version");
        this.version = String(data?.Version ?? "unknown");
      }
    }
    return { kind: this.kind, version: this.version, socket: this.socket };
  }

  /** Whether the image is present locally. */
  async imageExists(ref: string): Promise<boolean> {
    const res = await this.rest.request("GET", `/images/${seg(ref)}/json`, { ok: [404] });
    return res.status === 200;
  }

  /** Labels of a local image, or undefined when absent. */
  async imageLabels(ref: string): Promise<Record<string, string> | undefined> {
    const { status, data } = await this.rest.json("GET", `/images/${seg(ref)}/json`, { ok: [404] });
    if (status === 404) return undefined;
    return (data?.Config?.Labels ?? {}) as Record<string, string>;
  }

  /** Removes a local image (missing is fine). */
  async removeImage(ref: string): Promise<void> {
    await this.rest.request("DELETE", `/images/${seg(ref)}`, { query: { force: true }, ok: [404] });
  }

  /** Local images carrying every given label (value "" matches any value). */
  async listImages(labels: Record<string, string>): Promise<ImageInfo[]> {
    // podman 4.3 lists nothing for an image filter of two labels that both match: the engine narrows by the first,
    // every label is checked here
    const wanted = Object.entries(labels);
    const first = wanted.length > 0 ? { query: { filters: labelFilter(Object.fromEntries(wanted.slice(0, 1))) } } : {};
    const { data } = await this.rest.json("GET", "/images/json", first);
    return (data ?? [])
      .map((i: any) => ({
        id: String(i.Id),
        tags: ((i.RepoTags ?? []) as string[]).filter((t) => t !== "<none>:<none>"),
        labels: (i.Labels ?? {}) as Record<string, string>,
        sizeBytes: Number(i.Size ?? 0),
      }))
      .filter((i: ImageInfo) => wanted.every(([k, v]) => k in i.labels && (v === "" || i.labels[k] === v)));
  }

  /** Removes an image by id unless the engine refuses because something uses it (409): false then. Missing is fine. */
  async removeUnusedImage(id: string): Promise<boolean> {
    const res = await this.rest.request("DELETE", `/images/${seg(id)}`, { ok: [404, 409] });
    return res.status !== 409;
  }

  /**
   * Builds through the engine's CLI (see build.ts), its RUN steps on the guarded egress network. Podman's builder
   * runs in-process: while guarded it runs inside the network namespace of a holder container on the guarded
   * network (builderNetns), so whatever the Dockerfile makes it fetch (an ADD URL spelt through ARG, ENV or an
   * escape directive, a FROM or `--from` naming a registry on the host's loopback) leaves from there and meets the
   * guard; no parser has to recognise it. Docker's builder is the daemon, whose namespace evolve cannot choose: its
   * literal ADD URLs are fetched on the guarded network (stageRemoteAdds) and the rest is the parser's refusal.
   */
  async build(opts: Parameters<Engine["build"]>[0]): Promise<void> {
    // a Dockerfile naming a registry on this host is refused before a network or holder is made for it
    refuseHostLocalRefs({ ...opts, guard: this.guard });
    const network = await this.egressNetwork();
    const fetch = (urls: string[], dir: string) => this.guardedFetch(network, urls, dir, opts.timeoutMs);
    if (this.kind !== "podman" || !guardNeeded(this.guard)) {
      await cliBuild(this.kind, this.socket, { ...opts, network, guard: this.guard, fetch });
      return;
    }
    const holder = await this.builderNetns(network);
    try {
      await cliBuild(this.kind, this.socket, { ...opts, network, netnsFd: holder.fd, guard: this.guard, fetch });
    } finally {
      closeSync(holder.fd);
      await this.remove(holder.id);
    }
  }

  /**
   * A container of the helper image idling on `network`, and a descriptor of its network namespace opened here: the
   * namespace a podman build runs in. The descriptor is taken after the container is seen running and checked
   * against it again after, so a pid reused in between cannot hand the build the host's namespace. One per build:
   * builds never share a loopback. Throws host_guard_unavailable when no holder can be made.
   */
  private async builderNetns(network: string): Promise<{ id: string; fd: number }> {
    const image = helperImage();
    const refuse = (why: string) =>
      new EvolveError(
        "host_guard_unavailable",
        `cannot give the build a network namespace on the guarded network ${network}: ${why}`,
        "load the helper image (podman load; EVOLVE_PROXY_IMAGE names another local image with sh and sleep), or open what builds may reach in $EVOLVE_HOME/config.toml [network] (README: Configuration)",
      );
    if (!(await this.imageExists(image))) throw refuse(`the helper image ${image} is not present locally`);
    const id = await this.create({
      image,
      // pid 1 ignores an unhandled SIGTERM: the trap lets removal stop it at once instead of after 10 s
      cmd: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"],
      labels: { [LABEL_MANAGED]: "true", "dev.evolve.role": "build-netns" },
      network,
      memoryMb: 64,
    });
    let fd: number | undefined;
    try {
      await this.start(id);
      const before = await this.inspect(id);
      if (!before?.pid) throw refuse("its holder container is not running");
      try {
        fd = openSync(`/proc/${before.pid}/ns/net`, "r");
      } catch (e) {
        throw refuse(`cannot open its namespace (evolve must run as root beside rootful podman): ${firstLine(e)}`);
      }
      const after = await this.inspect(id);
      if (after?.pid !== before.pid) throw refuse("its holder container stopped");
      return { id, fd };
    } catch (e) {
      if (fd !== undefined) closeSync(fd);
      await this.remove(id);
      throw e;
    }
  }

  /**
   * Downloads `urls` into the host folder `dir` (as `0`, `1`, …) from a helper container on `network`, so a build's
   * ADD of a URL meets the same guard as its RUN steps, redirects included. Throws with the first failure's reason.
   */
  private async guardedFetch(network: string, urls: string[], dir: string, timeoutMs: number): Promise<void> {
    const image = helperImage();
    if (!(await this.imageExists(image))) throw new Error(`the helper image ${image} is not present locally (set EVOLVE_PROXY_IMAGE to a local image with python3)`);
    const id = await this.create({
      image,
      cmd: ["python3", "-c", FETCH_SCRIPT, "/out", ...urls],
      labels: { [LABEL_MANAGED]: "true", "dev.evolve.role": "build-fetch" },
      mounts: [{ host: dir, container: "/out" }],
      network,
      memoryMb: 256,
    });
    try {
      await this.start(id);
      const { data } = await this.rest.json("POST", `/containers/${seg(id)}/wait`, { timeoutMs });
      if (Number(data?.StatusCode) !== 0) {
        let why = `exit ${data?.StatusCode}`;
        try {
          why = readFileSync(join(dir, ".error"), "utf8").trim() || why;
        } catch {
          // no reason written: the exit code is all there is
        }
        throw new Error(why);
      }
    } finally {
      await this.remove(id);
      rmSync(join(dir, ".error"), { force: true });
    }
  }

  /**
   * The network of public boxes, the egress proxy and builds: evolve's own bridge behind the host guard
   * (hostguard.ts), made and guarded on first use in this process, and each later call (one per box or build) puts
   * the guard's jumps back first in the host's chains if something was inserted above them; the engine's default
   * network when the config opens everything. A failure is not kept: the next call tries again.
   */
  async egressNetwork(): Promise<string> {
    const made = this.egress !== undefined;
    this.egress ??= this.makeEgress().catch((e) => {
      this.egress = undefined;
      throw e;
    });
    const network = await this.egress;
    // a rule inserted above the guard's jumps since (CNI's, Docker's) would let this box past it
    if (made && guardNeeded(this.guard)) await keepGuardFirst(this.kind, guardNames(this.kind, this.guard).bridge, this.guard);
    return network;
  }

  private async makeEgress(): Promise<string> {
    if (!guardNeeded(this.guard)) return this.kind === "podman" ? "podman" : "bridge";
    const { network, bridge } = guardNames(this.kind, this.guard);
    // the rules match the bridge by name, so they hold before the first container joins
    await installGuard(this.kind, bridge, this.guard);
    const have = await this.rest.request("GET", `/networks/${seg(network)}`, { ok: [404] });
    if (have.status === 404) {
      // not managed-labelled: shared by every trial and build, so `evolve gc` must leave it
      const labels = { "dev.evolve.role": "egress", "dev.evolve.bridge": bridge };
      // podman's Docker API cannot name the bridge; its own API can (and leaves out the DNS plugin boxes do not need)
      const res =
        this.kind === "podman"
          ? await this.rest.request("POST", "/v4.0.0/libpod/networks/create", { json: { name: network, driver: "bridge", network_interface: bridge, dns_enabled: false, labels }, ok: [409] })
          : await this.rest.request("POST", "/networks/create", {
              json: { Name: network, Driver: "bridge", CheckDuplicate: true, Labels: labels, Options: { "com.docker.network.bridge.name": bridge } },
              ok: [409],
            });
      if (res.status === 409) return network; // another process made it first
    }
    return network;
  }

  private rootless?: Promise<boolean>;

  /** See Engine.boxUserns: podman's own info says whether its service is rootless (asked once per Engine). */
  async boxUserns(want: IdMapping): Promise<IdMapping | undefined> {
    if (this.kind !== "podman") return undefined;
    this.rootless ??= this.rest.json("GET", "/v4.0.0/libpod/info").then(({ data }) => Boolean(data?.host?.security?.rootless));
    try {
      return (await this.rootless) ? undefined : want;
    } catch (e) {
      this.rootless = undefined;
      throw e;
    }
  }

  /** Creates (does not start) a container; returns its id. */
  async create(spec: ContainerSpec): Promise<string> {
    if (spec.userns && this.kind === "podman") return this.createLibpod(spec, spec.userns);
    const { network, named } = specNetwork(spec);
    const hostConfig: Record<string, unknown> = {
      NetworkMode: network,
    };
    if (this.kind === "podman") {
      // podman takes mount options in Binds; a host path never holds ':' (see store/paths.ts)
      hostConfig.Binds = (spec.mounts ?? []).map((m) => `${m.host}:${m.container}:${[m.readOnly ? "ro" : "rw", ...MOUNT_HARDENING].join(",")}`);
    } else {
      hostConfig.Mounts = (spec.mounts ?? []).map((m) => ({ Type: "bind", Source: m.host, Target: m.container, ReadOnly: Boolean(m.readOnly) }));
    }
    if (spec.pidsLimit) hostConfig.PidsLimit = spec.pidsLimit;
    if (spec.cpus) hostConfig.NanoCpus = Math.round(spec.cpus * 1e9);
    if (spec.memoryMb) {
      hostConfig.Memory = spec.memoryMb * 1024 * 1024;
      hostConfig.MemorySwap = hostConfig.Memory; // no swap beyond the limit, so the limit is real
    }
    if (spec.extraHosts?.length) hostConfig.ExtraHosts = spec.extraHosts;
    if (spec.devices?.length) {
      if (this.kind === "podman") {
        // Podman resolves CDI names ("nvidia.com/gpu=all") given as device paths.
        hostConfig.Devices = spec.devices.map((d) => ({ PathOnHost: d, PathInContainer: "", CgroupPermissions: "rwm" }));
      } else {
        const all = spec.devices.some((d) => d.endsWith("=all"));
        hostConfig.DeviceRequests = [
          all
            ? { Driver: "", Count: -1, Capabilities: [["gpu"]] }
            : { Driver: "", DeviceIDs: spec.devices.map((d) => d.split("=").pop()!), Capabilities: [["gpu"]] },
        ];
      }
    }
    const body: Record<string, unknown> = {
      Image: spec.image,
      Cmd: spec.cmd.length > 0 ? spec.cmd : undefined,
      Entrypoint: spec.entrypoint,
      Env: envList(spec.env),
      WorkingDir: spec.workdir,
      User: spec.user,
      Labels: spec.labels,
      HostConfig: hostConfig,
    };
    if (named) body.NetworkingConfig = { EndpointsConfig: { [network]: { Aliases: spec.aliases ?? [] } } };
    const { status, data } = await this.rest.json("POST", "/containers/create", { query: { name: spec.name }, json: body, ok: [404] });
    if (status === 404) {
      throw new EvolveError("image_missing", `image ${spec.image} is not present locally: ${data?.message ?? "no such image"}`, `build or load ${spec.image} first (no registry may be reachable)`);
    }
    return String(data.Id);
  }

  /**
   * Podman's own create (a specgen), for a box in a user namespace: the compat API has no id-map field, and its
   * `UsernsMode: "auto"` needs /etc/subuid ranges and has hung the service. Same spec, same meaning as the compat
   * create above; only the user namespace is added.
   */
  private async createLibpod(spec: ContainerSpec, map: IdMapping): Promise<string> {
    const { network, named } = specNetwork(spec);
    const ids = [{ container_id: 0, host_id: map.hostId, size: map.size }];
    const limits: Record<string, unknown> = {};
    if (spec.pidsLimit) limits.pids = { limit: spec.pidsLimit };
    if (spec.cpus) limits.cpu = { quota: Math.round(spec.cpus * 100_000), period: 100_000 };
    if (spec.memoryMb) {
      const bytes = spec.memoryMb * 1024 * 1024;
      limits.memory = { limit: bytes, swap: bytes }; // no swap beyond the limit, as in the compat create
    }
    const body: Record<string, unknown> = {
      name: spec.name,
      image: spec.image,
      command: spec.cmd.length > 0 ? spec.cmd : undefined,
      entrypoint: spec.entrypoint,
      env: spec.env,
      work_dir: spec.workdir,
      // as the compat create (and Docker) does: a working folder the image lacks is made, not a refusal to start;
      // podman makes it host-side with unmapped ids, which start() then gives to the box (userns.ts)
      create_working_dir: spec.workdir ? true : undefined,
      user: spec.user,
      labels: spec.labels,
      // as the compat create does: a remove kills at once (a keep-alive `sleep` as pid 1 ignores SIGTERM)
      stop_timeout: 0,
      userns: { nsmode: "private" },
      idmappings: { uidmap: ids, gidmap: ids },
      mounts: (spec.mounts ?? []).map((m) => ({ type: "bind", source: m.host, destination: m.container, options: ["rbind", m.readOnly ? "ro" : "rw", ...MOUNT_HARDENING] })),
      netns: { nsmode: named ? "bridge" : network },
      ...(named ? { Networks: { [network]: { aliases: spec.aliases ?? [] } } } : {}),
      hostadd: spec.extraHosts?.length ? spec.extraHosts : undefined,
      resource_limits: Object.keys(limits).length > 0 ? limits : undefined,
      // podman resolves CDI names ("nvidia.com/gpu=all") given as device paths
      devices: spec.devices?.length ? spec.devices.map((d) => ({ path: d })) : undefined,
    };
    const { status, data } = await this.rest.json("POST", "/v4.0.0/libpod/containers/create", { json: body, ok: [404, 500] });
    const message = String(data?.message ?? "");
    if (status === 404 || (status === 500 && /image not known|no such image/i.test(message))) {
      throw new EvolveError("image_missing", `image ${spec.image} is not present locally: ${message || "no such image"}`, `build or load ${spec.image} first (no registry may be reachable)`);
    }
    if (status !== 201 && status !== 200) throw new EvolveError("engine_error", `podman: creating a container from ${spec.image} failed (${status}): ${message || "no reason given"}`, "");
    this.unstartedMapped.set(String(data.Id), map);
    return String(data.Id);
  }

  /** Boxes created here in a user namespace and not yet started: their engine-made folders are mapped at start. */
  private readonly unstartedMapped = new Map<string, IdMapping>();

  /**
   * Starts a created container. A box created in a user namespace is first prepared (`init`: podman mounts its
   * file system and creates a missing WORKDIR there), then what the engine made with unmapped ids is given to the
   * box's mapped ids (userns.ts), and only then does any process of the box run.
   */
  async start(id: string): Promise<void> {
    const map = this.unstartedMapped.get(id);
    if (map) {
      this.unstartedMapped.delete(id);
      await this.rest.request("POST", `/v4.0.0/libpod/containers/${seg(id)}/init`, { ok: [304] });
      await this.giveEngineMadeToBox(id, map);
    }
    await this.rest.request("POST", `/containers/${seg(id)}/start`, { ok: [304] });
  }

  /**
   * What podman's own inspect says of a box's storage (its layer driver and folders, its id maps), kept for the box's
   * life: neither changes while the container exists, so changedOwners at persist reuses what start read (one
   * REST call fewer per trial). Forgotten at remove.
   */
  private readonly layerData = new Map<string, any>();

  private async layerInspect(id: string): Promise<any> {
    const { data } = await this.rest.json("GET", `/v4.0.0/libpod/containers/${seg(id)}/json`);
    const kept = { Config: { WorkingDir: data?.Config?.WorkingDir }, GraphDriver: data?.GraphDriver, HostConfig: { IDMappings: data?.HostConfig?.IDMappings } };
    this.layerData.set(id, kept);
    return kept;
  }

  /** See start: the container's own layer (or, on a driver without one, its WORKDIR's path) mapped for the box. */
  private async giveEngineMadeToBox(id: string, map: IdMapping): Promise<void> {
    const data = await this.layerInspect(id);
    const upper = String(data?.GraphDriver?.Data?.UpperDir ?? "");
    const merged = String(data?.GraphDriver?.Data?.MergedDir ?? "");
    try {
      if (upper && merged) await mapEngineMade(upper, merged, map);
      else if (merged) await mapWorkdirPath(merged, String(data?.Config?.WorkingDir || "/"), map);
    } catch (e) {
      throw new EvolveError(
        "box_userns_failed",
        `cannot give the folders podman made for box ${id.slice(0, 12)} to its mapped root (host uid ${map.hostId}): ${firstLine(e)}`,
        "run evolve as root beside rootful podman on this host, or set [box] userns = false in config.toml",
      );
    }
  }

  /** State of a container, or undefined when it does not exist. */
  async inspect(id: string): Promise<ContainerState | undefined> {
    const { status, data } = await this.rest.json("GET", `/containers/${seg(id)}/json`, { ok: [404] });
    if (status === 404) return undefined;
    const st = data.State ?? {};
    const running = Boolean(st.Running);
    const ended = !running && st.Status !== "created" && st.Status !== "configured";
    const networks: Record<string, { ip: string; aliases: string[] }> = {};
    for (const [name, n] of Object.entries<any>(data.NetworkSettings?.Networks ?? {})) {
      networks[name] = { ip: String(n?.IPAddress ?? ""), aliases: n?.Aliases ?? [] };
    }
    const pid = Number(st.Pid ?? 0);
    const path = ((data.Config?.Env ?? []) as string[]).find((e) => typeof e === "string" && e.startsWith("PATH="))?.slice(5);
    return {
      id: String(data.Id), running, exitCode: ended ? Number(st.ExitCode ?? 0) : null, labels: data.Config?.Labels ?? {}, networks, workdir: String(data.Config?.WorkingDir || "/"), user: String(data.Config?.User ?? ""),
      ...(running && pid > 0 ? { pid } : {}), ...(path !== undefined ? { path } : {}),
    };
  }

  /**
   * Runs a command and waits for it. Output is capped (tail kept); stdin goes through a file copied into the box,
   * which needs /bin/sh in the image.
   */
  async exec(id: string, cmd: string[], opts: ExecOptions = {}): Promise<ExecResult> {
    const marker = randomBytes(8).toString("hex");
    let argv = cmd;
    if (opts.stdin !== undefined) {
      const name = `.evolve-stdin-${marker}`;
      const data = typeof opts.stdin === "string" ? Buffer.from(opts.stdin) : opts.stdin;
      await this.rest.request("PUT", `/containers/${seg(id)}/archive`, { query: { path: "/tmp" }, body: tarSingleFile(name, data, 0o644) });
      argv = ["/bin/sh", "-c", 'f="$1"; shift; exec <"$f"; rm -f "$f" 2>/dev/null; exec "$@"', "sh", `/tmp/${name}`, ...cmd];
    }
    const env = opts.timeoutMs ? { ...opts.env, EVOLVE_EXEC_ID: marker } : opts.env;
    const created = await this.rest.json("POST", `/containers/${seg(id)}/exec`, {
      json: { AttachStdin: false, AttachStdout: true, AttachStderr: true, Tty: false, Cmd: argv, Env: envList(env), User: opts.user, WorkingDir: opts.workdir },
    });
    const execId = String(created.data.Id);
    const out = new TailBuffer();
    const err = new TailBuffer();
    const demux = new Demuxer((s, p) => (s === 1 ? out : err).push(p));
    const abort = new AbortController();
    let timedOut = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    if (opts.timeoutMs) {
      timer = setTimeout(() => {
        timedOut = true;
        void (async () => {
          await opts.onTimeout?.().catch(() => undefined);
          await this.killExec(id, execId, marker, opts.user, abort);
        })();
      }, opts.timeoutMs);
    }
    try {
      await this.rest.request("POST", `/exec/${execId}/start`, {
        json: { Detach: false, Tty: false },
        onData: (c) => demux.write(c),
        signal: abort.signal,
        timeoutMs: 0,
      });
    } finally {
      clearTimeout(timer);
    }
    const exitCode = await this.execExitCode(execId, timedOut);
    return { exitCode, stdout: out.text(), stderr: err.text(), timedOut, ...(out.truncated || err.truncated ? { truncated: true } : {}) };
  }

  async logs(id: string, opts: LogsOptions = {}): Promise<ContainerLogs | undefined> {
    const limit = opts.limitBytes ?? LOGS_LIMIT;
    // one buffer for both streams: the box's log reads as it was written, stderr lines where they came
    const kept = new TailBuffer(limit);
    const demux = new Demuxer((_s, p) => kept.push(p));
    const res = await this.rest.request("GET", `/containers/${seg(id)}/logs`, {
      query: { stdout: true, stderr: true, follow: false, ...(opts.tailLines !== undefined ? { tail: opts.tailLines } : {}) },
      ok: [404],
      onData: (c) => demux.write(c),
    });
    if (res.status === 404) return undefined;
    return { text: kept.text(), truncated: kept.truncated };
  }

  /** The exit code of a finished exec (the engine may record it a moment after the stream closes). */
  private async execExitCode(execId: string, timedOut: boolean): Promise<number> {
    for (let i = 0; i < 50; i++) {
      const { status, data } = await this.rest.json("GET", `/exec/${execId}/json`, { ok: [404] });
      if (status === 404) return -1;
      if (!data.Running && data.ExitCode !== null && data.ExitCode !== undefined) return Number(data.ExitCode);
      if (timedOut && i >= 5) return -1;
      await new Promise((r) => setTimeout(r, 20));
    }
    return -1;
  }

  /** Kills a timed-out exec and everything it started (see the module comment), then stops waiting for it. */
  private async killExec(id: string, execId: string, marker: string, user: string | undefined, abort: AbortController): Promise<void> {
    const grace = setTimeout(() => abort.abort(), KILL_GRACE_MS);
    try {
      // As the command's own user: reading another user's /proc/<pid>/environ needs CAP_SYS_PTRACE, which boxes lack.
      const r = await this.exec(id, ["/bin/sh", "-c", KILL_SCRIPT, "sh", marker], { user });
      if (r.exitCode !== 0) throw new Error(r.stderr);
    } catch {
      try {
        const { data } = await this.rest.json("GET", `/exec/${execId}/json`);
        if (data?.Pid > 0) process.kill(Number(data.Pid), "SIGKILL");
      } catch {
        // The grace timer still ends the wait.
      }
    }
    grace.unref?.();
  }

  /** Whether `path` exists in the container (a HEAD on its archive: no exec, so no runtime process to spawn). */
  async pathExists(id: string, path: string): Promise<boolean> {
    const res = await this.rest.request("HEAD", `/containers/${seg(id)}/archive`, { query: { path }, ok: [404] });
    return res.status === 200;
  }

  async pathStat(id: string, path: string): Promise<PathStat | undefined> {
    const res = await this.rest.request("HEAD", `/containers/${seg(id)}/archive`, { query: { path }, ok: [404] });
    const header = res.headers["x-docker-container-path-stat"];
    if (res.status === 404 || typeof header !== "string") return undefined;
    const st = JSON.parse(Buffer.from(header, "base64").toString("utf8")) as { name?: string; size?: number; mode?: number; linkTarget?: string };
    const mode = Number(st.mode ?? 0);
    // Go's ModeDir is the top bit of a uint32: test it arithmetically, JS bit operators are signed 32-bit
    return { name: String(st.name ?? ""), size: Number(st.size ?? 0), mode, isDir: mode >= 2 ** 31, linkTarget: String(st.linkTarget ?? "") };
  }

  async changes(id: string): Promise<{ path: string; kind: "added" | "modified" | "deleted" }[]> {
    const { data } = await this.rest.json("GET", `/containers/${seg(id)}/changes`);
    const kinds = ["modified", "added", "deleted"] as const;
    return ((data ?? []) as { Path: string; Kind: number }[]).map((c) => ({ path: String(c.Path), kind: kinds[c.Kind] ?? "modified" }));
  }

  /**
   * See Engine.changedOwners: rootful podman on overlay only, read by evolve running as root (the storage is root's);
   * the box's id map is the one podman reports for it. Anything else is undefined: the caller asks the box.
   */
  async changedOwners(id: string, paths: readonly string[]): Promise<Map<string, [number, number]> | undefined> {
    if (this.kind !== "podman" || process.getuid?.() !== 0 || paths.length === 0) return undefined;
    this.rootless ??= this.rest.json("GET", "/v4.0.0/libpod/info").then(({ data }) => Boolean(data?.host?.security?.rootless));
    if (await this.rootless.catch(() => true)) return undefined;
    const data = this.layerData.get(id) ?? (await this.layerInspect(id));
    const upper = String(data?.GraphDriver?.Data?.UpperDir ?? "");
    if (data?.GraphDriver?.Name !== "overlay" || !upper.startsWith("/")) return undefined;
    const uids = parseIdMap(data?.HostConfig?.IDMappings?.UidMap);
    const gids = parseIdMap(data?.HostConfig?.IDMappings?.GidMap);
    if (!uids || !gids) return undefined;
    return ownersInLayer(upper, paths, uids, gids);
  }

  async archiveGet(id: string, path: string, onChunk: (chunk: Buffer) => unknown, signal?: AbortSignal): Promise<boolean> {
    const res = await this.rest.request("GET", `/containers/${seg(id)}/archive`, { query: { path }, ok: [404], onData: onChunk, signal, timeoutMs: 0 });
    return res.status !== 404;
  }

  async archivePut(id: string, path: string, tar: Buffer): Promise<void> {
    await this.rest.request("PUT", `/containers/${seg(id)}/archive`, { query: { path }, body: tar });
  }

  async top(id: string, columns: string): Promise<{ titles: string[]; processes: string[][] }> {
    // podman's top takes ps-style descriptors; Docker runs the host's `ps` with the arguments given
    const psArgs = this.kind === "podman" ? columns : `-o ${columns}`;
    const { data } = await this.rest.json("GET", `/containers/${seg(id)}/top`, { query: { ps_args: psArgs } });
    return { titles: (data?.Titles ?? []).map(String), processes: (data?.Processes ?? []) as string[][] };
  }

  /** Copies a host folder's contents into `containerDir` (created if missing, with root-owned 0755 parents). */
  async copyIn(id: string, hostDir: string, containerDir: string): Promise<void> {
    const dest = posix.normalize(containerDir).replace(/\/+$/, "") || "/";
    const put = (at: string, prefix: string, prefixDirs: string[]) =>
      this.rest.request("PUT", `/containers/${seg(id)}/archive`, { query: { path: at }, body: () => tarDirectory(hostDir, prefix, prefixDirs), ok: [404] });
    if ((await put(dest, "", [])).status !== 404) return;
    // Docker refuses a missing destination: extract at the deepest existing ancestor, creating the rest.
    const missing: string[] = [];
    let at = dest;
    while (at !== "/") {
      missing.unshift(posix.basename(at));
      at = posix.dirname(at);
      const head = await this.rest.request("HEAD", `/containers/${seg(id)}/archive`, { query: { path: at }, ok: [404] });
      if (head.status === 200) break;
    }
    const dirs = missing.map((_, i) => missing.slice(0, i + 1).join("/"));
    const res = await put(at, missing.join("/"), dirs);
    if (res.status === 404) throw new EvolveError("engine_error", `${this.kind}: container ${id} not found for copy into ${dest}`, "");
  }

  /**
   * See Engine.halt. Podman's libpod kill with SIGKILL returns once conmon has seen the box's init exit (~30 ms
   * here); the Docker-compatible kill also waits, but by polling its state every 250 ms, so podman is asked on its
   * own API. The state is then read back: only a box the engine reports not running counts as halted.
   */
  async halt(id: string): Promise<void> {
    const path = this.kind === "podman" ? `/v4.0.0/libpod/containers/${seg(id)}/kill` : `/containers/${seg(id)}/kill`;
    // a box that is not running is refused (409 on Docker, 500 "container state improper" on podman): the state says
    const killed = await this.rest.request("POST", path, { query: { signal: "KILL" }, ok: [404, 409] }).catch((e: unknown) => e);
    for (let i = 0; ; i++) {
      const st = await this.inspect(id);
      if (!st || !st.running) return;
      if (killed instanceof Error) throw killed;
      if (i >= HALT_POLLS) throw new EvolveError("engine_error", `${this.kind}: box ${id.slice(0, 12)} still runs after SIGKILL`, "");
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /**
   * Kills and removes a container with its anonymous volumes; missing is fine. Podman 4.3 races its own cleanup
   * process when a user-namespaced box is removed right after it is killed ("unlinkat …/userdata/shm: device or
   * resource busy", about one removal in ten here; podman#11594): the same remove a moment later goes through.
   */
  async remove(id: string): Promise<void> {
    this.unstartedMapped.delete(id);
    this.layerData.delete(id);
    for (let attempt = 0; ; attempt++) {
      try {
        await this.rest.request("DELETE", `/containers/${seg(id)}`, { query: { force: true, v: true }, ok: [404] });
        return;
      } catch (e) {
        if (attempt >= 5 || !/device or resource busy/i.test(String((e as Error).message))) throw e;
        await new Promise((r) => setTimeout(r, 100 * 2 ** attempt));
      }
    }
  }

  /** Containers (running or not) carrying every given label. */
  async list(labels: Record<string, string>): Promise<ContainerState[]> {
    const { data } = await this.rest.json("GET", "/containers/json", { query: { all: true, filters: labelFilter(labels) } });
    return (data ?? []).map((c: any) => ({
      id: String(c.Id),
      running: c.State === "running",
      exitCode: c.State === "exited" ? exitFromStatus(c.Status) : null,
      labels: c.Labels ?? {},
    }));
  }

  /** Creates a user network (internal = no route out); returns its id. */
  async createNetwork(name: string, opts: { internal: boolean; labels: Record<string, string> }): Promise<string> {
    const { data } = await this.rest.json("POST", "/networks/create", {
      json: {
        Name: name, Driver: "bridge", Internal: opts.internal, Labels: opts.labels, CheckDuplicate: true,
        // Docker gives an internal bridge a host address, and with it a route to everything listening on the host;
        // without an IPv4 on the bridge, members reach each other and nothing else (podman's internal nets already do)
        ...(opts.internal && this.kind === "docker" ? { Options: { "com.docker.network.bridge.inhibit_ipv4": "true" } } : {}),
      },
    });
    return String(data?.Id ?? data?.id ?? name);
  }

  /** Attaches a (running) container to a network, reachable there under `aliases`. */
  async connect(network: string, id: string, aliases?: string[]): Promise<void> {
    await this.rest.request("POST", `/networks/${seg(network)}/connect`, { json: { Container: id, EndpointConfig: { Aliases: aliases ?? [] } } });
  }

  /** Detaches a container from a network. */
  async disconnect(network: string, id: string): Promise<void> {
    await this.rest.request("POST", `/networks/${seg(network)}/disconnect`, { json: { Container: id, Force: true } });
  }

  /** Removes a network; missing is fine. */
  async removeNetwork(name: string): Promise<void> {
    await this.rest.request("DELETE", `/networks/${seg(name)}`, { ok: [404] });
  }

  /** Networks carrying every given label. */
  async listNetworks(labels: Record<string, string>): Promise<{ name: string; labels: Record<string, string> }[]> {
    const { data } = await this.rest.json("GET", "/networks", { query: { filters: labelFilter(labels) } });
    return (data ?? []).map((n: any) => ({ name: String(n.Name), labels: n.Labels ?? {} }));
  }

  /** Closes pooled connections (the engine's service keeps running for the next process). */
  async close(): Promise<void> {
    this.rest.close();
  }
}

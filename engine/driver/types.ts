/**
 * The container engine behind one interface. Podman and Docker both implement it by speaking the Docker-compatible
 * REST API over a unix socket (fast: no CLI start-up per step); only image builds go through the engine's CLI
 * (build.ts). Compose tasks run over the same REST API (engine/trial/compose.ts).
 * Nothing above this folder knows which engine runs.
 */

/** Which engine implementation is in use. */
export type EngineKind = "podman" | "docker";

/** Labels every container/network evolve creates carries, so `evolve gc` can find what no live trial owns. */
export const LABEL_MANAGED = "dev.evolve.managed";
export const LABEL_TRIAL = "dev.evolve.trial";
export const LABEL_JOB = "dev.evolve.job";
export const LABEL_TASK_DIGEST = "dev.evolve.task-digest";
/** On images evolve builds: the content key of what they were built from (engine/trial/box.ts envImageKey). */
export const LABEL_ENV_KEY = "dev.evolve.env-key";
/**
 * On images evolve builds: the home that built them, for `gc --images`. Not LABEL_HOME: a container inherits its
 * image's labels, and one started from the image by hand would then look like a box of that home to `evolve gc`.
 */
export const LABEL_IMAGE_HOME = "dev.evolve.image-home";
/** The evolve home that made it: gc keeps to its own home, since several homes may share one engine. */
export const LABEL_HOME = "dev.evolve.home";
/**
 * On what an `evolve worker` made (engine/executor/worker.ts): the worker's id, so its next incarnation removes what
 * a killed one left, and the cluster job it ran in, so the node's Slurm epilog does (scripts/slurm/epilog.sh).
 */
export const LABEL_WORKER = "dev.evolve.worker";
export const LABEL_WORKER_JOB = "dev.evolve.worker-job";

/** A bind mount of a host folder (the trial's own folders only; see the security defaults). */
export interface Mount {
  host: string;
  container: string;
  readOnly?: boolean;
}

/**
 * Every bind mount is made nosuid,nodev where the engine can say so per mount (podman): a setuid file or a device
 * node the box writes into a trial folder is inert on the host. Docker's API has no such per-mount option; there
 * the trial tree's 0700 folders keep other host users out, and the trial strips set-id bits when it settles.
 */
export const MOUNT_HARDENING = ["nosuid", "nodev"] as const;

/**
 * A box's user namespace as one range: box ids 0 … size-1 are host ids hostId … hostId+size-1 (uids and gids
 * alike). Box root is then an unprivileged host id: a setuid shell or a device node it makes gives nothing on the
 * host, and whatever it writes to a mounted folder is owned there by hostId.
 */
export interface IdMapping {
  hostId: number;
  size: number;
}

/** How to create one container. */
export interface ContainerSpec {
  name?: string;
  image: string;
  /** Replaces the image's CMD (never its ENTRYPOINT): the box is kept alive with e.g. ["sleep", "infinity"]. [] keeps the image's CMD. */
  cmd: string[];
  /** Replaces the image's ENTRYPOINT (compose services that declare one); the box never sets it. */
  entrypoint?: string[];
  env?: Record<string, string>;
  workdir?: string;
  user?: string;
  labels: Record<string, string>;
  mounts?: Mount[];
  /** "none" = loopback only; "default" = the engine's default network with egress; or a named network. */
  network: "none" | "default" | string;
  /** Extra /etc/hosts entries ("name:ip"). */
  extraHosts?: string[];
  cpus?: number;
  memoryMb?: number;
  /** Most processes the box may hold at once (a fork loop stops there). */
  pidsLimit?: number;
  /** GPU devices (CDI names such as "nvidia.com/gpu=all"). */
  devices?: string[];
  /** Network aliases on a named network (compose-style service names). */
  aliases?: string[];
  /** Runs the container in a user namespace with this mapping; only where `Engine.boxUserns` gave it (see there). */
  userns?: IdMapping;
}

/** The result of a finished exec. */
export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  /** True when the command was killed because it ran past `timeoutMs`. */
  timedOut: boolean;
  /** True when output went past the capture limit (16 MiB per stream) and only its tail was kept. */
  truncated?: boolean;
}

/** How to run one command in a running container. */
export interface ExecOptions {
  user?: string;
  workdir?: string;
  env?: Record<string, string>;
  /** Kill the command (and report timedOut) after this long. */
  timeoutMs?: number;
  /**
   * Called the moment `timeoutMs` passes, before the command is killed and waited for: the agent phase ends the
   * agent's every process here (trial/procs.ts), so a timed-out agent gets no time past its timeout.
   */
  onTimeout?: () => Promise<void>;
  /** Bytes fed to the command's stdin. */
  stdin?: string | Uint8Array;
}

/** How much of a container's own output `logs` returns. */
export interface LogsOptions {
  /** Only the last this many lines (the engine cuts them; default all). */
  tailLines?: number;
  /** The most bytes kept, the tail first (default 1 MiB): a chatty entrypoint cannot fill evolve's memory. */
  limitBytes?: number;
}

/** A container's own output: its main process's stdout and stderr, interleaved as they were written. */
export interface ContainerLogs {
  text: string;
  /** True when more was written than `limitBytes` (or `tailLines`) kept. */
  truncated: boolean;
}

/** What `inspect` tells about a container. */
export interface ContainerState {
  id: string;
  running: boolean;
  /** Exit code once the main process has ended. */
  exitCode: number | null;
  labels: Record<string, string>;
  /** The networks it is attached to, with its IP address on each (inspect only). */
  networks?: Record<string, { ip: string; aliases: string[] }>;
  /** The working directory a plain exec starts in (the image's WORKDIR, "/" when unset; inspect only). */
  workdir?: string;
  /** The user a plain exec runs as (the image's USER, "" when unset: root; inspect only). */
  user?: string;
  /** The host pid of the box's main process while it runs (inspect only; meaningful when evolve shares the engine's pid namespace). */
  pid?: number;
  /** The PATH a plain exec gets: the container's configured one, absent when it sets none (inspect only). */
  path?: string;
}

/** What the engine says about one path in a container (Docker's X-Docker-Container-Path-Stat). */
export interface PathStat {
  name: string;
  size: number;
  /** Go's os.FileMode bits: permissions in the low 9 bits, with type bits above (dir = 1 << 31). */
  mode: number;
  isDir: boolean;
  linkTarget: string;
}

/** A local image as `listImages` reports it. */
export interface ImageInfo {
  id: string;
  /** Its tags (`evolve-env:…`, the engine may prefix `localhost/`); none for an image a rebuild untagged. */
  tags: string[];
  labels: Record<string, string>;
  /** Its size as the engine reports it (layers shared with other images count in full). */
  sizeBytes: number;
}

/** A container engine reached through its REST socket. */
export interface Engine {
  readonly kind: EngineKind;
  /** Engine version and the socket in use, for `doctor` and trial records. */
  info(): Promise<{ kind: EngineKind; version: string; socket: string }>;
  imageExists(ref: string): Promise<boolean>;
  /** Labels of a local image, or undefined when absent. */
  imageLabels(ref: string): Promise<Record<string, string> | undefined>;
  /** Removes a local image, even one a container uses; missing is fine. */
  removeImage?(ref: string): Promise<void>;
  /** Local images carrying every given label (value "" matches any value): what `evolve gc --images` looks through. */
  listImages(labels: Record<string, string>): Promise<ImageInfo[]>;
  /**
   * Removes an image (by id) unless a container, running or stopped, uses it: false then, and the image stays.
   * Missing is fine (true).
   */
  removeUnusedImage(id: string): Promise<boolean>;
  /**
   * Builds `dockerfile` (relative to `context`; default `Dockerfile`) as `tag` with the engine's CLI; output lines
   * go to `log`. Throws EvolveError `build_timeout` past `timeoutMs`, else `build_failed` with the output's tail.
   */
  build(opts: { context: string; dockerfile?: string; tag: string; labels: Record<string, string>; timeoutMs: number; log?: (line: string) => void }): Promise<void>;
  /**
   * The network of public boxes and the egress proxy (builds use it too): the internet, but not this host's services
   * nor private/link-local ranges unless config.toml opens them (hostguard.ts). Throws host_guard_unavailable.
   */
  egressNetwork(): Promise<string>;
  /**
   * The mapping `create` applies for a box that asks for `want`, or undefined where it applies none: rootful podman
   * maps per container; rootless podman already runs every box in the user's own namespace (box root is the user);
   * Docker can only remap daemon-wide (`userns-remap` in daemon.json), which is the daemon's business, not a box's.
   */
  boxUserns(want: IdMapping): Promise<IdMapping | undefined>;
  create(spec: ContainerSpec): Promise<string>;
  start(id: string): Promise<void>;
  inspect(id: string): Promise<ContainerState | undefined>;
  exec(id: string, cmd: string[], opts?: ExecOptions): Promise<ExecResult>;
  /**
   * The container's own output (its ENTRYPOINT/CMD's stdout and stderr, not an exec's), running or exited, as the
   * engine keeps it (`GET /containers/{id}/logs`, the multiplexed stream decoded); undefined when it does not exist.
   */
  logs(id: string, opts?: LogsOptions): Promise<ContainerLogs | undefined>;
  /** Whether a path exists in the container: answered by the engine without starting a process in the box. */
  pathExists(id: string, path: string): Promise<boolean>;
  /** A path's stat as the engine reports it (no process in the box), or undefined when absent. */
  pathStat(id: string, path: string): Promise<PathStat | undefined>;
  /**
   * Owners (uid, gid as the box's own `stat` shows them) of paths the box added or modified, read by the host from
   * the container's own layer with no process in the box and no link followed (layer.ts). A path the layer does not
   * answer for is absent from the map; undefined where the engine cannot read layers at all (Docker, rootless podman,
   * evolve not root, a driver without an upper layer): the caller asks the box.
   */
  changedOwners(id: string, paths: readonly string[]): Promise<Map<string, [number, number]> | undefined>;
  /** Paths the container added, modified or deleted relative to its image. */
  changes(id: string): Promise<{ path: string; kind: "added" | "modified" | "deleted" }[]>;
  /**
   * Streams a tar of `path` (entries named from its basename) to `onChunk`; false when the path does not exist.
   * `signal` ends the transfer early. A promise returned by `onChunk` holds the stream until it settles (its
   * rejection ends the call with that error).
   */
  archiveGet(id: string, path: string, onChunk: (chunk: Buffer) => unknown, signal?: AbortSignal): Promise<boolean>;
  /** Extracts a tar into the container at `path`, which must exist. */
  archivePut(id: string, path: string, tar: Buffer): Promise<void>;
  /** The container's processes as the engine lists them, with the given ps columns ("pid,ppid,user,args"). */
  top(id: string, columns: string): Promise<{ titles: string[]; processes: string[][] }>;
  /** Copies a host folder's contents into `containerDir` (created if missing), owned by root. */
  copyIn(id: string, hostDir: string, containerDir: string): Promise<void>;
  /**
   * Kills every process of a container (SIGKILL to its init: the kernel ends the rest of its PID namespace, exec'd
   * processes included) and returns once the engine reports it not running; its file system and logs stay until
   * `remove`. Cheaper than remove, which also tears down its storage: a trial halts the boxes that mount its folders
   * before it writes there, and removes them after it settles. Missing is fine.
   */
  halt(id: string): Promise<void>;
  /** Stops (if running) and removes a container with its anonymous volumes. Missing is fine. */
  remove(id: string): Promise<void>;
  /** Containers carrying every given label (value "" matches any value). */
  list(labels: Record<string, string>): Promise<ContainerState[]>;
  createNetwork(name: string, opts: { internal: boolean; labels: Record<string, string> }): Promise<string>;
  connect(network: string, id: string, aliases?: string[]): Promise<void>;
  disconnect(network: string, id: string): Promise<void>;
  removeNetwork(name: string): Promise<void>;
  listNetworks(labels: Record<string, string>): Promise<{ name: string; labels: Record<string, string> }[]>;
  close(): Promise<void>;
}

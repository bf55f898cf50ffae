/**
 * `evolve doctor`: checks the container engine end to end — found, reachable, can build, run, exec, copy in, and
 * isolate the network — and names the exact fix for each failure. Everything it creates carries a doctor label and
 * is removed before it returns (the last check proves that).
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "./config.ts";
import { firstLine } from "./errors.ts";
import { openEngine, resolveKind } from "./engine-choice.ts";
import { which } from "./driver/socket.ts";
import { LABEL_HOME, LABEL_MANAGED, type Engine, type EngineKind, type IdMapping } from "./driver/types.ts";
import { formatDuration } from "./duration.ts";

/** One check's outcome; `fix` says what to do when it failed. */
export interface DoctorCheck {
  name: string;
  ok: boolean;
  detail: string;
  fix?: string;
}

/** All checks, and whether the engine is usable. */
export interface DoctorReport {
  ok: boolean;
  kind?: EngineKind;
  checks: DoctorCheck[];
}

/** The containers.conf drop-in podman needs on hosts with hybrid cgroups and capped ulimits (toolchain.md). */
export const PODMAN_DROP_IN_PATH = "/etc/containers/containers.conf.d/50-local.conf";
export const PODMAN_DROP_IN = `[containers]
default_ulimits = ["nofile=16384:16384", "nproc=16384:16384"]
[engine]
runtime = "runc"
`;
const DROP_IN_FIX = `write ${PODMAN_DROP_IN_PATH} with:\n${PODMAN_DROP_IN}(scripts/ci/podman.sh does this)`;
const DROP_IN_SYMPTOMS = /cgroups in hybrid mode|ulimit|rlimit|setrlimit|crun/i;
const BASE_FIX = "build the local base images (no registry is reachable): bash scripts/ci/base-images.sh";
const DNS_FIX = "podman with CNI needs the dnsname plugin for container names: apt-get install -y golang-github-containernetworking-plugin-dnsname";

const BASES = ["busybox:latest", "debian:bookworm-slim"];
const PY_IMAGE = "debian:bookworm-slim";

/** Runs every check; later checks are skipped (reported failed) when what they need is missing. */
export async function runDoctor(opts: { kind?: EngineKind; home: string }): Promise<DoctorReport> {
  const checks: DoctorCheck[] = [];
  const add = (c: DoctorCheck) => (checks.push(c), c.ok);
  const report = (kind?: EngineKind): DoctorReport => ({ ok: checks.every((c) => c.ok), kind, checks });

  let kind: EngineKind;
  try {
    kind = resolveKind(opts.kind);
  } catch (e) {
    add({ name: "engine binary", ok: false, detail: firstLine(e), fix: (e as { hint?: string }).hint });
    return report();
  }
  const bin = which(kind);
  add({ name: "engine binary", ok: Boolean(bin), detail: bin ? `${kind} at ${bin}` : `${kind} is not on PATH`, fix: bin ? undefined : `install it: apt-get install -y ${kind === "podman" ? "podman runc" : "docker.io"}` });

  let engine: Engine;
  try {
    engine = await openEngine({ kind, home: opts.home });
    const info = await engine.info();
    add({ name: "engine service", ok: true, detail: `${kind} ${info.version} on ${info.socket}` });
  } catch (e) {
    add({ name: "engine service", ok: false, detail: firstLine(e), fix: (e as { hint?: string }).hint });
    return report(kind);
  }

  const run = `doctor-${process.pid}-${Date.now().toString(36)}`;
  const labels = { [LABEL_MANAGED]: "true", [LABEL_HOME]: opts.home, "dev.evolve.doctor": run };
  const tag = `localhost/evolve-doctor-${run}`;
  const errors: string[] = [];
  const scratch = mkdtempSync(join(tmpdir(), "evolve-doctor-"));
  try {
    const base = await firstPresent(engine, BASES);
    add(base ? { name: "base image", ok: true, detail: `${base} is present` } : { name: "base image", ok: false, detail: `none of ${BASES.join(", ")} is present`, fix: BASE_FIX });

    // Build a tiny image from the base.
    let built = false;
    if (base) {
      // ends in a WORKDIR nothing in the build writes into (Harbor's hello-world shape): the engine makes it at start
      writeFileSync(join(scratch, "Dockerfile"), `FROM ${base}\nRUN echo doctor > /doctor.txt\nWORKDIR ${DOCTOR_WORKDIR}\n`);
      const t0 = Date.now();
      try {
        await engine.build({ context: scratch, tag, labels, timeoutMs: 120_000 });
        built = (await engine.imageLabels(tag))?.["dev.evolve.doctor"] === run;
        add({ name: "build", ok: built, detail: built ? `built ${base}-based image in ${formatDuration(Date.now() - t0)}` : "the built image lacks its label" });
      } catch (e) {
        errors.push(String((e as Error).message));
        add({ name: "build", ok: false, detail: firstLine(e), fix: DROP_IN_SYMPTOMS.test(String((e as Error).message)) ? DROP_IN_FIX : (e as { hint?: string }).hint });
      }
    } else add({ name: "build", ok: false, detail: "skipped: no base image", fix: BASE_FIX });

    // Run + exec + copy in, in the built image (or the base when the build failed).
    const image = built ? tag : base;
    let boxOk = false;
    if (image) {
      const t0 = Date.now();
      try {
        const id = await engine.create({ image, cmd: ["sleep", "300"], labels, network: "none" });
        await engine.start(id);
        const r = await engine.exec(id, ["sh", "-c", "echo ok-$((6*7))"]);
        boxOk = r.exitCode === 0 && r.stdout.trim() === "ok-42";
        add({ name: "run + exec", ok: boxOk, detail: boxOk ? `create, start and exec in ${formatDuration(Date.now() - t0)}` : `exec gave exit ${r.exitCode}: ${firstLine(r.stderr || r.stdout)}` });
        if (boxOk) {
          const src = join(scratch, "copy");
          mkdirSync(join(src, "sub"), { recursive: true });
          writeFileSync(join(src, "sub", "hello.sh"), "#!/bin/sh\necho copied\n", { mode: 0o755 });
          await engine.copyIn(id, src, "/doctor/in");
          const c = await engine.exec(id, ["/doctor/in/sub/hello.sh"]);
          const ok = c.exitCode === 0 && c.stdout.trim() === "copied";
          add({ name: "copy in", ok, detail: ok ? "a copied script runs with its exec bit" : `copied script gave exit ${c.exitCode}: ${firstLine(c.stderr)}` });
        } else add({ name: "copy in", ok: false, detail: "skipped: exec failed" });
      } catch (e) {
        errors.push(String((e as Error).message));
        add({ name: "run + exec", ok: false, detail: firstLine(e), fix: DROP_IN_SYMPTOMS.test(String((e as Error).message)) ? DROP_IN_FIX : undefined });
        add({ name: "copy in", ok: false, detail: "skipped: run failed" });
      }
    } else {
      add({ name: "run + exec", ok: false, detail: "skipped: no image", fix: BASE_FIX });
      add({ name: "copy in", ok: false, detail: "skipped: no image", fix: BASE_FIX });
    }

    if (kind === "podman") add(dropInCheck(errors));
    add(await networkCheck(engine, labels, run));
    add(await usernsCheck(engine, image, labels, opts.home));
    add(await workdirCheck(engine, built ? tag : undefined, labels, opts.home));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
    try {
      await Promise.all((await engine.list({ "dev.evolve.doctor": run })).map((c) => engine.remove(c.id)));
      for (const n of await engine.listNetworks({ "dev.evolve.doctor": run })) await engine.removeNetwork(n.name);
      await engine.removeImage?.(tag);
      const left = (await engine.list({ "dev.evolve.doctor": run })).length + (await engine.listNetworks({ "dev.evolve.doctor": run })).length;
      add({ name: "cleanup", ok: left === 0, detail: left === 0 ? "removed every container, network and image it made" : `${left} objects left behind`, fix: left ? "run `evolve gc`" : undefined });
    } catch (e) {
      add({ name: "cleanup", ok: false, detail: firstLine(e), fix: "run `evolve gc`" });
    }
    await engine.close();
  }
  return report(kind);
}

async function firstPresent(engine: Engine, refs: string[]): Promise<string | undefined> {
  for (const r of refs) if (await engine.imageExists(r)) return r;
  return undefined;
}

/** Whether podman's drop-in is there; only a failure when runs failed the way the drop-in fixes. */
function dropInCheck(errors: string[]): DoctorCheck {
  const dirs = ["/etc/containers/containers.conf.d", "/usr/share/containers/containers.conf.d", join(process.env.HOME ?? "/root", ".config/containers/containers.conf.d")];
  const found = dirs.flatMap((d) => {
    try {
      return readdirSync(d).filter((f) => f.endsWith(".conf")).map((f) => join(d, f));
    } catch {
      return [];
    }
  });
  const hasRunc = found.find((f) => existsSync(f) && /runtime\s*=\s*"runc"/.test(readFileSync(f, "utf8")));
  const symptom = errors.find((e) => DROP_IN_SYMPTOMS.test(e));
  if (symptom) return { name: "podman drop-in", ok: false, detail: firstLine(symptom), fix: DROP_IN_FIX };
  return { name: "podman drop-in", ok: true, detail: hasRunc ? `runc drop-in at ${hasRunc}` : "no drop-in, and none is needed (containers run)" };
}

/**
 * Network isolation, proven by a real HTTP answer: a server box on a user network, a client on that network that
 * must fetch its page by name, and a `network: none` box that must not reach the server's address at all.
 */
async function networkCheck(engine: Engine, labels: Record<string, string>, run: string): Promise<DoctorCheck> {
  const name = "network isolation";
  if (!(await engine.imageExists(PY_IMAGE))) return { name, ok: false, detail: `${PY_IMAGE} (with python3) is missing`, fix: BASE_FIX };
  const net = `evolve-doctor-${run}`;
  const token = `evolve-doctor-${run}`;
  const fetch = (url: string) => ["python3", "-c", `import urllib.request as u\nprint(u.urlopen(${JSON.stringify(url)}, timeout=3).read().decode())`];
  try {
    await engine.createNetwork(net, { internal: false, labels });
    const server = await engine.create({ image: PY_IMAGE, labels, network: net, aliases: ["doctor-srv"], cmd: ["sh", "-c", `mkdir -p /s && echo ${token} > /s/t && cd /s && exec python3 -m http.server 8080`] });
    const client = await engine.create({ image: PY_IMAGE, labels, network: net, cmd: ["sleep", "300"] });
    const closed = await engine.create({ image: PY_IMAGE, labels, network: "none", cmd: ["sleep", "300"] });
    await Promise.all([server, client, closed].map((id) => engine.start(id)));
    const ip = (await engine.inspect(server))?.networks?.[net]?.ip;
    let byIp = await engine.exec(client, fetch(`http://${ip}:8080/t`));
    for (let i = 0; i < 50 && byIp.exitCode !== 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      byIp = await engine.exec(client, fetch(`http://${ip}:8080/t`));
    }
    if (byIp.stdout.trim() !== token) return { name, ok: false, detail: `a box cannot fetch a page from another on the same network: ${firstLine(byIp.stderr.split("\n").slice(-2).join(" "))}` };
    const byName = await engine.exec(client, fetch("http://doctor-srv:8080/t"));
    if (byName.stdout.trim() !== token) return { name, ok: false, detail: "boxes cannot reach each other by network alias (no DNS on user networks)", fix: DNS_FIX };
    const blocked = await engine.exec(closed, fetch(`http://${ip}:8080/t`));
    if (blocked.stdout.includes(token)) return { name, ok: false, detail: "a network-none box fetched a page from another box: no-network tasks would not be isolated", fix: "check the engine's network setup (`podman info`); do not run no-network tasks on this host" };
    return { name, ok: true, detail: "same-network box gets the page (by address and alias); network-none box gets nothing" };
  } catch (e) {
    return { name, ok: false, detail: firstLine(e) };
  }
}

/**
 * Box root as the host sees it: `[box] userns` applied to a real box (its uid_map, its main process's host uid),
 * and no account or subordinate-id range of this host sharing those ids (a rootless user's containers would share
 * them with every trial box).
 */
async function usernsCheck(engine: Engine, image: string | undefined, labels: Record<string, string>, home: string): Promise<DoctorCheck> {
  const name = "box user namespace";
  let map: IdMapping | false;
  try {
    map = loadConfig(home).box.userns;
  } catch (e) {
    return { name, ok: false, detail: firstLine(e), fix: (e as { hint?: string }).hint };
  }
  if (map === false) return { name, ok: true, detail: "off ([box] userns = false): on a rootful engine box root is host root" };
  const last = map.hostId + map.size - 1;
  const read = (p: string) => (existsSync(p) ? readFileSync(p, "utf8") : "");
  const clash = idClash(map, { "/etc/subuid": read("/etc/subuid"), "/etc/subgid": read("/etc/subgid") }, { "/etc/passwd": read("/etc/passwd"), "/etc/group": read("/etc/group") });
  if (clash) return { name, ok: false, detail: `host ids ${map.hostId}…${last} of [box] userns are also ${clash}`, fix: "set [box] userns in config.toml to a range nothing else on this host uses (see README: Configuration)" };
  const applied = await engine.boxUserns(map);
  if (!applied) {
    return engine.kind === "docker"
      ? { name, ok: true, detail: "Docker maps ids only daemon-wide: box root is host root unless dockerd runs with userns-remap (daemon.json); evolve leaves the daemon as it is" }
      : { name, ok: true, detail: "rootless podman: every box already runs in this user's own namespace" };
  }
  if (!image) return { name, ok: false, detail: "skipped: no image", fix: BASE_FIX };
  try {
    const t0 = Date.now();
    const id = await engine.create({ image, cmd: ["sleep", "300"], labels, network: "none", userns: applied });
    await engine.start(id);
    const r = await engine.exec(id, ["cat", "/proc/self/uid_map"]);
    const pid = (await engine.inspect(id))?.pid;
    const status = pid ? read(`/proc/${pid}/status`) : "";
    const hostUid = /^Uid:\s+(\d+)/m.exec(status)?.[1];
    const got = r.stdout.trim().split(/\s+/).join(":");
    const want = `0:${map.hostId}:${map.size}`;
    if (got !== want || (hostUid !== undefined && Number(hostUid) !== map.hostId)) {
      return { name, ok: false, detail: `a box's uid_map is ${got || "(none)"} and its root is host uid ${hostUid ?? "unknown"}, not ${want}`, fix: "check that the engine is rootful podman (`podman info`), or set [box] userns = false" };
    }
    return { name, ok: true, detail: `box root is host uid ${map.hostId}, ${map.size} ids mapped (a box started in ${formatDuration(Date.now() - t0)})` };
  } catch (e) {
    return { name, ok: false, detail: firstLine(e), fix: "set [box] userns = false in config.toml to run boxes without a user namespace" };
  }
}

/** The WORKDIR of doctor's image, which no build step creates. */
const DOCTOR_WORKDIR = "/doctor-workdir";

/**
 * Box root can write a WORKDIR the image never created (the engine makes it when the box starts), under the
 * configured `[box] userns`: a task whose Dockerfile is `FROM …` + `WORKDIR /app` would otherwise score 0 for
 * evolve's own setup (engine/driver/userns.ts says why it can fail).
 */
async function workdirCheck(engine: Engine, image: string | undefined, labels: Record<string, string>, home: string): Promise<DoctorCheck> {
  const name = "box workdir";
  if (!image) return { name, ok: false, detail: "skipped: the doctor image did not build" };
  let userns: IdMapping | undefined;
  try {
    const map = loadConfig(home).box.userns;
    userns = map ? await engine.boxUserns(map) : undefined;
  } catch (e) {
    return { name, ok: false, detail: firstLine(e), fix: (e as { hint?: string }).hint };
  }
  const how = userns ? `in the user namespace (box root is host uid ${userns.hostId})` : "without a user namespace of evolve's";
  const fix = "run evolve as root beside rootful podman, or set [box] userns = false in config.toml (README: Configuration)";
  try {
    const id = await engine.create({ image, cmd: ["sleep", "300"], labels, network: "none", ...(userns ? { userns } : {}) });
    await engine.start(id);
    const r = await engine.exec(id, ["sh", "-c", "pwd && touch ./.doctor-write"], { user: "0" });
    const lines = r.stdout.trim().split("\n");
    if (r.exitCode === 0 && lines[0] === DOCTOR_WORKDIR) return { name, ok: true, detail: `box root writes a WORKDIR the image never created (${DOCTOR_WORKDIR}), ${how}` };
    return { name, ok: false, detail: `box root cannot write a WORKDIR the image never created (${DOCTOR_WORKDIR}), ${how}: ${firstLine(r.stderr || r.stdout) || `exit ${r.exitCode}`}`, fix };
  } catch (e) {
    return { name, ok: false, detail: firstLine(e), fix: (e as { hint?: string }).hint || fix };
  }
}

/**
 * What else on the host holds ids of `map`: a subordinate range (name:start:count lines) or an account or group
 * (name:x:id:… lines), as "<file> entry <name>"; undefined when nothing does.
 */
export function idClash(map: IdMapping, ranges: Record<string, string>, accounts: Record<string, string>): string | undefined {
  const end = map.hostId + map.size;
  for (const [file, text] of Object.entries(ranges)) {
    for (const line of text.split("\n")) {
      const [who, start, count] = line.trim().split(":");
      const a = Number(start);
      const n = Number(count);
      if (who && Number.isFinite(a) && Number.isFinite(n) && a < end && a + n > map.hostId) return `${file} entry ${who} (${a}…${a + n - 1})`;
    }
  }
  for (const [file, text] of Object.entries(accounts)) {
    for (const line of text.split("\n")) {
      const f = line.trim().split(":");
      const id = Number(f[2]);
      if (f[0] && f.length > 2 && f[2] !== "" && id >= map.hostId && id < end) return `${file} entry ${f[0]} (${id})`;
    }
  }
  return undefined;
}

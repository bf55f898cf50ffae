/**
 * The engine driver's behaviour, the same on every engine: containers, exec, copy, mounts, network isolation,
 * limits, builds and networks against a real daemon. tests/driver.engine.test.ts runs it on podman and tests/docker.engine.test.ts
 * on Docker. Every container, network and image carries the run's label and is removed at the end.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../../engine/driver/index.ts";
import { openEngine } from "../../engine/engine-choice.ts";
import type { RestEngine } from "../../engine/driver/engine.ts";
import type { EngineKind } from "../../engine/driver/types.ts";
import { expectCode } from "./expect-code.ts";

/** Registers the driver tests for `kind`; call inside a test file (at its top level or in a describe). */
export function driverSuite(kind: EngineKind): void {
  describe(kind, () => suite(kind));
}

function suite(kind: EngineKind): void {
  const RUN = `drv${process.pid}${Date.now().toString(36)}`;
  // Not dev.evolve.managed: another test file's `gc` would otherwise remove these boxes mid-test.
  const LABELS = { "dev.evolve.test": RUN, "dev.evolve.role": "driver-test" };
  const DEBIAN = "debian:bookworm-slim";
  const BUSYBOX = "busybox:latest";

  let engine: Engine;
  let home: string;

  /** Python one-liner that prints the body of `url` or exits 1; used as a real HTTP client inside boxes. */
  const fetchCmd = (url: string) => [
    "python3",
    "-c",
    `import urllib.request as u, sys\ntry:\n print(u.urlopen(${JSON.stringify(url)}, timeout=3).read().decode())\nexcept Exception as e:\n print(e, file=sys.stderr); sys.exit(1)`,
  ];

  async function box(extra: Partial<Parameters<Engine["create"]>[0]> = {}): Promise<string> {
    const id = await engine.create({ image: DEBIAN, cmd: ["sleep", "infinity"], labels: LABELS, network: "none", ...extra });
    await engine.start(id);
    return id;
  }

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), "evolve-driver-"));
    engine = await openEngine({ kind, home });
  });

  afterAll(async () => {
    if (!engine) return;
    await Promise.all((await engine.list({ "dev.evolve.test": RUN })).map((c) => engine.remove(c.id)));
    for (const n of await engine.listNetworks({ "dev.evolve.test": RUN })) await engine.removeNetwork(n.name);
    for (const img of [`localhost/${RUN}-ok`, `localhost/${RUN}-slow`, `localhost/${RUN}-bad`, `localhost/${RUN}-listed`]) await engine.removeImage?.(img);
    await engine.close();
    rmSync(home, { recursive: true, force: true });
  });

  describe("one box", () => {
    let id: string;
    let hostOut: string;

    beforeAll(async () => {
      hostOut = mkdtempSync(join(tmpdir(), "evolve-mount-"));
      chmodSync(hostOut, 0o777);
      id = await box({ env: { FOO: "from-create" }, user: "nobody", workdir: "/work", mounts: [{ host: hostOut, container: "/out" }] });
    });
    afterAll(() => rmSync(hostOut, { recursive: true, force: true }));

    it("runs a command with its stdout, stderr and exit code apart", async () => {
      const r = await engine.exec(id, ["sh", "-c", "echo out; echo err >&2; exit 7"]);
      expect(r).toMatchObject({ exitCode: 7, stdout: "out\n", stderr: "err\n", timedOut: false });
    });

    it("uses the box's env, user and workdir, and an exec's own overrides", async () => {
      const mine = await engine.exec(id, ["sh", "-c", 'echo "$FOO $(id -un) $(pwd)"']);
      expect(mine.stdout.trim()).toBe("from-create nobody /work");
      const other = await engine.exec(id, ["sh", "-c", 'echo "$FOO $BAR $(id -u) $(pwd)"'], { env: { FOO: "x", BAR: "y" }, user: "0", workdir: "/tmp" });
      expect(other.stdout.trim()).toBe("x y 0 /tmp");
    });

    it("feeds stdin", async () => {
      const r = await engine.exec(id, ["sh", "-c", "tr a-z A-Z; echo done"], { stdin: "hello\nworld\n" });
      expect(r.stdout).toBe("HELLO\nWORLD\ndone\n");
    });

    it("kills a command past its timeout, children included, and says so", async () => {
      const t0 = Date.now();
      const r = await engine.exec(id, ["sh", "-c", "sleep 31 & sleep 32; echo never"], { timeoutMs: 800 });
      expect(Date.now() - t0).toBeLessThan(5000);
      expect(r.timedOut).toBe(true);
      expect([137, -1]).toContain(r.exitCode);
      expect(r.stdout).not.toContain("never");
      // No live (non-zombie) process of that command is left.
      const ps = await engine.exec(id, ["sh", "-c", 'for p in /proc/[0-9]*; do c=$(tr "\\0" " " < $p/cmdline 2>/dev/null); [ -n "$c" ] && echo "$c"; done'], { user: "0" });
      expect(ps.stdout).not.toMatch(/sleep 3[12]/);
    });

    it("copies a tree in with nested folders, exec bits, long paths, owned by root", async () => {
      const src = mkdtempSync(join(tmpdir(), "evolve-copy-"));
      const deep = join(src, "a", "b".repeat(60), "c".repeat(60), "d".repeat(60));
      mkdirSync(deep, { recursive: true });
      writeFileSync(join(src, "top.txt"), "top\n");
      writeFileSync(join(src, "a", "run.sh"), "#!/bin/sh\necho ran\n", { mode: 0o755 });
      const longName = `${"e".repeat(120)}.txt`; // no '/' split fits ustar: needs the GNU longname record
      writeFileSync(join(deep, longName), "deep\n");
      try {
        await engine.copyIn(id, src, "/data/in");
        const rel = `a/${"b".repeat(60)}/${"c".repeat(60)}/${"d".repeat(60)}/${longName}`;
        const r = await engine.exec(id, ["sh", "-c", `cat top.txt && ./a/run.sh && cat ${rel} && stat -c %u:%a top.txt a/run.sh && test ! -x top.txt`], { workdir: "/data/in" });
        expect(r.stderr).toBe("");
        expect(r.stdout).toBe("top\nran\ndeep\n0:644\n0:755\n");
        expect(r.exitCode).toBe(0);
      } finally {
        rmSync(src, { recursive: true, force: true });
      }
    });

    it("bind-mounts a host folder the box writes into and the host reads", async () => {
      const r = await engine.exec(id, ["sh", "-c", "echo from-box > /out/result.txt"]);
      expect(r.exitCode).toBe(0);
      expect(readFileSync(join(hostOut, "result.txt"), "utf8")).toBe("from-box\n");
    });

    it("inspects a running box and lists it by label", async () => {
      const st = await engine.inspect(id);
      expect(st).toMatchObject({ running: true, exitCode: null, labels: LABELS });
      const listed = await engine.list({ "dev.evolve.test": RUN, "dev.evolve.role": "" });
      expect(listed.map((c) => c.id)).toContain(id);
      expect(await engine.list({ "dev.evolve.test": `${RUN}-other` })).toEqual([]);
    });

    it("reads the box from outside: stat, changes, archive out and in, processes", async () => {
      await engine.exec(id, ["sh", "-c", "mkdir -p /work/sub && printf hello > /work/sub/f.txt"], { user: "root" });
      expect(await engine.pathStat(id, "/work/sub")).toMatchObject({ name: "sub", isDir: true });
      expect(await engine.pathStat(id, "/work/sub/f.txt")).toMatchObject({ name: "f.txt", size: 5, isDir: false });
      expect(await engine.pathStat(id, "/work/none")).toBeUndefined();
      const changes = await engine.changes(id);
      expect(changes).toContainEqual({ path: "/work/sub/f.txt", kind: "added" });
      const chunks: Buffer[] = [];
      expect(await engine.archiveGet(id, "/work/sub/f.txt", (c) => chunks.push(c))).toBe(true);
      const tar = Buffer.concat(chunks);
      expect(tar.subarray(0, 5).toString()).toBe("f.txt");
      expect(await engine.archiveGet(id, "/work/none", () => {})).toBe(false);
      await engine.exec(id, ["mkdir", "-p", "/work/copy"], { user: "root" });
      await engine.archivePut(id, "/work/copy", tar);
      expect((await engine.exec(id, ["cat", "/work/copy/f.txt"])).stdout).toBe("hello");
      const top = await engine.top(id, "pid,args");
      expect(top.processes.some((row) => row.join(" ").includes("sleep"))).toBe(true);
    });
  });

  describe("a box's own output", () => {
    /** Polls `fn` until it gives a value (generous bound: a loaded CI host). */
    async function until<T>(fn: () => Promise<T | undefined>, what: string): Promise<T> {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const v = await fn();
        if (v !== undefined) return v;
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    }

    it("logs: the main process's output decoded whole, the last lines, bounded, an exec's output not in it", async () => {
      // many frames (the engine sends a frame per line or per read): no 8-byte header may be left in the text
      const script = 'i=1; while [ $i -le 3000 ]; do echo "line $i"; i=$((i+1)); done; exec sleep infinity';
      const id = await box({ cmd: ["sh", "-c", script] });
      await engine.exec(id, ["sh", "-c", "echo from-exec; echo from-exec >&2"]);
      const want = Array.from({ length: 3000 }, (_, i) => `line ${i + 1}\n`).join("");
      const all = await until(async () => {
        const l = await engine.logs(id);
        return l && l.text.length >= want.length ? l : undefined;
      }, "the box's 3000 lines");
      expect(all).toEqual({ text: want, truncated: false });
      expect(await engine.logs(id, { tailLines: 2 })).toEqual({ text: "line 2999\nline 3000\n", truncated: false });
      const small = (await engine.logs(id, { limitBytes: 100 }))!;
      expect(small.truncated).toBe(true);
      expect(small.text.length).toBeLessThanOrEqual(100);
      expect(want.endsWith(small.text)).toBe(true);
    });

    it("logs of a box whose main process exited: its stdout and stderr both; a missing box has none", async () => {
      const id = await box({ cmd: ["sh", "-c", "echo going down; echo 'fatal: no config' >&2; exit 3"] });
      await until(async () => ((await engine.inspect(id))?.running === false ? true : undefined), "the box to exit");
      expect((await engine.inspect(id))?.exitCode).toBe(3);
      const l = (await engine.logs(id))!;
      // each stream's lines whole; how the engine interleaves two streams is its own (conmon reads two pipes)
      expect(l.text.split("\n").sort()).toEqual(["", "fatal: no config", "going down"]);
      expect(l.truncated).toBe(false);
      expect(await engine.logs(`${RUN}-no-such-box`)).toBeUndefined();
    });
  });

  describe("networks", () => {
    const net = `${RUN}-net`;
    let server: string;
    let serverIp: string;
    const token = `token-${RUN}`;

    beforeAll(async () => {
      await engine.createNetwork(net, { internal: false, labels: LABELS });
      server = await box({ network: "default", cmd: ["sh", "-c", `mkdir -p /srv && echo ${token} > /srv/t && cd /srv && exec python3 -m http.server 8080`] });
      await engine.connect(net, server, ["srv"]);
      const st = await engine.inspect(server);
      serverIp = Object.entries(st!.networks ?? {}).find(([n]) => n !== net)![1].ip;
      expect(serverIp).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      // Wait until the server answers from inside its own box.
      for (let i = 0; i < 50; i++) {
        if ((await engine.exec(server, fetchCmd("http://127.0.0.1:8080/t"))).exitCode === 0) break;
        await new Promise((r) => setTimeout(r, 100));
      }
    });

    it("a default-network box gets the server's real answer; a network-none box gets none", async () => {
      const [open, closed] = await Promise.all([box({ network: "default" }), box({ network: "none" })]);
      const ok = await engine.exec(open, fetchCmd(`http://${serverIp}:8080/t`));
      expect(ok.stdout.trim()).toBe(token);
      const blocked = await engine.exec(closed, fetchCmd(`http://${serverIp}:8080/t`));
      expect(blocked.exitCode).not.toBe(0);
      expect(blocked.stdout).not.toContain(token);
      expect(blocked.stderr).toMatch(/unreachable|No route|Name or service/i);
    });

    it("a box on a user network reaches another by its alias, and can be disconnected", async () => {
      const client = await box({ network: net });
      const r = await engine.exec(client, fetchCmd("http://srv:8080/t"));
      expect(r.stdout.trim()).toBe(token);
      await engine.disconnect(net, server);
      const st = await engine.inspect(server);
      expect(Object.keys(st!.networks ?? {})).not.toContain(net);
      expect(await engine.listNetworks({ "dev.evolve.test": RUN })).toEqual([{ name: net, labels: LABELS }]);
    });
  });

  describe("limits and lifecycle", () => {
    it("applies cpus and memory; a memory hog is OOM-killed with 137", async () => {
      const id = await box({ cpus: 0.5, memoryMb: 64 });
      const q = await engine.exec(id, ["sh", "-c", "cat /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us"]);
      expect(q.stdout).toMatch(/^50000\b/);
      const hog = await engine.exec(id, ["python3", "-c", "b = bytearray(200 * 1024 * 1024); print('survived')"]);
      expect(hog.exitCode).toBe(137);
      expect(hog.stdout).not.toContain("survived");
    });

    it("removes a box, stopped or running, and a second remove is fine", async () => {
      const id = await box();
      await engine.remove(id);
      expect(await engine.inspect(id)).toBeUndefined();
      await engine.remove(id);
      const exited = await engine.create({ image: BUSYBOX, cmd: ["sh", "-c", "exit 4"], labels: LABELS, network: "none" });
      await engine.start(exited);
      let st = await engine.inspect(exited);
      for (let i = 0; i < 50 && st?.running; i++) {
        await new Promise((r) => setTimeout(r, 50));
        st = await engine.inspect(exited);
      }
      expect(st).toMatchObject({ running: false, exitCode: 4 });
      await engine.remove(exited);
    });

    it("halts a box: every process ends, exec'd and detached ones too, and the box stays until it is removed", async () => {
      const id = await box();
      const mark = `halt-${RUN}`;
      // a process an exec left behind, detached from it, in its own session
      await engine.exec(id, ["sh", "-c", `setsid bash -c 'exec -a ${mark} sleep 1000' </dev/null >/dev/null 2>&1 &`]);
      const onHost = () => spawnSync("pgrep", ["-f", mark], { encoding: "utf8" }).stdout.trim();
      for (let i = 0; i < 100 && onHost() === ""; i++) await new Promise((r) => setTimeout(r, 20));
      expect(onHost()).not.toBe("");
      await engine.halt(id);
      // nothing of the box runs the moment halt returns: no state polled for, no process left on the host
      expect(await engine.inspect(id)).toMatchObject({ running: false });
      expect(onHost()).toBe("");
      // its file system and its own output are still there to read
      expect(await engine.pathExists(id, "/etc/hostname")).toBe(true);
      await engine.halt(id);
      await engine.remove(id);
      expect(await engine.inspect(id)).toBeUndefined();
      await engine.halt(id);
    });

    it("a missing image is a clear error naming it", async () => {
      const e = await expectCode(() => engine.create({ image: `localhost/${RUN}-absent:1`, cmd: ["true"], labels: LABELS, network: "none" }), "image_missing");
      expect(e.message).toContain(`${RUN}-absent`);
    });
  });

  describe("build", () => {
    let ctx: string;
    beforeAll(() => {
      ctx = mkdtempSync(join(tmpdir(), "evolve-build-"));
      writeFileSync(join(ctx, "entry.sh"), '#!/bin/sh\necho entry-ran > /tmp/entry-marker\nexec "$@"\n', { mode: 0o755 });
      writeFileSync(join(ctx, "Dockerfile"), `FROM ${BUSYBOX}\nCOPY entry.sh /entry.sh\nRUN echo built > /built\nENTRYPOINT ["/entry.sh"]\nCMD ["echo", "cmd-should-not-run"]\n`);
      writeFileSync(join(ctx, "Bad.Dockerfile"), `FROM ${BUSYBOX}\nRUN echo "the-step-${RUN}-broke" && exit 3\n`);
      writeFileSync(join(ctx, "Slow.Dockerfile"), `FROM ${BUSYBOX}\nRUN echo ${RUN} && sleep 30\n`);
    });
    afterAll(() => rmSync(ctx, { recursive: true, force: true }));

    it("builds with labels, reuses its cache, and keeps the ENTRYPOINT when CMD is replaced", async () => {
      const tag = `localhost/${RUN}-ok`;
      await engine.build({ context: ctx, tag, labels: { "dev.evolve.task-digest": "sha256:abc" }, timeoutMs: 60_000 });
      expect(await engine.imageExists(tag)).toBe(true);
      expect(await engine.imageLabels(tag)).toMatchObject({ "dev.evolve.task-digest": "sha256:abc" });
      expect(await engine.imageLabels(`localhost/${RUN}-nope`)).toBeUndefined();
      const lines: string[] = [];
      await engine.build({ context: ctx, tag, labels: { "dev.evolve.task-digest": "sha256:abc" }, timeoutMs: 60_000, log: (l) => lines.push(l) });
      expect(lines.join("\n")).toMatch(/Using cache|CACHED/);

      const id = await engine.create({ image: tag, cmd: ["sleep", "300"], labels: LABELS, network: "none" });
      await engine.start(id);
      const r = await engine.exec(id, ["sh", "-c", "cat /tmp/entry-marker /built; cat /proc/1/cmdline | tr '\\0' ' '"]);
      expect(r.stdout).toBe("entry-ran\nbuilt\nsleep 300 ");
    });

    it("lists images by label with their size, and removes one only once no container uses it", async () => {
      const tag = `localhost/${RUN}-listed`;
      const mark = { "dev.evolve.test": RUN, "dev.evolve.env-key": `sha256:${RUN}` };
      await engine.build({ context: ctx, tag, labels: mark, timeoutMs: 60_000 });
      const listed = await engine.listImages(mark);
      expect(listed).toHaveLength(1);
      expect(listed[0].tags).toContain(`${tag}:latest`);
      expect(listed[0].labels).toMatchObject(mark);
      expect(listed[0].sizeBytes).toBeGreaterThan(0);
      expect(await engine.listImages({ "dev.evolve.test": `${RUN}-none` })).toEqual([]);

      const id = await engine.create({ image: tag, cmd: ["sleep", "300"], labels: LABELS, network: "none" });
      expect(await engine.removeUnusedImage(listed[0].id)).toBe(false);
      expect(await engine.imageExists(tag)).toBe(true);
      await engine.remove(id);
      expect(await engine.removeUnusedImage(listed[0].id)).toBe(true);
      expect(await engine.imageExists(tag)).toBe(false);
      expect(await engine.listImages(mark)).toEqual([]);
      expect(await engine.removeUnusedImage(listed[0].id)).toBe(true);
    });

    it("a failing build says why, with the last lines of its output", async () => {
      const e = await expectCode(() => engine.build({ context: ctx, dockerfile: "Bad.Dockerfile", tag: `localhost/${RUN}-bad`, labels: {}, timeoutMs: 60_000 }), "build_failed");
      expect(e.message).toContain(`the-step-${RUN}-broke`);
      // the first line is the cause: the failing step and what it printed, in either engine's builder
      expect(e.message.split("\n")[0]).toBe(`building localhost/${RUN}-bad failed (exit ${/\(exit (\d+)\)/.exec(e.message)?.[1]}): RUN echo "the-step-${RUN}-broke" && exit 3: the-step-${RUN}-broke`);
      // the failed step's container is not left behind (Docker's classic builder keeps it without --force-rm)
      const { data } = await (engine as RestEngine).rest.json("GET", "/containers/json", { query: { all: true } });
      expect((data as { Command?: string }[]).filter((c) => String(c.Command ?? "").includes(`the-step-${RUN}-broke`))).toEqual([]);
    });

    it("a build past its timeout is stopped quickly", async () => {
      const t0 = Date.now();
      await expectCode(() => engine.build({ context: ctx, dockerfile: "Slow.Dockerfile", tag: `localhost/${RUN}-slow`, labels: {}, timeoutMs: 2000 }), "build_timeout");
      expect(Date.now() - t0).toBeLessThan(12_000);
      expect(await engine.imageExists(`localhost/${RUN}-slow`)).toBe(false);
    });
  });
}

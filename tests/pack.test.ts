/**
 * Portable packs (issue 22 §4), the checks unpack makes before anything is used: crafted packs — hostile member
 * names, links, devices, duplicates, extra and missing members, changed bytes, a tar or gzip bomb — are refused
 * with their stable codes, and nothing is written outside the staging folder. No container engine: the engine
 * test (tests/pack.engine.test.ts) packs, unpacks and runs on podman.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import { datasetDigest } from "../engine/dataset.ts";
import { entryBlocks, endBlocks, type TarEntry } from "../engine/driver/tar.ts";
import type { Engine } from "../engine/driver/types.ts";
import { EvolveError } from "../engine/errors.ts";
import { MANIFEST_NAME, PACK_FORMAT, type PackManifest } from "../engine/pack/manifest.ts";
import { unpackFile } from "../engine/pack/pack.ts";
import { readPack } from "../engine/pack/read.ts";
import { openStore } from "../engine/store/index.ts";
import { digestFiles, listTaskFiles } from "../engine/task/digest.ts";

const scratch = mkdtempSync(join(tmpdir(), "evolve-pack-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const sha = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");
const TASK_TOML = "[task]\nname = \"demo/one\"\n";
const INSTRUCTION = "Say hello.\n";
const SOLVE = "#!/bin/sh\necho hi\n";

/** The members of a good one-task pack (no images, no agents), and its manifest. */
function goodPack(): { manifest: PackManifest; files: TarEntry[] } {
  const files: TarEntry[] = [
    { name: "tasks/t1/task.toml", type: "file", mode: 0o644, data: Buffer.from(TASK_TOML) },
    { name: "tasks/t1/instruction.md", type: "file", mode: 0o644, data: Buffer.from(INSTRUCTION) },
    { name: "tasks/t1/solution/solve.sh", type: "file", mode: 0o755, data: Buffer.from(SOLVE) },
  ];
  const digest = `sha256:${"0".repeat(64)}`;
  const manifest: PackManifest = {
    format: PACK_FORMAT,
    created_at: new Date().toISOString(),
    source: { kind: "dataset", ref: "demo@1.0" },
    dataset: { name: "demo", version: "1.0", digest: datasetDigest([{ name: "demo/one", digest }]), tasks: [{ name: "demo/one", digest, folder: "t1" }] },
    images: [],
    agents: [],
    members: files.map((f) => ({ path: f.name, size: f.data!.length, sha256: sha(Buffer.from(f.data!)) })),
  };
  return { manifest, files };
}

let n = 0;
/** Writes a pack: the manifest first (unless `noManifest`), then `entries`, then `trailer` bytes; gzip unless told. */
function writePack(manifest: PackManifest | undefined, entries: (TarEntry | Buffer[])[], o: { gzip?: boolean; trailer?: Buffer } = {}): string {
  const parts: Buffer[] = [];
  if (manifest) parts.push(...entryBlocks({ name: MANIFEST_NAME, type: "file", mode: 0o644, data: Buffer.from(JSON.stringify(manifest)) }));
  for (const e of entries) parts.push(...(Array.isArray(e) ? e : entryBlocks(e)));
  parts.push(endBlocks());
  if (o.trailer) parts.push(o.trailer);
  const tar = Buffer.concat(parts);
  const file = join(scratch, `p${++n}.evolvepack`);
  writeFileSync(file, o.gzip === false ? tar : gzipSync(tar));
  return file;
}

/** An entry whose type flag is `flag` (e.g. "3", a character device), which the tar writer has no name for. */
function withFlag(name: string, flag: string): Buffer[] {
  const [h] = entryBlocks({ name, type: "file", mode: 0o644, data: new Uint8Array() });
  const b = Buffer.from(h);
  b.write(flag, 156, 1, "ascii");
  b.fill(0x20, 148, 156);
  let sum = 0;
  for (const x of b) sum += x;
  b.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8, "ascii");
  return [b];
}

/** readPack into a fresh staging folder; the error's code, or "ok". */
async function codeOf(file: string, limits?: { maxBytes: number; maxMembers: number }): Promise<string> {
  const stage = join(scratch, `stage${++n}`);
  mkdirSync(stage);
  try {
    await readPack(file, stage, limits);
    return "ok";
  } catch (e) {
    if (e instanceof EvolveError) return e.code;
    throw e;
  }
}

describe("reading a pack", () => {
  it("stages every member the manifest lists, with its bytes and execute bit, and returns the manifest", async () => {
    const { manifest, files } = goodPack();
    const stage = join(scratch, "good");
    mkdirSync(stage);
    const r = await readPack(writePack(manifest, files), stage);
    expect(r.manifest.dataset.name).toBe("demo");
    expect(r.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(readFileSync(join(stage, "tasks/t1/task.toml"), "utf8")).toBe(TASK_TOML);
    expect(statSync(join(stage, "tasks/t1/solution/solve.sh")).mode & 0o111).not.toBe(0);
    expect(statSync(join(stage, "tasks/t1/instruction.md")).mode & 0o111).toBe(0);
    // an uncompressed pack reads the same
    expect(await codeOf(writePack(manifest, files, { gzip: false }))).toBe("ok");
  });

  it("refuses a pack whose first member is not the manifest, or that has none, or is no tar", async () => {
    const { manifest, files } = goodPack();
    expect(await codeOf(writePack(undefined, [...files]))).toBe("pack_corrupt");
    expect(await codeOf(writePack(undefined, []))).toBe("pack_corrupt");
    const junk = join(scratch, "junk.evolvepack");
    writeFileSync(junk, gzipSync(Buffer.from("not a tar at all".repeat(100))));
    expect(await codeOf(junk)).toBe("pack_corrupt");
    const badJson = writePack(undefined, [{ name: MANIFEST_NAME, type: "file", mode: 0o644, data: Buffer.from("{nope") }]);
    expect(await codeOf(badJson)).toBe("pack_corrupt");
    void manifest;
  });

  it("refuses a folder, a FIFO-like non-file or a missing path as the pack itself (pack_unreadable)", async () => {
    expect(await codeOf(scratch)).toBe("pack_unreadable");
    expect(await codeOf(join(scratch, "absent.evolvepack"))).toBe("pack_unreadable");
  });

  it("refuses climbing and absolute member names, in the tar or in the manifest, writing nothing outside the stage", async () => {
    const { manifest, files } = goodPack();
    expect(await codeOf(writePack(manifest, [...files, { name: "../evil", type: "file", mode: 0o644, data: Buffer.from("x") }]))).toBe("pack_member_refused");
    expect(await codeOf(writePack(manifest, [{ name: "tasks/t1/../../evil", type: "file", mode: 0o644, data: Buffer.from("x") }, ...files]))).toBe("pack_member_refused");
    expect(await codeOf(writePack(manifest, [{ name: "/tmp/evil", type: "file", mode: 0o644, data: Buffer.from("x") }]))).toBe("pack_member_refused");
    const listed = { ...manifest, members: [...manifest.members, { path: "tasks/t1/../../../evil", size: 1, sha256: sha("x") }] };
    expect(await codeOf(writePack(listed, files))).toBe("pack_member_refused");
    expect(existsSync(join(scratch, "evil"))).toBe(false);
    expect(readdirSync(scratch).filter((f) => f.includes("evil"))).toEqual([]);
  });

  it("refuses symbolic and hard links, devices and folder entries", async () => {
    const { manifest, files } = goodPack();
    expect(await codeOf(writePack(manifest, [{ name: "tasks/t1/link", type: "symlink", mode: 0o777, linkname: "/etc/passwd" }, ...files]))).toBe("pack_member_refused");
    expect(await codeOf(writePack(manifest, [...files, { name: "tasks/t1/hard", type: "hardlink", mode: 0o644, linkname: "tasks/t1/task.toml" }]))).toBe("pack_member_refused");
    expect(await codeOf(writePack(manifest, [withFlag("tasks/t1/dev", "3"), ...files]))).toBe("pack_member_refused");
    expect(await codeOf(writePack(manifest, [{ name: "tasks/t1", type: "dir", mode: 0o755 }, ...files]))).toBe("pack_member_refused");
  });

  it("refuses a member twice, a member the manifest does not list, and a listed member that is missing", async () => {
    const { manifest, files } = goodPack();
    expect(await codeOf(writePack(manifest, [...files, files[0]]))).toBe("pack_member_refused");
    expect(await codeOf(writePack(manifest, [...files, { name: "tasks/t1/extra.txt", type: "file", mode: 0o644, data: Buffer.from("x") }]))).toBe("pack_corrupt");
    expect(await codeOf(writePack(manifest, files.slice(0, 2)))).toBe("pack_corrupt");
    // a manifest listing a member outside a task folder, or a folder without task.toml
    const stray = { ...manifest, members: [...manifest.members, { path: "elsewhere.txt", size: 1, sha256: sha("x") }] };
    expect(await codeOf(writePack(stray, [...files, { name: "elsewhere.txt", type: "file", mode: 0o644, data: Buffer.from("x") }]))).toBe("pack_corrupt");
  });

  it("refuses a member whose bytes differ from the manifest's digest or size", async () => {
    const { manifest, files } = goodPack();
    const changed = files.map((f, i) => (i === 1 ? { ...f, data: Buffer.from("Say hullo.\n") } : f));
    expect(await codeOf(writePack(manifest, changed))).toBe("pack_digest_mismatch");
    const shorter = files.map((f, i) => (i === 1 ? { ...f, data: Buffer.from("Say\n") } : f));
    expect(await codeOf(writePack(manifest, shorter))).toBe("pack_digest_mismatch");
  });

  it("refuses bombs: a member over its declared size, totals over the limits, bytes past the end marker", async () => {
    const { manifest, files } = goodPack();
    const bigger = files.map((f, i) => (i === 1 ? { ...f, data: Buffer.alloc(1024 * 1024, 0x41) } : f));
    expect(await codeOf(writePack(manifest, bigger))).toBe("pack_too_large");
    expect(await codeOf(writePack(manifest, files), { maxBytes: 10, maxMembers: 100 })).toBe("pack_too_large");
    expect(await codeOf(writePack(manifest, files), { maxBytes: 1e9, maxMembers: 2 })).toBe("pack_too_large");
    // 64 MiB of zeros after the end marker compress to ~64 KiB: read on, they would be decompressed for ever
    expect(await codeOf(writePack(manifest, files, { trailer: Buffer.alloc(64 * 1024 * 1024) }))).toBe("pack_too_large");
  });
});

describe("unpacking", () => {
  it("refuses a task or dataset whose content is not the digest its manifest records, or a version held here with other content, before any image is loaded or anything is published", async () => {
    const { manifest, files } = goodPack();
    const home = join(scratch, "home");
    mkdirSync(home);
    const store = openStore(home);
    // an engine that fails on any call: unpack must refuse before reaching it
    const engine = new Proxy({}, { get: () => () => { throw new Error("the engine was called"); } }) as unknown as Engine;
    try {
      const file = writePack({ ...manifest, images: [{ ref: "evolve-env:abc" }], members: [...manifest.members, { path: "images.tar", size: 3, sha256: sha("abc") }] }, [...files, { name: "images.tar", type: "file", mode: 0o644, data: Buffer.from("abc") }]);
      await expect(unpackFile(store, home, engine, file)).rejects.toMatchObject({ code: "pack_digest_mismatch" });
      expect(store.listDatasets()).toEqual([]);
      expect(readdirSync(join(home, "tmp"))).toEqual([]);
      // the task as staged, digested: the manifest's digest right, the check passes on to the dataset's
      const staged = join(scratch, "staged");
      for (const f of files) {
        mkdirSync(join(staged, f.name, ".."), { recursive: true });
        writeFileSync(join(staged, f.name), Buffer.from(f.data!), { mode: f.mode });
      }
      const real = await digestFiles(await listTaskFiles(join(staged, "tasks/t1")));
      const right = { ...manifest, dataset: { ...manifest.dataset, tasks: [{ name: "demo/one", digest: real, folder: "t1" }] } };
      await expect(unpackFile(store, home, engine, writePack(right, files))).rejects.toMatchObject({ code: "pack_digest_mismatch", message: expect.stringContaining("dataset demo@1.0") });
      expect(store.listDatasets()).toEqual([]);
      // every digest right, but demo@1.0 is held here with other content: refused before the engine is reached
      const tasks = [{ name: "demo/one", digest: real }];
      const whole = {
        ...right,
        dataset: { ...right.dataset, digest: datasetDigest(tasks) },
        images: [{ ref: "evolve-env:abc" }],
        members: [...right.members, { path: "images.tar", size: 3, sha256: sha("abc") }],
      };
      store.putDataset({ name: "demo", version: "1.0", digest: `sha256:${"1".repeat(64)}`, tasks: [], status: "active", created_at: new Date().toISOString(), updated_at: new Date().toISOString() });
      await expect(unpackFile(store, home, engine, writePack(whole, [...files, { name: "images.tar", type: "file", mode: 0o644, data: Buffer.from("abc") }]))).rejects.toMatchObject({ code: "dataset_version_exists" });
    } finally {
      await store.close();
    }
  });
});

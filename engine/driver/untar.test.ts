/**
 * The streaming tar reader (engine/driver/untar.ts) against archives it did not write: the system `tar` in pax and
 * GNU formats (long names, symlinks, modes, a file bigger than a block) and evolve's own writer, fed in awkward
 * chunk sizes, since the engines' archive streams arrive in arbitrary pieces.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { endBlocks, entryBlocks } from "./tar.ts";
import { META_RECORD_LIMIT, TarReader, readTar, type TarHeader } from "./untar.ts";

const LONG = `${"deep/".repeat(30)}${"n".repeat(120)}.txt`;

function sample(): string {
  const dir = mkdtempSync(join(tmpdir(), "evolve-untar-"));
  const src = join(dir, "src");
  mkdirSync(join(src, ...LONG.split("/").slice(0, -1)), { recursive: true });
  writeFileSync(join(src, LONG), "long\n");
  writeFileSync(join(src, "big.bin"), Buffer.alloc(70_000, 7), { mode: 0o755 });
  symlinkSync("big.bin", join(src, "link"));
  return dir;
}

/** Reads `archive` fed in chunks of `size` bytes. */
function readChunked(archive: Buffer, size: number) {
  const out: { h: TarHeader; data: Buffer }[] = [];
  let parts: Buffer[] = [];
  const r = new TarReader({ entry: () => (parts = []), data: (c) => parts.push(Buffer.from(c)), end: (h) => out.push({ h, data: Buffer.concat(parts) }) });
  for (let i = 0; i < archive.length; i += size) r.write(archive.subarray(i, i + size));
  r.finish();
  return out;
}

describe("TarReader", () => {
  for (const format of ["pax", "gnu"]) {
    it(`reads ${format} archives from the system tar in any chunking`, () => {
      const dir = sample();
      const file = join(dir, `a.${format}.tar`);
      const r = spawnSync("tar", ["-cf", file, `--format=${format}`, "-C", join(dir, "src"), "."]);
      expect(r.status).toBe(0);
      const archive = readFileSync(file);
      for (const size of [1, 511, 4096, archive.length]) {
        const entries = readChunked(archive, size);
        const byName = new Map(entries.map((e) => [e.h.name, e]));
        expect(byName.get(LONG)?.data.toString()).toBe("long\n");
        const big = byName.get("big.bin")!;
        expect(big.h).toMatchObject({ type: "file", size: 70_000, mode: 0o755 });
        expect(big.data.equals(Buffer.alloc(70_000, 7))).toBe(true);
        expect(byName.get("link")?.h).toMatchObject({ type: "symlink", linkname: "big.bin" });
        expect(byName.get("deep")?.h.type).toBe("dir");
      }
    });
  }

  it("reads evolve's own writer, GNU longnames included", () => {
    const archive = Buffer.concat([
      ...entryBlocks({ name: "x".repeat(150), type: "file", mode: 0o600, data: Buffer.from("a") }),
      ...entryBlocks({ name: "d", type: "dir", mode: 0o700 }),
      endBlocks(),
    ]);
    const entries = readTar(archive);
    expect(entries.map((e) => [e.header.name, e.header.type, e.header.mode, e.data.toString()])).toEqual([
      ["x".repeat(150), "file", 0o600, "a"],
      ["d", "dir", 0o700, ""],
    ]);
  });

  it("refuses a header record too big to hold before reading its body (a pax or longname record is buffered whole)", () => {
    const blocks = entryBlocks({ name: "n".repeat(200), type: "file", mode: 0o644, data: Buffer.from("x") });
    // the first block is the GNU longname record's header: claim a body far over the limit
    const h = Buffer.from(blocks[0]);
    h.write((META_RECORD_LIMIT + 1).toString(8).padStart(11, "0") + "\0", 124, 12, "ascii");
    h.fill(0x20, 148, 156);
    let sum = 0;
    for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8, "ascii");
    const r = new TarReader({ entry: () => {} });
    expect(() => r.write(h)).toThrow(`tar: a header record of ${META_RECORD_LIMIT + 1} bytes is over the ${META_RECORD_LIMIT}-byte limit`);
  });

  it("refuses an archive cut off inside an entry", () => {
    const archive = Buffer.concat(entryBlocks({ name: "f", type: "file", mode: 0o644, data: Buffer.alloc(2000) }));
    expect(() => readTar(archive.subarray(0, 1024))).toThrow(/ended inside an entry/);
  });
});

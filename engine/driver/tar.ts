/**
 * A minimal tar writer for `copyIn` (`PUT /containers/{id}/archive`): the engines only accept tar, and a ustar
 * stream of a folder is a page of code, where a dependency would be a whole archiver. Entries are regular files
 * (with their mode bits, so executables stay executable), folders and symlinks, all owned by root. Names longer than
 * ustar's 100 bytes use the 155-byte prefix field when they split at a '/', else a GNU longname record, which every
 * engine's (Go archive/tar) extractor reads.
 */
import { lstat, readdir, readFile, readlink } from "node:fs/promises";
import { join } from "node:path";

const BLOCK = 512;

/** One entry to write. `name` is relative, '/'-separated; folders end without a slash (added here). */
export interface TarEntry {
  name: string;
  /** `hardlink`: another name of a file written earlier in the same archive (`linkname`, its archive name). */
  type: "file" | "dir" | "symlink" | "hardlink";
  mode: number;
  /** File contents (files only). */
  data?: Uint8Array;
  /** Symlink target, or a hard link's earlier entry. */
  linkname?: string;
  mtime?: number;
}

function octal(value: number, width: number): string {
  // width includes the trailing NUL.
  const s = Math.floor(value).toString(8);
  if (s.length > width - 1) throw new Error(`tar: value ${value} does not fit in ${width - 1} octal digits`);
  return s.padStart(width - 1, "0") + "\0";
}

function header(fields: { name: string; prefix?: string; mode: number; size: number; mtime: number; typeflag: string; linkname?: string }): Buffer {
  const h = Buffer.alloc(BLOCK, 0);
  const put = (s: string, off: number, len: number) => {
    const b = Buffer.from(s, "utf8");
    if (b.length > len) throw new Error(`tar: field too long: ${s}`);
    b.copy(h, off);
  };
  put(fields.name, 0, 100);
  put(octal(fields.mode & 0o7777, 8), 100, 8);
  put(octal(0, 8), 108, 8); // uid: root
  put(octal(0, 8), 116, 8); // gid: root
  put(octal(fields.size, 12), 124, 12);
  put(octal(fields.mtime, 12), 136, 12);
  h.fill(0x20, 148, 156); // checksum is computed with its own field as spaces
  put(fields.typeflag, 156, 1);
  put(fields.linkname ?? "", 157, 100);
  put("ustar\0", 257, 6);
  put("00", 263, 2);
  put("root", 265, 32);
  put("root", 297, 32);
  put(fields.prefix ?? "", 345, 155);
  let sum = 0;
  for (const byte of h) sum += byte;
  put(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8);
  return h;
}

function padding(size: number): Buffer {
  const rest = size % BLOCK;
  return Buffer.alloc(rest === 0 ? 0 : BLOCK - rest, 0);
}

/** Splits a long name into ustar (prefix, name), or undefined when no '/' gives parts that fit. */
function splitUstar(name: string): { prefix: string; name: string } | undefined {
  const bytes = Buffer.byteLength(name);
  if (bytes <= 100) return { prefix: "", name };
  for (let i = name.indexOf("/"); i !== -1; i = name.indexOf("/", i + 1)) {
    const prefix = name.slice(0, i);
    const rest = name.slice(i + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(rest) <= 100 && rest.length > 0) return { prefix, name: rest };
  }
  return undefined;
}

/** The blocks of one entry (with a GNU longname/longlink record before it when needed). */
export function entryBlocks(e: TarEntry): Buffer[] {
  const out: Buffer[] = [];
  const name = e.type === "dir" ? `${e.name.replace(/\/+$/, "")}/` : e.name;
  const mtime = e.mtime ?? Math.floor(Date.now() / 1000);
  const longRecord = (flag: "L" | "K", value: string) => {
    const data = Buffer.from(value + "\0", "utf8");
    out.push(header({ name: "././@LongLink", mode: 0o644, size: data.length, mtime: 0, typeflag: flag }), data, padding(data.length));
  };
  let split = splitUstar(name);
  if (!split) {
    longRecord("L", name);
    split = { prefix: "", name: name.replace(/[^\x20-\x7e]/g, "_").slice(0, 99) };
  }
  let linkname = e.linkname ?? "";
  if (Buffer.byteLength(linkname) > 100) {
    longRecord("K", linkname);
    linkname = linkname.replace(/[^\x20-\x7e]/g, "_").slice(0, 99);
  }
  const data = e.type === "file" ? Buffer.from(e.data ?? new Uint8Array()) : Buffer.alloc(0);
  const typeflag = e.type === "file" ? "0" : e.type === "dir" ? "5" : e.type === "hardlink" ? "1" : "2";
  out.push(header({ ...split, mode: e.mode, size: data.length, mtime, typeflag, linkname }));
  if (data.length) out.push(data, padding(data.length));
  return out;
}

/** The end-of-archive marker: two zero blocks. */
export function endBlocks(): Buffer {
  return Buffer.alloc(BLOCK * 2, 0);
}

/**
 * Streams a tar of `hostDir`'s contents, each name prefixed with `prefix` (e.g. "tests" or ""). `prefixDirs` are
 * folder entries written first (the missing parents of the destination). Files are read one at a time, so memory
 * stays at the largest file rather than the whole tree.
 */
export async function* tarDirectory(hostDir: string, prefix = "", prefixDirs: string[] = []): AsyncGenerator<Buffer> {
  for (const d of prefixDirs) yield* entryBlocks({ name: d, type: "dir", mode: 0o755 });
  const join2 = (a: string, b: string) => (a ? `${a}/${b}` : b);
  async function* walk(dir: string, rel: string): AsyncGenerator<Buffer> {
    const names = (await readdir(dir)).sort();
    for (const n of names) {
      const full = join(dir, n);
      const r = join2(rel, n);
      const st = await lstat(full);
      const mtime = Math.floor(st.mtimeMs / 1000);
      if (st.isDirectory()) {
        yield* entryBlocks({ name: r, type: "dir", mode: st.mode, mtime });
        yield* walk(full, r);
      } else if (st.isFile()) {
        yield* entryBlocks({ name: r, type: "file", mode: st.mode, mtime, data: await readFile(full) });
      } else if (st.isSymbolicLink()) {
        yield* entryBlocks({ name: r, type: "symlink", mode: 0o777, mtime, linkname: await readlink(full) });
      }
      // Sockets, fifos and devices have no place in a task tree: skipped.
    }
  }
  yield* walk(hostDir, prefix);
  yield endBlocks();
}

/** A tar holding one file (stdin for an exec), as one buffer. */
export function tarSingleFile(name: string, data: Uint8Array, mode = 0o644): Buffer {
  return Buffer.concat([...entryBlocks({ name, type: "file", mode, data }), endBlocks()]);
}

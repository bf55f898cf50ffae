/**
 * What `evolve upload` is given, made safe to read: a job folder walked without following any link, or a
 * `.tar.gz` unpacked into the import's own working folder. Either way the result is a list of regular files under
 * one root, and every entry not taken is listed with its reason:
 * - an archive entry with an absolute path or a `.`/`..`/empty part, a symbolic or hard link, a device, FIFO or other
 *   special entry, a second entry of the same path, or a path below a file is skipped (nothing is ever written
 *   outside the working folder: only folders and regular files are made, each by a plain relative path);
 * - a folder's links and special files are skipped the same way (a FIFO is never opened, a link never followed);
 * - a file over the per-file limit (5 GiB) is not unpacked: its trial is skipped (`trial_too_large`) by upload.ts;
 * - the archive file over the ceiling (`limits.uploads.job_archive_bytes`), or more than that many bytes of files
 *   once unpacked (a tar bomb), or more than MAX_ENTRIES entries, refuses the upload (`upload_too_large`).
 */
import { closeSync, createReadStream, mkdirSync, openSync, writeSync, type Dirent } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { Writable } from "node:stream";
import { createGunzip } from "node:zlib";
import { EvolveError } from "../errors.ts";
import { openRegularFile, RegularFileError } from "../regular-file.ts";
import { TarReader, type TarHeader } from "../driver/untar.ts";
import type { SkippedEntry } from "./imports.ts";

/** One file a Harbor trial may hold at most (platform-upload.md "Bounds"): a trial with a larger one is skipped. */
export const MAX_UPLOAD_FILE = 5 * 1024 ** 3;
/** The most skipped entries listed one by one. */
const MAX_LISTED = 1000;
/** The most entries an upload may hold (files and folders together). */
export const MAX_ENTRIES = 1_000_000;

/** The bounds an upload is read under. */
export interface UploadBounds {
  /** The archive ceiling: the `.tar.gz`'s bytes, and the bytes of files it (or a folder) holds. */
  archiveBytes: number;
  /** One file's limit; a larger one is not read and its trial is skipped. */
  fileBytes: number;
}

/** A regular file of the upload: its path relative to the root, '/'-separated, and its size. */
export interface SourceFile {
  rel: string;
  size: number;
}

/** The upload made readable: the root its files lie under, those files, what was skipped, and the files too large. */
export interface UploadSource {
  root: string;
  files: SourceFile[];
  skipped: SkippedEntry[];
  /** Files over the per-file limit, left unread (relative paths). */
  tooLarge: SourceFile[];
}

const tooLarge = (what: string, bytes: number, limit: number) =>
  new EvolveError("upload_too_large", `${what}: ${bytes} bytes, over the ${limit}-byte ceiling (limits.uploads.job_archive_bytes)`, "split the job, or raise limits.uploads.job_archive_bytes in $EVOLVE_HOME/config.toml");

/** Whether `p` is a path to read as a `.tar.gz` archive (else a folder). */
export const isUploadArchive = (p: string) => /\.(tar\.gz|tgz)$/i.test(p);

/** Walks the job folder `root` (never following a link; special files skipped), bounded by `b`. */
export async function walkFolder(root: string, b: UploadBounds): Promise<UploadSource> {
  const st = await lstat(root).catch(() => undefined);
  if (!st) throw new EvolveError("upload_unreadable", `${root}: no such file or folder`, "give a Harbor job folder or its .tar.gz");
  if (st.isSymbolicLink()) throw new EvolveError("upload_unreadable", `${root} is a symbolic link: it is never followed`, "give the job folder itself");
  if (!st.isDirectory()) throw new EvolveError("upload_unreadable", `${root} is not a folder, nor a .tar.gz`, "give a Harbor job folder or its .tar.gz");
  const out: UploadSource = { root, files: [], skipped: [], tooLarge: [] };
  let total = 0;
  let entries = 0;
  const walk = async (dir: string, rel: string): Promise<void> => {
    let list: Dirent[];
    try {
      list = await readdir(dir, { withFileTypes: true });
    } catch (e) {
      out.skipped.push({ path: rel || ".", reason: `unreadable folder (${(e as NodeJS.ErrnoException).code ?? "error"})` });
      return;
    }
    for (const e of list.sort((x, y) => (x.name < y.name ? -1 : 1))) {
      if (++entries > MAX_ENTRIES) throw new EvolveError("upload_too_large", `${root} holds more than ${MAX_ENTRIES} entries`, "split the job");
      const r = rel ? `${rel}/${e.name}` : e.name;
      const p = join(dir, e.name);
      if (e.isSymbolicLink()) out.skipped.push({ path: r, reason: "a symbolic link: never followed" });
      else if (e.isDirectory()) await walk(p, r);
      else if (!e.isFile()) out.skipped.push({ path: r, reason: "not a regular file (a FIFO, a socket or a device)" });
      else {
        const s = await lstat(p);
        if (s.size > b.fileBytes) {
          out.tooLarge.push({ rel: r, size: s.size });
          continue;
        }
        total += s.size;
        if (total > b.archiveBytes) throw tooLarge(`the files of ${root}`, total, b.archiveBytes);
        out.files.push({ rel: r, size: s.size });
      }
    }
  };
  await walk(root, "");
  return out;
}

/** Why an archive entry's name is refused, or undefined when it is a plain relative path. */
function badName(name: string): string | undefined {
  if (name.startsWith("/")) return "an absolute path";
  if (name.includes("\0") || name.includes("\\")) return "a name with a NUL or a backslash";
  const parts = name.split("/");
  if (parts.some((p) => p === ".." )) return "a path climbing out with ..";
  if (parts.some((p) => p === "" || p === ".")) return "not a plain relative path";
  return undefined;
}

/**
 * Unpacks the `.tar.gz` at `file` into `dest` (made here, empty) and returns what it holds, as walkFolder does. Only
 * folders and regular files are made, by plain relative paths, with `wx` (an existing name is never opened).
 */
export async function unpackArchive(file: string, dest: string, b: UploadBounds): Promise<UploadSource> {
  let opened: { fd: number; size: number };
  try {
    opened = openRegularFile(file);
  } catch (e) {
    if (!(e instanceof RegularFileError)) throw e;
    throw new EvolveError("upload_unreadable", `cannot read ${file}: ${e.reason}`, "give a Harbor job folder or its .tar.gz");
  }
  if (opened.size > b.archiveBytes) {
    closeSync(opened.fd);
    throw tooLarge(file, opened.size, b.archiveBytes);
  }
  mkdirSync(dest, { recursive: true });
  const out: UploadSource = { root: dest, files: [], skipped: [], tooLarge: [] };
  const kinds = new Map<string, "dir" | "file">();
  let total = 0;
  let entries = 0;
  let inflated = 0;
  let fd: number | undefined;
  let current: SourceFile | undefined;
  let failure: Error | undefined;
  // the list of skipped entries is bounded too: an archive of a million devices names the first ones and a count
  let unlisted = 0;
  const skip = (path: string, reason: string) => void (out.skipped.length < MAX_LISTED ? out.skipped.push({ path: path.slice(0, 300), reason }) : unlisted++);
  const reader = new TarReader({
    entry(h: TarHeader) {
      if (++entries > MAX_ENTRIES) throw (failure ??= new EvolveError("upload_too_large", `${file} holds more than ${MAX_ENTRIES} entries`, "split the job"));
      const name = h.name;
      const bad = badName(name);
      if (bad) return skip(name, bad);
      if (h.type === "symlink") return skip(name, `a symbolic link (to ${h.linkname.slice(0, 200)}): never followed`);
      if (h.type === "hardlink") return skip(name, `a hard link (to ${h.linkname.slice(0, 200)}): links are not unpacked`);
      if (h.type === "other") return skip(name, "a special file (a device, a FIFO or another non-regular entry)");
      const parts = name.split("/");
      for (let i = 1; i < parts.length; i++) {
        if (kinds.get(parts.slice(0, i).join("/")) === "file") return skip(name, `lies below the file ${parts.slice(0, i).join("/")}`);
      }
      const had = kinds.get(name);
      if (had !== undefined) {
        if (h.type === "dir" && had === "dir") return;
        return skip(name, "appears twice in the archive: the first entry is kept");
      }
      for (let i = 1; i < parts.length; i++) kinds.set(parts.slice(0, i).join("/"), "dir");
      const abs = join(dest, ...parts);
      if (h.type === "dir") {
        kinds.set(name, "dir");
        mkdirSync(abs, { recursive: true });
        return;
      }
      kinds.set(name, "file");
      if (h.size > b.fileBytes) {
        out.tooLarge.push({ rel: name, size: h.size });
        return;
      }
      total += h.size;
      if (total > b.archiveBytes) throw (failure ??= tooLarge(`${file} unpacked`, total, b.archiveBytes));
      mkdirSync(join(dest, ...parts.slice(0, -1)), { recursive: true });
      fd = openSync(abs, "wx", 0o644);
      current = { rel: name, size: h.size };
    },
    data(chunk: Buffer) {
      if (fd !== undefined) for (let off = 0; off < chunk.length; ) off += writeSync(fd, chunk, off);
    },
    end() {
      if (fd !== undefined) {
        closeSync(fd);
        fd = undefined;
        out.files.push(current!);
        current = undefined;
      }
    },
  });
  try {
    await pipeline(
      createReadStream("", { fd: opened.fd }),
      createGunzip(),
      new Writable({
        write(chunk: Buffer, _enc, cb) {
          try {
            // a gzip bomb of padding: more bytes than its files and their headers could take is refused
            inflated += chunk.length;
            if (inflated > b.archiveBytes + 1024 * (entries + 1024)) throw (failure ??= tooLarge(`${file} unpacked`, inflated, b.archiveBytes));
            reader.write(chunk);
            cb();
          } catch (e) {
            cb(e as Error);
          }
        },
        final(cb) {
          try {
            reader.finish();
            cb();
          } catch (e) {
            cb(e as Error);
          }
        },
      }),
    );
  } catch (e) {
    if (fd !== undefined) closeSync(fd);
    if (failure) throw failure;
    if (e instanceof EvolveError) throw e;
    throw new EvolveError("upload_unreadable", `cannot unpack ${file}: ${(e as Error).message.split("\n")[0]}`, "give a .tar.gz of a Harbor job folder (evolve job download -o job.tar.gz writes one)");
  }
  if (unlisted > 0) out.skipped.push({ path: "…", reason: `${unlisted} more entries skipped, not listed` });
  return out;
}

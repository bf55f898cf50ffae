/**
 * Reading a pack into a staging folder, checking as it streams (issue 22 §4): the manifest must come first, and
 * every later member must be a regular file the manifest lists, at a plain relative path, once, of the size it
 * declares and with its sha256; at the end nothing listed may be missing. Bytes past what the manifest declares (a
 * gzip or tar bomb, data after the end marker) stop the read. Nothing in the staging folder is used until this has
 * returned. The tar parser is the engine's own (driver/untar.ts), as for `agent import`.
 */
import { createHash, type Hash } from "node:crypto";
import { closeSync, createReadStream, mkdirSync, openSync, readSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { TarReader, type TarHeader } from "../driver/untar.ts";
import { EvolveError, firstLine } from "../errors.ts";
import { openRegularFile, RegularFileError } from "../regular-file.ts";
import { DEFAULT_LIMITS, MANIFEST_LIMIT, MANIFEST_NAME, memberPathProblem, parseManifest, type PackLimits, type PackManifest, type PackMember } from "./manifest.ts";

/** Tar framing a member may add beyond its bytes: its header, a long-name record, padding. */
const FRAMING_PER_MEMBER = 4 * 1024;

/**
 * Streams `file` (a tar, gzip-compressed or not) into `stage` (an empty folder), checking every member against the
 * manifest; returns the manifest (and its own sha256, for a user to compare with what `pack` printed) once every member is there and matches. Throws pack_unreadable, pack_corrupt,
 * pack_member_refused, pack_digest_mismatch or pack_too_large; what was written to `stage` is then the caller's to
 * remove.
 */
export async function readPack(file: string, stage: string, limits: PackLimits = DEFAULT_LIMITS): Promise<{ manifest: PackManifest; sha256: string }> {
  let opened: { fd: number; size: number };
  try {
    opened = openRegularFile(file);
  } catch (e) {
    if (!(e instanceof RegularFileError)) throw e;
    throw new EvolveError("pack_unreadable", `cannot unpack ${file}: ${e.reason}; nothing was unpacked`, "give the file `evolve pack` wrote");
  }
  const fd = opened.fd;
  const head = Buffer.alloc(2);
  readSync(fd, head, 0, 2, 0);
  const gz = head[0] === 0x1f && head[1] === 0x8b;

  let manifest: PackManifest | undefined;
  let manifestParts: Buffer[] | undefined;
  let manifestBytes = 0;
  let manifestSha = "";
  const byPath = new Map<string, PackMember>();
  const seen = new Set<string>();
  let current: { member: PackMember; fd: number; hash: Hash; bytes: number } | undefined;
  // before the manifest is read only it may arrive; after, the manifest's own totals bound the stream
  let budget = MANIFEST_LIMIT + FRAMING_PER_MEMBER * 2;
  let streamed = 0;
  let failure: EvolveError | undefined;
  const fail = (code: "pack_corrupt" | "pack_member_refused" | "pack_digest_mismatch" | "pack_too_large", why: string): never => {
    failure ??= new EvolveError(code, `${file}: ${why}; nothing was unpacked`, code === "pack_too_large" ? "" : "make the pack again with `evolve pack` on the machine that has the dataset; a pack changed on its way is never used");
    throw failure;
  };

  const reader = new TarReader({
    entry(h: TarHeader) {
      if (manifest === undefined && manifestParts === undefined) {
        if (h.name !== MANIFEST_NAME || h.type !== "file") fail("pack_corrupt", `its first member is ${JSON.stringify(h.name)}, not ${MANIFEST_NAME}`);
        if (h.size > MANIFEST_LIMIT) fail("pack_too_large", `${MANIFEST_NAME} is ${h.size} bytes, over ${MANIFEST_LIMIT}`);
        manifestParts = [];
        return;
      }
      if (manifest === undefined) fail("pack_corrupt", "a member follows an unfinished manifest");
      const problem = memberPathProblem(h.name);
      if (problem) fail("pack_member_refused", `member ${JSON.stringify(h.name)} ${problem}`);
      if (h.type === "symlink" || h.type === "hardlink") fail("pack_member_refused", `member ${h.name} is a ${h.type === "symlink" ? "symbolic" : "hard"} link (to ${JSON.stringify(h.linkname)}); a pack holds regular files only`);
      if (h.type !== "file") fail("pack_member_refused", `member ${h.name} is a ${h.type === "dir" ? "folder entry" : "device, FIFO or other special file"}; a pack holds regular files only`);
      if (seen.has(h.name) || h.name === MANIFEST_NAME) fail("pack_member_refused", `member ${h.name} appears twice`);
      seen.add(h.name);
      const member = byPath.get(h.name);
      if (!member) fail("pack_corrupt", `member ${h.name} is not in its manifest`);
      if (h.size > member!.size) fail("pack_too_large", `member ${h.name} holds ${h.size} bytes, more than the ${member!.size} its manifest declares`);
      if (h.size < member!.size) fail("pack_digest_mismatch", `member ${h.name} holds ${h.size} bytes, not the ${member!.size} its manifest declares`);
      const abs = join(stage, ...h.name.split("/"));
      // the staging folder holds only regular files and the folders made here: no link can redirect this write
      mkdirSync(dirname(abs), { recursive: true });
      // only the execute bit is kept (a task's digest counts it, so the task check below sees it changed)
      current = { member: member!, fd: openSync(abs, "wx", h.mode & 0o111 ? 0o755 : 0o644), hash: createHash("sha256"), bytes: 0 };
    },
    data(chunk: Buffer) {
      if (manifestParts !== undefined && manifest === undefined) {
        manifestParts.push(Buffer.from(chunk));
        manifestBytes += chunk.length;
        return;
      }
      if (!current) return;
      current.hash.update(chunk);
      current.bytes += chunk.length;
      writeSync(current.fd, chunk);
    },
    end() {
      if (manifest === undefined && manifestParts !== undefined) {
        const bytes = Buffer.concat(manifestParts, manifestBytes);
        manifestSha = createHash("sha256").update(bytes).digest("hex");
        manifest = parseManifest(file, bytes.toString("utf8"), limits);
        for (const x of manifest.members) byPath.set(x.path, x);
        budget = manifestBytes + manifest.members.reduce((n, x) => n + x.size + FRAMING_PER_MEMBER, 0) + FRAMING_PER_MEMBER * 4;
        return;
      }
      if (!current) return;
      const c = current;
      current = undefined;
      closeSync(c.fd);
      const got = c.hash.digest("hex");
      if (got !== c.member.sha256) fail("pack_digest_mismatch", `member ${c.member.path} has sha256 ${got}, not the ${c.member.sha256} its manifest records`);
    },
  });

  const feed = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      try {
        streamed += chunk.length;
        if (streamed > budget) fail("pack_too_large", `it unpacks to more than the ${budget} bytes its manifest accounts for (a tar or gzip bomb)`);
        reader.write(chunk);
        cb();
      } catch (e) {
        cb(e as Error);
      }
    },
  });
  try {
    const input = createReadStream("", { fd, start: 0 });
    if (gz) await pipeline(input, createGunzip(), feed);
    else await pipeline(input, feed);
    reader.finish();
  } catch (e) {
    if (current) closeSync(current.fd);
    if (failure) throw failure;
    if (e instanceof EvolveError) throw e;
    throw new EvolveError("pack_corrupt", `${file}: not a readable pack (${firstLine(e)}); nothing was unpacked`, "make the pack again with `evolve pack`");
  }
  if (manifest === undefined) throw new EvolveError("pack_corrupt", `${file}: it holds no ${MANIFEST_NAME}; nothing was unpacked`, "give the file `evolve pack` wrote");
  const missing = (manifest as PackManifest).members.filter((x) => !seen.has(x.path));
  if (missing.length > 0) {
    throw new EvolveError("pack_corrupt", `${file}: ${missing.length} member(s) its manifest lists are missing (${missing[0].path}${missing.length > 1 ? ", …" : ""}); nothing was unpacked`, "the pack was cut off on its way: copy it again");
  }
  return { manifest, sha256: manifestSha };
}

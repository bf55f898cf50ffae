/**
 * A streaming tar reader for what the engines send back (`GET /containers/{id}/archive`): ustar headers, GNU
 * longname/longlink records and pax `path`/`linkpath`/`size` records (Go's archive/tar writes either). It is fed
 * chunks as they arrive and hands each entry's bytes on as they come, so reading a large subtree never holds more
 * than one chunk plus what the caller chooses to keep. The writer is beside it in tar.ts.
 */

const BLOCK = 512;
/**
 * The largest longname/longlink/pax record read: real ones are a path (≤ PATH_MAX) or a few xattrs; a bigger one
 * would be buffered whole, so it ends the read instead.
 */
export const META_RECORD_LIMIT = 1024 * 1024;

/** One entry's header. `name` is as the archive spells it (relative, folders without a trailing '/'). */
export interface TarHeader {
  name: string;
  type: "file" | "dir" | "symlink" | "hardlink" | "other";
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtime: number;
  linkname: string;
}

/** What the reader calls: `entry` once per header, `data` for its bytes in order, `end` when they are complete. */
export interface TarSink {
  entry(h: TarHeader): void;
  data?(chunk: Buffer): void;
  end?(h: TarHeader): void;
}

function cstr(b: Buffer, off: number, len: number): string {
  const s = b.subarray(off, off + len);
  const nul = s.indexOf(0);
  return (nul === -1 ? s : s.subarray(0, nul)).toString("utf8");
}

/** A numeric field: octal text, or GNU base-256 when the top bit of the first byte is set. */
function num(b: Buffer, off: number, len: number): number {
  if (b[off] & 0x80) {
    let v = b[off] & 0x7f;
    for (let i = 1; i < len; i++) v = v * 256 + b[off + i];
    return v;
  }
  const s = cstr(b, off, len).trim();
  return s ? parseInt(s, 8) : 0;
}

function typeOf(flag: string): TarHeader["type"] {
  if (flag === "0" || flag === "" || flag === "\0" || flag === "7") return "file";
  if (flag === "5") return "dir";
  if (flag === "2") return "symlink";
  if (flag === "1") return "hardlink";
  return "other";
}

/** Parses pax extended-header records ("<len> key=value\n"). */
function paxRecords(data: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  while (i < data.length) {
    const sp = data.indexOf(0x20, i);
    if (sp === -1) break;
    const len = Number(data.subarray(i, sp).toString("ascii"));
    if (!Number.isFinite(len) || len <= 0) break;
    const rec = data.subarray(sp + 1, i + len - 1).toString("utf8");
    const eq = rec.indexOf("=");
    if (eq > 0) out[rec.slice(0, eq)] = rec.slice(eq + 1);
    i += len;
  }
  return out;
}

/** Incremental tar parser: call `write` with each chunk, then `finish`. */
export class TarReader {
  private buf: Buffer = Buffer.alloc(0);
  /** Bytes of the current entry's data still to pass on, and padding after it to drop. */
  private remaining = 0;
  private pad = 0;
  private skipData = false;
  private current: TarHeader | undefined;
  /** Collected body of a meta record (longname, pax) instead of passing it to the sink. */
  private meta: { kind: string; parts: Buffer[] } | undefined;
  private longName: string | undefined;
  private longLink: string | undefined;
  private pax: Record<string, string> = {};
  private ended = false;

  constructor(private readonly sink: TarSink) {}

  /** Feeds the next bytes of the archive. */
  write(chunk: Buffer): void {
    if (this.ended) return;
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    for (;;) {
      if (this.remaining > 0) {
        if (this.buf.length === 0) return;
        const n = Math.min(this.remaining, this.buf.length);
        const part = this.buf.subarray(0, n);
        this.buf = this.buf.subarray(n);
        this.remaining -= n;
        if (this.meta) this.meta.parts.push(Buffer.from(part));
        else if (!this.skipData) this.sink.data?.(part);
        if (this.remaining > 0) return;
        this.finishEntry();
      }
      if (this.pad > 0) {
        const n = Math.min(this.pad, this.buf.length);
        this.buf = this.buf.subarray(n);
        this.pad -= n;
        if (this.pad > 0) return;
      }
      if (this.buf.length < BLOCK) return;
      const h = this.buf.subarray(0, BLOCK);
      this.buf = this.buf.subarray(BLOCK);
      if (h.every((x) => x === 0)) {
        // end-of-archive marker; what follows is padding
        this.ended = true;
        return;
      }
      this.header(h);
    }
  }

  /** Ends the stream; throws when it stopped inside an entry (a cut-off archive). */
  finish(): void {
    if (this.remaining > 0 || this.meta) throw new Error("tar: the archive ended inside an entry");
  }

  private header(h: Buffer): void {
    const flag = String.fromCharCode(h[156]);
    const size = num(h, 124, 12);
    this.pad = (BLOCK - (size % BLOCK)) % BLOCK;
    if (flag === "L" || flag === "K" || flag === "x" || flag === "g") {
      if (size > META_RECORD_LIMIT) throw new Error(`tar: a header record of ${size} bytes is over the ${META_RECORD_LIMIT}-byte limit`);
      this.meta = { kind: flag, parts: [] };
      this.remaining = size;
      if (size === 0) this.finishEntry();
      return;
    }
    let name = cstr(h, 0, 100);
    const magic = cstr(h, 257, 6);
    const prefix = magic.startsWith("ustar") ? cstr(h, 345, 155) : "";
    if (prefix) name = `${prefix}/${name}`;
    if (this.longName !== undefined) name = this.longName;
    if (this.pax.path !== undefined) name = this.pax.path;
    let linkname = cstr(h, 157, 100);
    if (this.longLink !== undefined) linkname = this.longLink;
    if (this.pax.linkpath !== undefined) linkname = this.pax.linkpath;
    const realSize = this.pax.size !== undefined ? Number(this.pax.size) : size;
    if (realSize !== size) this.pad = (BLOCK - (realSize % BLOCK)) % BLOCK;
    this.longName = this.longLink = undefined;
    this.pax = {};
    const type = typeOf(flag);
    this.current = {
      name: name.replace(/^\.\//, "").replace(/\/+$/, ""),
      type,
      mode: num(h, 100, 8),
      uid: num(h, 108, 8),
      gid: num(h, 116, 8),
      size: type === "file" ? realSize : 0,
      mtime: num(h, 136, 12),
      linkname,
    };
    this.sink.entry(this.current);
    // only regular files carry data worth passing on; any other entry's body is read and dropped
    this.skipData = type !== "file";
    this.remaining = realSize;
    if (this.remaining === 0) this.finishEntry();
  }

  private finishEntry(): void {
    if (this.meta) {
      const body = Buffer.concat(this.meta.parts);
      const kind = this.meta.kind;
      this.meta = undefined;
      if (kind === "L") this.longName = cstr(body, 0, body.length);
      else if (kind === "K") this.longLink = cstr(body, 0, body.length);
      else if (kind === "x") this.pax = paxRecords(body);
      return;
    }
    const h = this.current;
    this.current = undefined;
    if (h) this.sink.end?.(h);
  }
}

/** Reads a whole archive held in memory into its entries (data only for regular files). */
export function readTar(archive: Buffer): { header: TarHeader; data: Buffer }[] {
  const out: { header: TarHeader; data: Buffer }[] = [];
  let parts: Buffer[] = [];
  const r = new TarReader({
    entry: () => (parts = []),
    data: (c) => parts.push(Buffer.from(c)),
    end: (h) => out.push({ header: h, data: Buffer.concat(parts) }),
  });
  r.write(archive);
  r.finish();
  return out;
}

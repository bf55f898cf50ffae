/**
 * Checks an LMDB data file before LMDB maps it. LMDB trusts its file: a damaged meta page, a page size it did not
 * write, or a file shorter than the pages its tree points at makes it read outside the map and the process dies on
 * SIGSEGV/SIGBUS, which no try/catch can turn into an error. So the store reads the file here with plain reads
 * first, and only hands a file to LMDB that looks whole. Layout (liblmdb mdb.c as vendored by lmdb-js 3.x, 64-bit):
 * a page starts with a 24-byte header {pgno u64, txnid u64, pad u16, flags u16, lower u16, upper u16}; pages 0 and 1
 * are meta pages holding {magic u32, version u32, address u64, mapsize u64, dbs[2] (48 bytes each: pad u32 = page
 * size in dbs[0], flags u16, depth u16, branch/leaf/overflow pages u64, entries u64, root u64), last_pg u64,
 * txnid u64}; with lmdb-js's overlapping sync a third meta copy sits at half a page.
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";

const MAGIC = 0xbeefc0de;
const DATA_VERSION = 2;
const HEADER = 24;
const P_BRANCH = 0x01;
const P_LEAF = 0x02;
const P_OVERFLOW = 0x04;
const P_META = 0x08;
const P_LEAF2 = 0x20;
const F_BIGDATA = 0x01;
const F_SUBDATA = 0x02;
const F_DUPDATA = 0x04;
const INVALID = 0xffffffffffffffffn;
const DB_SIZE = 48;
const META_SIZE = 8 + 8 + 8 + 2 * DB_SIZE + 8 + 8 + 8;

/** The fields of one meta page the checks rely on. */
interface Meta {
  magic: number;
  version: number;
  psize: number;
  envFlags: number;
  lastPg: bigint;
  txnid: bigint;
  roots: [bigint, bigint];
  depths: [number, number];
}

/** What the check found: a whole file, or why it is not. */
export type DataFileCheck =
  | { ok: true; pageSize: number; pages: number; txnid: bigint }
  | { ok: false; why: string };

const BLOCK = 1 << 20;
const BLOCKS = 16;

/** Plain reads of the data file; whole pages come through a small cache of 1 MiB blocks (tree pages cluster). */
class File {
  readonly size: number;
  private readonly blocks = new Map<number, Buffer>();
  constructor(private readonly fd: number) {
    this.size = fstatSync(fd).size;
  }
  page(offset: number, length: number): Buffer {
    const start = Math.floor(offset / BLOCK) * BLOCK;
    if (offset + length > start + BLOCK) return this.read(offset, length);
    let block = this.blocks.get(start);
    if (!block) {
      block = this.read(start, Math.min(BLOCK, this.size - start));
      if (this.blocks.size >= BLOCKS) this.blocks.delete(this.blocks.keys().next().value!);
      this.blocks.set(start, block);
    }
    const from = offset - start;
    return from + length <= block.length ? block.subarray(from, from + length) : this.read(offset, length);
  }
  read(offset: number, length: number): Buffer {
    const buf = Buffer.alloc(length);
    let got = 0;
    while (got < length) {
      const n = readSync(this.fd, buf, got, length - got, offset + got);
      if (n === 0) break;
      got += n;
    }
    return got === length ? buf : buf.subarray(0, got);
  }
}

function readMeta(f: File, offset: number): Meta | undefined {
  const b = f.read(offset, HEADER + META_SIZE);
  if (b.length < HEADER + META_SIZE) return undefined;
  const m = HEADER;
  const db = (i: number) => m + 24 + i * DB_SIZE;
  return {
    magic: b.readUInt32LE(m),
    version: b.readUInt32LE(m + 4) & 0xffff,
    psize: b.readUInt32LE(db(0)),
    envFlags: b.readUInt16LE(db(0) + 4),
    roots: [b.readBigUInt64LE(db(0) + 40), b.readBigUInt64LE(db(1) + 40)],
    depths: [b.readUInt16LE(db(0) + 6), b.readUInt16LE(db(1) + 6)],
    lastPg: b.readBigUInt64LE(m + 24 + 2 * DB_SIZE),
    txnid: b.readBigUInt64LE(m + 24 + 2 * DB_SIZE + 8),
  };
}

const pageFlags = (f: File, offset: number) => {
  const b = f.read(offset, HEADER);
  return b.length < HEADER ? undefined : { pgno: b.readBigUInt64LE(0), flags: b.readUInt16LE(18) };
};

/** Why a meta page cannot be trusted, or undefined when it can. */
function metaProblem(m: Meta, label: string): string | undefined {
  if (m.magic !== MAGIC) return `${label} has no LMDB magic`;
  if (m.version !== DATA_VERSION) return `${label} has data version ${m.version}, expected ${DATA_VERSION}`;
  return sizeProblem(m, label);
}

function sizeProblem(m: Meta, label: string): string | undefined {
  if (m.psize < 512 || m.psize > 65536 || (m.psize & (m.psize - 1)) !== 0) return `${label} claims a page size of ${m.psize}`;
  if (m.lastPg < 1n || m.lastPg > 1n << 40n) return `${label} claims ${m.lastPg} as its last page`;
  for (const [i, root] of m.roots.entries()) {
    if (root !== INVALID && (root < 2n || root > m.lastPg)) return `${label} points its ${i ? "main" : "free-page"} tree at page ${root}, beyond its last page ${m.lastPg}`;
    if (m.depths[i] > 32) return `${label} claims a tree ${m.depths[i]} levels deep`;
  }
  return undefined;
}

/**
 * Checks that an LMDB data file is whole enough to map: both meta pages valid and agreeing on the page size, the
 * meta LMDB will pick (the newest, as its own header read picks it) sane, and the file as long as the pages it
 * claims, a whole number of pages. A file shorter than its last page is not always damage (LMDB may leave a page
 * freed within its own transaction unwritten at the end), so then every tree is walked to see whether any
 * referenced page lies beyond the end. A missing or empty file is the caller's business (a new store).
 */
export function checkDataFile(path: string): DataFileCheck {
  const fd = openSync(path, "r");
  try {
    const f = new File(fd);
    const p0 = pageFlags(f, 0);
    if (!p0 || !(p0.flags & P_META)) return { ok: false, why: "page 0 is not an LMDB meta page" };
    const m0 = readMeta(f, 0)!;
    const bad0 = metaProblem(m0, "meta page 0");
    if (bad0) return { ok: false, why: bad0 };
    const psize = m0.psize;
    if (f.size < 2 * psize) return { ok: false, why: `the file is ${f.size} bytes, shorter than its two meta pages (${2 * psize})` };
    if (f.size % psize !== 0) return { ok: false, why: `the file is ${f.size} bytes, not a whole number of ${psize}-byte pages` };
    const p1 = pageFlags(f, psize)!;
    if (!(p1.flags & P_META) || p1.pgno !== 1n) return { ok: false, why: "page 1 is not an LMDB meta page" };
    const m1 = readMeta(f, psize)!;
    const bad1 = metaProblem(m1, "meta page 1");
    if (bad1) return { ok: false, why: bad1 };
    if (m1.psize !== psize) return { ok: false, why: `the meta pages disagree on the page size (${psize}, ${m1.psize})` };
    // LMDB's own header read: slot 0, then (overlapping sync) a copy at half a page, then page 1, newest txnid wins
    let picked = m0;
    const slots = m0.envFlags & 0x1000 || m1.envFlags & 0x1000 ? [psize >> 1, psize] : [psize];
    for (const off of slots) {
      const m = off === psize ? m1 : readMeta(f, off);
      if (m && m.txnid >= picked.txnid) picked = m;
    }
    const badPicked = picked === m0 || picked === m1 ? undefined : sizeProblem(picked, "the newest meta copy");
    if (badPicked) return { ok: false, why: badPicked };
    if (picked.psize !== psize) return { ok: false, why: `the newest meta copy claims a page size of ${picked.psize}` };
    const pages = f.size / psize;
    const claimed = Number([m0, m1, picked].reduce((a, m) => (m.lastPg > a ? m.lastPg : a), 0n)) + 1;
    if (claimed > pages) {
      const walk = walkPages(f, psize, [m0, m1, picked]);
      if (walk.beyond !== undefined) {
        return { ok: false, why: `the file holds ${pages} pages but its tree uses page ${walk.beyond} (it was cut short)` };
      }
      if (walk.problem) return { ok: false, why: walk.problem };
    }
    return { ok: true, pageSize: psize, pages, txnid: picked.txnid };
  } finally {
    closeSync(fd);
  }
}

/**
 * Walks every tree of a data file (the free-page tree, the main tree and each named database in it) with plain
 * reads, checking each page's header and node bounds. Returns the first problem found; never maps the file, so
 * any damage is reported instead of crashing. Used when a store is opened (see store.ts preflight), by `store
 * verify` and `store backup`. The walk is no LMDB reader, so a writer in another process may reuse pages under it:
 * a problem seen while the newest txnid moved is walked again, and one that stays while nothing commits is damage.
 * When writers never pause for five walks, the file is taken as whole: a live writer just rewrote its tree.
 */
export function checkTrees(path: string): string | undefined {
  for (let attempt = 0; attempt < 5; attempt++) {
    const r = checkDataFile(path);
    if (!r.ok) return r.why;
    const fd = openSync(path, "r");
    let problem: string | undefined;
    try {
      const f = new File(fd);
      const m0 = readMeta(f, 0)!;
      const m1 = readMeta(f, r.pageSize)!;
      const w = walkPages(f, r.pageSize, [m0, m1]);
      problem = w.beyond !== undefined ? `the tree uses page ${w.beyond}, beyond the end of the file` : w.problem;
    } finally {
      closeSync(fd);
    }
    if (!problem) return undefined;
    const after = checkDataFile(path);
    if (!after.ok) return after.why;
    if (after.txnid === r.txnid) return problem;
  }
  return undefined;
}

function walkPages(f: File, psize: number, metas: Meta[]): { beyond?: bigint; problem?: string } {
  const pages = BigInt(f.size / psize);
  const seen = new Set<bigint>();
  let beyond: bigint | undefined;
  let problem: string | undefined;
  const visit = (pgno: bigint, depth: number, expectLeaf2: boolean): void => {
    if (beyond !== undefined || problem) return;
    if (pgno >= pages) {
      beyond = pgno;
      return;
    }
    if (seen.has(pgno)) return;
    seen.add(pgno);
    if (depth > 40) {
      problem = `page ${pgno} sits deeper than any LMDB tree can`;
      return;
    }
    const page = f.page(Number(pgno) * psize, psize);
    const flags = page.readUInt16LE(18);
    if (page.readBigUInt64LE(0) !== pgno) {
      problem = `page ${pgno} names itself page ${page.readBigUInt64LE(0)}`;
      return;
    }
    // lower and upper count from the end of the header (LMDB's PAGEBASE), as do the node offsets
    const lower = page.readUInt16LE(20);
    const upper = page.readUInt16LE(22);
    if (!(flags & (P_BRANCH | P_LEAF)) || upper + HEADER > psize || lower > upper) {
      problem = `page ${pgno} is not a well-formed tree page (flags ${flags}, bounds ${lower}..${upper})`;
      return;
    }
    if (flags & P_LEAF2 || expectLeaf2) return; // fixed-size keys only, no pointers out
    const n = lower >> 1;
    for (let i = 0; i < n && !problem && beyond === undefined; i++) {
      const at = HEADER + page.readUInt16LE(HEADER + 2 * i);
      if (at < HEADER + upper || at + 8 > psize) {
        problem = `page ${pgno} node ${i} lies outside the page`;
        return;
      }
      const lo = page.readUInt16LE(at);
      const hi = page.readUInt16LE(at + 2);
      const nflags = page.readUInt16LE(at + 4);
      const ksize = page.readUInt16LE(at + 6);
      if (flags & P_BRANCH) {
        if (at + 8 + ksize > psize) {
          problem = `page ${pgno} node ${i} overruns the page`;
          return;
        }
        visit(BigInt(lo) | (BigInt(hi) << 16n) | (BigInt(nflags) << 32n), depth + 1, false);
        continue;
      }
      const dsize = lo | (hi << 16);
      const data = at + 8 + ksize;
      if (nflags & F_BIGDATA) {
        if (data + 8 > psize) {
          problem = `page ${pgno} node ${i} overruns the page`;
          return;
        }
        const ov = page.readBigUInt64LE(data);
        const count = BigInt(Math.floor((HEADER - 1 + dsize) / psize) + 1);
        if (ov + count > pages) beyond = ov + count - 1n;
        else if (ov < 2n) problem = `page ${pgno} node ${i} points its value at meta page ${ov}`;
        else if (!(f.read(Number(ov) * psize, HEADER).readUInt16LE(18) & P_OVERFLOW)) problem = `page ${ov} should hold a large value and does not`;
        continue;
      }
      if (data + dsize > psize) {
        problem = `page ${pgno} node ${i} overruns the page`;
        return;
      }
      if (nflags & F_SUBDATA && dsize >= DB_SIZE) {
        const root = page.readBigUInt64LE(data + 40);
        if (root !== INVALID) visit(root, depth + 1, (page.readUInt16LE(data + 4) & 0x10) !== 0 && (nflags & F_DUPDATA) !== 0);
      }
    }
  };
  for (const m of metas) for (const root of m.roots) if (root !== INVALID) visit(root, 0, false);
  return { beyond, problem };
}

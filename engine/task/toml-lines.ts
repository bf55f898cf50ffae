/**
 * Where keys live in a task.toml. smol-toml returns values without positions, so findings would have no line
 * numbers; this is a small structural scanner (headers, dotted keys, inline tables, arrays, multi-line strings)
 * that records the 1-based line of every key path it meets. It never evaluates values and never throws: on
 * anything it does not understand it skips to the next line, so a partly broken file still yields lines.
 *
 * Cost is linear in the text whatever its shape: key paths are indexed to at most {@link MAX_DEPTH} parts (a deeper
 * key is located by its nearest indexed prefix), values nested deeper are skipped without recursion, and
 * array-of-tables headers are resolved through a trie rather than by scanning every header seen so far.
 */

/** A key path as the validator sees it: table keys and array indexes, e.g. `["steps", 0, "agent", "user"]`. */
export type KeyPath = readonly (string | number)[];

/** Line numbers of key paths in one TOML text. */
export interface TomlLineIndex {
  /** 1-based line of `path`, or of the nearest enclosing table or key that was located; undefined if none. */
  lineOf(path: KeyPath): number | undefined;
}

const join = (path: KeyPath): string => path.map(String).join("\u0001");

/** Scans `text` and returns an index of key paths to the lines that define them. */
export function indexTomlLines(text: string): TomlLineIndex {
  const lines = new Map<string, number>();
  try {
    new Scanner(text, lines).document();
  } catch {
    // a partial index is still useful; the scanner is best effort by design
  }
  return {
    lineOf(path) {
      for (let n = path.length; n > 0; n--) {
        const hit = lines.get(join(path.slice(0, n)));
        if (hit !== undefined) return hit;
      }
      return undefined;
    },
  };
}

const BARE = /[A-Za-z0-9_-]/;

/**
 * How many parts of a key path the index records. Real task.toml paths are a handful deep
 * (`steps[0].verifier.environment.env.X`); a hostile file's 100k-part dotted key or 500k nested arrays would
 * otherwise cost quadratic time and memory in path copies.
 */
export const MAX_DEPTH = 24;

/** A written header path prefix; `concrete` is set when an array of tables lives there. */
interface ArrayNode {
  children: Map<string, ArrayNode>;
  concrete?: (string | number)[];
}

class Scanner {
  private pos = 0;
  private line = 1;
  /** Next index for each array-of-tables path (`[[steps]]` seen twice → 0 then 1). */
  private readonly arrayCounts = new Map<string, number>();
  /** Header paths as written → concrete paths with indexes, so `[steps.agent]` lands under the latest `[[steps]]`. */
  private readonly arrays: ArrayNode = { children: new Map() };

  constructor(
    private readonly text: string,
    private readonly out: Map<string, number>,
  ) {}

  private record(path: KeyPath, line: number): void {
    const k = join(path);
    if (!this.out.has(k)) this.out.set(k, line);
  }

  private peek(o = 0): string {
    return this.text[this.pos + o] ?? "";
  }

  private advance(): string {
    const c = this.text[this.pos++] ?? "";
    if (c === "\n") this.line++;
    return c;
  }

  private eof(): boolean {
    return this.pos >= this.text.length;
  }

  /** Spaces and tabs only. */
  private skipInline(): void {
    while (this.peek() === " " || this.peek() === "\t") this.pos++;
  }

  /** Whitespace, newlines and comments (inside arrays and between statements). */
  private skipAll(): void {
    for (;;) {
      const c = this.peek();
      if (c === " " || c === "\t" || c === "\r" || c === "\n") this.advance();
      else if (c === "#") this.skipToEol();
      else return;
    }
  }

  private skipToEol(): void {
    while (!this.eof() && this.peek() !== "\n") this.pos++;
  }

  document(): void {
    let table: (string | number)[] = [];
    while (!this.eof()) {
      this.skipAll();
      if (this.eof()) return;
      const start = this.pos;
      const line = this.line;
      try {
        if (this.peek() === "[") {
          table = this.header(line);
        } else {
          const key = this.key();
          this.skipInline();
          if (key.length === 0 || this.peek() !== "=") throw new Error("no key");
          this.advance();
          this.skipInline();
          const path = [...table, ...key].slice(0, MAX_DEPTH);
          for (let i = 1; i <= path.length; i++) this.record(path.slice(0, i), line);
          this.value(path);
        }
      } catch {
        if (this.pos === start || this.line === line) this.skipToEol();
      }
    }
  }

  private header(line: number): (string | number)[] {
    const isArray = this.peek(1) === "[";
    this.pos += isArray ? 2 : 1;
    this.skipInline();
    const written = this.key();
    this.skipInline();
    if (isArray) {
      if (this.peek() !== "]" || this.peek(1) !== "]") throw new Error("bad header");
      this.pos += 2;
    } else {
      if (this.peek() !== "]") throw new Error("bad header");
      this.pos += 1;
    }
    this.skipInline();
    if (this.peek() === "#") this.skipToEol();
    // resolve the written path against the latest array-of-tables prefixes (longest match first); an array header
    // never resolves against itself, a plain header may (`[steps]` after `[[steps]]` is that element)
    let concrete: (string | number)[] = [...written];
    let node: ArrayNode | undefined = this.arrays;
    const usable = isArray ? written.length - 1 : written.length;
    for (let i = 0; i < usable && node; i++) {
      node = node.children.get(written[i]);
      if (node?.concrete) concrete = [...node.concrete, ...written.slice(i + 1)];
    }
    for (let i = 1; i <= concrete.length; i++) this.record(concrete.slice(0, i), line);
    if (isArray) {
      const k = join(concrete);
      const idx = this.arrayCounts.get(k) ?? 0;
      this.arrayCounts.set(k, idx + 1);
      const withIdx = [...concrete, idx];
      this.record(withIdx, line);
      let at = this.arrays;
      for (const part of written) {
        let next = at.children.get(part);
        if (!next) at.children.set(part, (next = { children: new Map() }));
        at = next;
      }
      // a new element invalidates deeper prefixes that hung under this array's previous element
      at.concrete = withIdx;
      at.children = new Map();
      return withIdx;
    }
    return concrete;
  }

  /** A possibly dotted key of bare and quoted parts; only the first {@link MAX_DEPTH} parts are kept. */
  private key(): string[] {
    const parts: string[] = [];
    for (;;) {
      this.skipInline();
      const c = this.peek();
      let part: string;
      if (c === '"' || c === "'") part = this.quotedKey(c);
      else {
        const from = this.pos;
        while (BARE.test(this.peek())) this.pos++;
        if (this.pos === from) return parts;
        part = this.text.slice(from, this.pos);
      }
      if (parts.length < MAX_DEPTH) parts.push(part);
      this.skipInline();
      if (this.peek() !== ".") return parts;
      this.pos++;
    }
  }

  private quotedKey(q: string): string {
    this.pos++;
    const from = this.pos;
    while (!this.eof() && this.peek() !== q && this.peek() !== "\n") {
      this.pos += q === '"' && this.peek() === "\\" ? 2 : 1;
    }
    const raw = this.text.slice(from, Math.min(this.pos, this.text.length));
    if (this.peek() === q) this.pos++;
    // an escape keeps the character after the backslash: close enough to locate the key, never evaluated
    return q === '"' ? raw.replace(/\\([\s\S])/g, "$1") : raw;
  }

  private value(path: (string | number)[]): void {
    if (path.length >= MAX_DEPTH) return this.skipValue();
    const c = this.peek();
    if (c === "{") return this.inlineTable(path);
    if (c === "[") return this.array(path);
    if (c === '"' || c === "'") return this.string();
    // scalar: number, bool, date — ends at a delimiter
    while (!this.eof() && !/[,\]}\n#]/.test(this.peek())) this.pos++;
  }

  /** Skips one value of any nesting without recursion (brackets counted, strings and comments stepped over). */
  private skipValue(): void {
    let depth = 0;
    while (!this.eof()) {
      const c = this.peek();
      if (c === '"' || c === "'") this.string();
      else if (c === "[" || c === "{") {
        depth++;
        this.advance();
      } else if (c === "]" || c === "}") {
        if (depth === 0) return;
        depth--;
        this.advance();
        if (depth === 0) return;
      } else if (depth === 0 && (c === "," || c === "\n" || c === "#")) return;
      else if (c === "#") this.skipToEol();
      else this.advance();
    }
  }

  private string(): void {
    const q = this.peek();
    if (this.peek(1) === q && this.peek(2) === q) {
      this.pos += 3;
      while (!this.eof()) {
        if (q === '"' && this.peek() === "\\") {
          this.advance();
          this.advance();
          continue;
        }
        if (this.peek() === q && this.peek(1) === q && this.peek(2) === q) {
          this.pos += 3;
          while (this.peek() === q) this.pos++; // up to two quotes may end the content
          return;
        }
        this.advance();
      }
      return;
    }
    this.pos++;
    while (!this.eof() && this.peek() !== "\n") {
      if (q === '"' && this.peek() === "\\") {
        this.pos += 2;
        continue;
      }
      if (this.peek() === q) {
        this.pos++;
        return;
      }
      this.pos++;
    }
  }

  private inlineTable(path: (string | number)[]): void {
    this.advance();
    for (;;) {
      this.skipAll();
      if (this.eof()) return;
      if (this.peek() === "}") {
        this.advance();
        return;
      }
      if (this.peek() === ",") {
        this.advance();
        continue;
      }
      const line = this.line;
      const key = this.key();
      this.skipInline();
      if (key.length === 0 || this.peek() !== "=") throw new Error("bad inline table");
      this.advance();
      this.skipAll();
      const p = [...path, ...key];
      for (let i = path.length + 1; i <= p.length; i++) this.record(p.slice(0, i), line);
      this.value(p);
    }
  }

  private array(path: (string | number)[]): void {
    this.advance();
    let idx = 0;
    for (;;) {
      this.skipAll();
      if (this.eof()) return;
      if (this.peek() === "]") {
        this.advance();
        return;
      }
      if (this.peek() === ",") {
        this.advance();
        continue;
      }
      const p = [...path, idx++];
      this.record(p, this.line);
      const before = this.pos;
      this.value(p);
      if (this.pos === before) throw new Error("stuck in array");
    }
  }
}

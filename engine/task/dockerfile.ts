/**
 * Just enough of Dockerfiles, image references and docker-compose files for the import rules: no full parsers
 * (and no YAML dependency), only the facts the validator needs, read leniently from whatever the file holds.
 */

/** One Dockerfile instruction with its 1-based starting line; continuation lines are joined. */
export interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

/** Whether a Dockerfile line ends in a `\` continuation (trailing blanks allowed). */
const continues = (line: string): boolean => line.trimEnd().endsWith("\\");

/**
 * Splits a Dockerfile into instructions, joining `\` continuations and dropping comments. Linear in the text: the
 * parts of a continued instruction are collected and joined once (re-joining at every line was quadratic).
 */
export function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  const lines = text.split(/\r?\n/);
  let i = 0;
  while (i < lines.length) {
    const start = i;
    let last = lines[i++];
    if (/^\s*(#|$)/.test(last)) continue;
    const parts: string[] = [];
    while (continues(last) && i < lines.length) {
      parts.push(last.trimEnd().slice(0, -1), " ");
      last = lines[i++];
      while (/^\s*#/.test(last) && i < lines.length) last = lines[i++]; // comments inside a continuation are skipped by Docker too
    }
    if (!/^\s*#/.test(last) || parts.length === 0) parts.push(last);
    const cur = parts.join("");
    const m = /^\s*([A-Za-z]+)\s*(.*)$/.exec(cur);
    if (m) out.push({ keyword: m[1].toUpperCase(), args: m[2].trim(), line: start + 1 });
  }
  return out;
}

/** The instructions of the final build stage (after the last FROM): what the running image is made of. */
export function finalStage(ins: Instruction[]): Instruction[] {
  let last = -1;
  ins.forEach((x, i) => {
    if (x.keyword === "FROM") last = i;
  });
  return ins.slice(last + 1);
}

/** `USER name:group` lines (any stage), which the platform refuses. */
export function userGroupLines(ins: Instruction[]): Instruction[] {
  return ins.filter((x) => x.keyword === "USER" && /^\S+:\S*/.test(x.args));
}

/** The words of an ENTRYPOINT/CMD: exec form (JSON array) or shell form. */
export function commandWords(args: string): string[] {
  const a = args.trim();
  if (a.startsWith("[")) {
    try {
      const v = JSON.parse(a);
      if (Array.isArray(v)) return v.map(String);
    } catch {
      // not valid JSON: Docker runs it in shell form too
    }
  }
  return a.split(/\s+/).filter((w) => w.length > 0);
}

const SHELLS = new Set(["sh", "bash", "dash", "zsh", "ash"]);
const INITS = new Set(["tini", "dumb-init", "catatonit"]);

/**
 * Whether an ENTRYPOINT only keeps the container alive (`sleep infinity`, `tail -f /dev/null`, a bare shell,
 * `cat`, or an init wrapper around one of those) rather than starting a service.
 */
export function isKeepAlive(words: readonly string[], depth = 0): boolean {
  const base = (x: string | undefined) => (x ?? "").replace(/^.*\//, ""); // "/bin/sh" → "sh"
  let w = [...words];
  if (base(w[0]) === "env") w = w.slice(1);
  while (w.length > 0 && INITS.has(base(w[0]))) {
    w = w.slice(1);
    if (w[0] === "--") w = w.slice(1);
    if (w.length === 0) return true; // the init would run CMD, which the platform never runs
  }
  if (w.length === 0) return true;
  const cmd = base(w[0]);
  const rest = w.slice(1);
  if (SHELLS.has(cmd)) {
    if (rest.length === 0) return true;
    // `sh -c "sleep infinity"` and friends
    const c = rest.indexOf("-c");
    // nesting is bounded: `sh -c "sh -c …"` a thousand deep is no keep-alive anyone writes, and unbounded it is quadratic
    if (c >= 0 && c + 1 < rest.length) return depth < 4 && isKeepAlive(rest.slice(c + 1).join(" ").replace(/^["']|["']$/g, "").split(/\s+/), depth + 1);
    return rest.every((r) => /^-[a-z]+$/i.test(r));
  }
  if (cmd === "sleep") return rest.length === 1 && /^(infinity|inf|\d+[smhd]?)$/.test(rest[0]);
  if (cmd === "tail") return rest.includes("/dev/null") && rest.some((r) => /^-[a-zA-Z]*[fF]/.test(r));
  if (cmd === "cat") return rest.length === 0;
  return false;
}

/** The final stage's effective ENTRYPOINT (the last one), or undefined when the Dockerfile sets none. */
export function effectiveEntrypoint(ins: Instruction[]): Instruction | undefined {
  const eps = finalStage(ins).filter((x) => x.keyword === "ENTRYPOINT");
  return eps[eps.length - 1];
}

/** The outcome of reading a docker_image reference. */
export type ImageRefVerdict = "pinned" | "untagged" | "latest" | "malformed";

/**
 * Classifies a docker_image reference. A digest (`@sha256:<64 hex>`) pins it; otherwise the tag is what
 * follows `:` in the last path component, so `localhost:5000/img` (a registry port) is untagged.
 */
export function classifyImageRef(ref: string): ImageRefVerdict {
  if (ref.length === 0 || /\s/.test(ref)) return "malformed";
  const at = ref.indexOf("@");
  if (at >= 0) {
    const digest = ref.slice(at + 1);
    if (at === 0 || !/^sha256:[0-9a-f]{64}$/.test(digest)) return "malformed";
    return "pinned";
  }
  const lastSlash = ref.lastIndexOf("/");
  const last = ref.slice(lastSlash + 1);
  const colon = last.indexOf(":");
  if (colon < 0) return last.length > 0 ? "untagged" : "malformed";
  const tag = last.slice(colon + 1);
  if (colon === 0 || !/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(tag)) return "malformed";
  return tag === "latest" ? "latest" : "pinned";
}

/**
 * A YAML line without its comment: from the first `#` at the start or after a blank. Found by one scan; the regex
 * `\s+#.*$` it replaces backtracked over every blank of a long whitespace run (quadratic).
 */
function stripComment(line: string): string {
  const at = line.search(/(?:^|[ \t])#/);
  return at < 0 ? line : line.slice(0, at);
}

/**
 * Service names under the top-level `services:` key of a docker-compose file. Minimal YAML reading: the first
 * indentation level below `services:` holds the names; flow-style (`services: {a: …}`) is read too.
 */
export function composeServices(text: string): string[] {
  const lines = text.split(/\r?\n/);
  const names: string[] = [];
  let inServices = false;
  let childIndent = -1;
  for (const raw of lines) {
    const line = stripComment(raw);
    if (line.trim() === "" || line.trim() === "---") continue;
    const indent = line.length - line.trimStart().length;
    if (indent === 0) {
      const top = /^(["']?)services\1\s*:\s*(.*)$/.exec(line);
      inServices = top !== null;
      childIndent = -1;
      if (top && top[2].startsWith("{")) {
        for (const m of top[2].matchAll(/[{,]\s*["']?([A-Za-z0-9._-]+)["']?\s*:/g)) names.push(m[1]);
        inServices = false;
      }
      continue;
    }
    if (!inServices) continue;
    if (childIndent < 0) childIndent = indent;
    if (indent !== childIndent) continue;
    const m = /^\s*(["']?)([A-Za-z0-9._-]+)\1\s*:/.exec(line);
    if (m) names.push(m[2]);
  }
  return names;
}

/**
 * What a docker-compose service builds from, and the rule that every build input stays inside the task. One place
 * for both readers: the validator (`build_context_outside_task`) and the trial driver (engine/trial/compose.ts,
 * which refuses before building) read the file with the same parser, the same interpolation and the same rule, so
 * a context that validation lets through is the context the driver builds, and a hostile `context: ../../..` or an
 * absolute `dockerfile` is refused by both. A build input interpolated from a variable a secret can set is refused by
 * both as well, whatever the secret holds: validation cannot see its value, so the only rule both can apply alike is
 * that a secret never chooses what is built ({@link composeBuildEscapes}). Pure: no engine, no file access.
 */
import { posix } from "node:path";
import { isMap, isScalar, parseDocument, type Pair } from "yaml";
import { wholeTemplate } from "./rules-env.ts";

/** A compose service's build inputs as written: `context` relative to environment/, `dockerfile` to the context. */
export interface BuildInputs {
  context: string;
  dockerfile?: string;
}

/** Compose's variable interpolation over the file text (`$$` is a literal `$`). */
export function interpolate(text: string, env: Record<string, string>): string {
  return text.replace(/\$(\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))/g, (_m, all, braced, op, def, bare) => {
    if (all === "$") return "$";
    const name = braced ?? bare;
    const v = env[name];
    if (op === ":-") return v ? v : def;
    if (op === "-") return v !== undefined ? v : def;
    return v ?? "";
  });
}

/** A service's `build:` (a context string, or a map with `context` and `dockerfile`), or undefined when it has none. */
export function serviceBuild(svc: unknown): BuildInputs | undefined {
  if (svc === null || typeof svc !== "object") return undefined;
  const b = (svc as Record<string, unknown>).build;
  if (typeof b === "string") return { context: b };
  if (b && typeof b === "object") {
    const t = b as Record<string, unknown>;
    return { context: String(t.context ?? "."), dockerfile: t.dockerfile ? String(t.dockerfile) : undefined };
  }
  return undefined;
}

const leaves = (p: string) => p === ".." || p.startsWith("../");

/**
 * Why a build reads from outside the task, or undefined when it stays inside: an absolute or `~` path, a URL, or a
 * relative path that climbs above the task folder (environment/.. is the task root, and allowed).
 */
export function buildEscape(b: BuildInputs): string | undefined {
  const show = JSON.stringify;
  if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(b.context) || /^git@/.test(b.context)) return `build context ${show(b.context)} is a remote URL`;
  if (posix.isAbsolute(b.context) || b.context.startsWith("~")) return `build context ${show(b.context)} is an absolute path`;
  const context = posix.normalize(posix.join("environment", b.context));
  if (leaves(context)) return `build context ${show(b.context)} is outside the task folder`;
  if (b.dockerfile === undefined) return undefined;
  if (posix.isAbsolute(b.dockerfile) || b.dockerfile.startsWith("~")) return `dockerfile ${show(b.dockerfile)} is an absolute path`;
  if (leaves(posix.normalize(posix.join(context, b.dockerfile)))) return `dockerfile ${show(b.dockerfile)} is outside the task folder`;
  return undefined;
}

/** One service whose build leaves the task, with the 1-based line of its `build` key where known. */
export interface BuildEscape {
  service: string;
  reason: string;
  line?: number;
  /** The `[environment.env]` variable a secret can set that the build input is interpolated from, if that is why. */
  fromSecret?: string;
}

// stands in for a secret-set variable's value: private-use characters no path or YAML syntax uses
const SECRET_MARK = "\uE000";
const SECRET_END = "\uE001";
const SECRET_RE = /\uE000([A-Za-z_][A-Za-z0-9_]*)\uE001/g;

/**
 * A task's `[environment.env]` as compose interpolation sees it, from the task's files alone: literals as written,
 * and every whole-value `${NAME}` template (default or not) as a mark naming its variable, since whether the run uses
 * the default or an attached secret is the job's choice, not the task's.
 */
function markedEnv(table: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(table)) {
    if (typeof v !== "string") continue;
    out[k] = wholeTemplate(v) ? `${SECRET_MARK}${k}${SECRET_END}` : v;
  }
  return out;
}

/**
 * The services of a compose text whose build leaves the task, or whose context or dockerfile is interpolated from a
 * variable a secret can set (`fromSecret`). Judged from the task's files alone (its `[environment.env]` table as
 * written, {@link markedEnv}), so `task validate` and the trial driver, which both call this, give the same answer
 * whatever secrets a job attaches. A file that does not parse yields none: the driver refuses it on its own.
 */
export function composeBuildEscapes(text: string, envTable: Record<string, unknown>): BuildEscape[] {
  const src = interpolate(text, markedEnv(envTable));
  // uniqueKeys off: yaml's duplicate-key check is quadratic (15 s for 40k services in 1 MB); a file with duplicate
  // keys is refused by the driver's own parse anyway, so only files it accepts need the build check
  const doc = parseDocument(src, { uniqueKeys: false });
  if (doc.errors.length > 0) return [];
  let js: unknown;
  try {
    // resolved as the driver's parse() resolves it: anchors, aliases and merge keys included
    js = doc.toJS();
  } catch {
    return [];
  }
  const services = (js as { services?: unknown } | null)?.services;
  if (!services || typeof services !== "object" || Array.isArray(services)) return [];
  const nodes = doc.get("services", true);
  const out: BuildEscape[] = [];
  // the services' nodes and the text's line starts, each found once and only when a build escapes: a search of
  // both per escaping service cost 28 s for 18k escaping services in 512 KB
  let pairs: Map<string, Pair> | undefined;
  let newlines: number[] | undefined;
  for (const [name, svc] of Object.entries(services as Record<string, unknown>)) {
    const build = serviceBuild(svc);
    if (!build) continue;
    const secret = secretIn(build);
    const reason = secret ? secret.reason : buildEscape(build);
    if (!reason) continue;
    // the line of the service's `build` key, where an author looks for it
    pairs ??= servicePairs(nodes);
    const pair = pairs.get(name);
    const key = isMap(pair?.value) ? pair.value.items.find((p) => isScalar(p.key) && p.key.value === "build")?.key : undefined;
    const at = isScalar(key) ? key.range?.[0] : undefined;
    const escape: BuildEscape = { service: name, reason, line: at === undefined ? undefined : lineAt((newlines ??= newlineOffsets(src)), at) };
    if (secret) escape.fromSecret = secret.variable;
    out.push(escape);
  }
  return out;
}

/** Why `b` (interpolated with {@link markedEnv}) depends on a secret-set variable, or undefined when it does not. */
function secretIn(b: BuildInputs): { reason: string; variable: string } | undefined {
  for (const [what, value] of [["build context", b.context], ["dockerfile", b.dockerfile]] as const) {
    if (value === undefined) continue;
    const m = [...value.matchAll(SECRET_RE)][0];
    if (!m) continue;
    const shown = value.replace(SECRET_RE, (_all, k: string) => `\${${k}}`);
    return { variable: m[1], reason: `${what} ${JSON.stringify(shown)} is interpolated from ${m[1]}, which an attached secret can set` };
  }
  return undefined;
}

/** The `services` map's pairs by key as compose names the service, the first of a repeated key winning. */
function servicePairs(nodes: unknown): Map<string, Pair> {
  const byName = new Map<string, Pair>();
  if (!isMap(nodes)) return byName;
  for (const p of nodes.items) {
    if (!isScalar(p.key)) continue;
    const name = String(p.key.value);
    if (!byName.has(name)) byName.set(name, p);
  }
  return byName;
}

/** The offsets of every newline in `text`, in order. */
function newlineOffsets(text: string): number[] {
  const at: number[] = [];
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) at.push(i);
  return at;
}

/** The 1-based line of `offset`: one more than the newlines before it, counted by binary search. */
function lineAt(newlines: readonly number[], offset: number): number {
  let lo = 0;
  let hi = newlines.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (newlines[mid]! < offset) lo = mid + 1;
    else hi = mid;
  }
  return lo + 1;
}

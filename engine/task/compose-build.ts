/**
 * What a docker-compose service builds from, and the rule that every build input stays inside the task. One place
 * for both readers: the validator (`build_context_outside_task`) and the trial driver (engine/trial/compose.ts,
 * which refuses before building) read the file with the same parser, the same interpolation and the same rule, so
 * a context that validation lets through is the context the driver builds, and a hostile `context: ../../..` or an
 * absolute `dockerfile` is refused by both. Pure: no engine, no file access.
 */
import { posix } from "node:path";
import { isMap, isScalar, parseDocument } from "yaml";

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
}

/**
 * The services of a compose text (interpolated with `env` first, as the driver does) whose build leaves the task.
 * A file that does not parse yields none: the driver refuses it at run time on its own.
 */
export function composeBuildEscapes(text: string, env: Record<string, string>): BuildEscape[] {
  const src = interpolate(text, env);
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
  for (const [name, svc] of Object.entries(services as Record<string, unknown>)) {
    const build = serviceBuild(svc);
    const reason = build && buildEscape(build);
    if (!reason) continue;
    // the line of the service's `build` key, where an author looks for it
    const pair = isMap(nodes) ? nodes.items.find((p) => isScalar(p.key) && String(p.key.value) === name) : undefined;
    const key = isMap(pair?.value) ? pair.value.items.find((p) => isScalar(p.key) && p.key.value === "build")?.key : undefined;
    const at = isScalar(key) ? key.range?.[0] : undefined;
    out.push({ service: name, reason, line: at === undefined ? undefined : lineAt(src, at) });
  }
  return out;
}

function lineAt(text: string, offset: number): number {
  let n = 1;
  for (let i = text.indexOf("\n"); i >= 0 && i < offset; i = text.indexOf("\n", i + 1)) n++;
  return n;
}

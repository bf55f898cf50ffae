/**
 * The manifest of a portable pack (`evolve pack`, issue 22 §4): what the pack carries (a dataset version, the images
 * its tasks run, vendored agents) and the sha256 digest and size of every member. It is the pack's first member, and
 * unpack checks every other member against it before anything is used, so it is also where the shapes a member may
 * have are decided: `tasks/<folder>/<file>`, `images.tar`, `agents.tar` — nothing else.
 */
import { z } from "zod";
import { EvolveError } from "../errors.ts";

/** The format this evolve writes and reads. */
export const PACK_FORMAT = "evolvepack/1";
/** The manifest's name: always the pack's first member. */
export const MANIFEST_NAME = "evolvepack.json";
/** The images of every task, one `podman save --multi-image-archive` (or `docker save`) archive: shared layers once. */
export const IMAGES_MEMBER = "images.tar";
/** The vendored agents, as `evolve agent export` writes them (re-verified by `agent import` on unpack). */
export const AGENTS_MEMBER = "agents.tar";
/** The largest manifest read (it lists one line per task file; a million files fit). */
export const MANIFEST_LIMIT = 64 * 1024 * 1024;

const sha256Hex = z.string().regex(/^[0-9a-f]{64}$/);
const digest = z.string().regex(/^sha256:[0-9a-f]{64}$/);

const ManifestSchema = z.object({
  format: z.literal(PACK_FORMAT),
  created_at: z.string(),
  source: z.object({ kind: z.enum(["dataset", "job"]), ref: z.string() }),
  dataset: z.object({
    name: z.string().min(1),
    version: z.string().min(1),
    digest,
    tasks: z.array(z.object({ name: z.string().min(1), digest, folder: z.string().min(1) })).min(1),
  }),
  /** Each image by the reference trials look it up by; `key` is its LABEL_ENV_KEY when evolve built it. */
  images: z.array(z.object({ ref: z.string().min(1), key: z.string().optional(), size: z.number().int().nonnegative().optional() })),
  agents: z.array(z.object({ harness: z.string().min(1), version: z.string().min(1) })),
  members: z.array(z.object({ path: z.string().min(1), size: z.number().int().nonnegative(), sha256: sha256Hex })),
});

/** A parsed, checked manifest. */
export type PackManifest = z.infer<typeof ManifestSchema>;
/** One member as the manifest lists it. */
export type PackMember = PackManifest["members"][number];

/** How much an unpack accepts: a pack declaring (or holding) more is refused as `pack_too_large` before it is written. */
export interface PackLimits {
  /** The most bytes of members (default 256 GiB). */
  maxBytes: number;
  /** The most members (default 1,000,000). */
  maxMembers: number;
}

/** The limits an unpack applies unless told otherwise. */
export const DEFAULT_LIMITS: PackLimits = { maxBytes: 256 * 1024 ** 3, maxMembers: 1_000_000 };

/**
 * Why a member name is hostile, or undefined when it is a plain relative path: absolute, climbing (`..`), `.` or
 * empty segments, a backslash or NUL (a path that means something else elsewhere), or over 4096 bytes.
 */
export function memberPathProblem(name: string): string | undefined {
  if (name.startsWith("/")) return "is an absolute path";
  if (name.includes("\0") || name.includes("\\")) return "holds a NUL or a backslash";
  if (Buffer.byteLength(name) > 4096) return "is longer than 4096 bytes";
  const parts = name.split("/");
  if (parts.some((p) => p === "..")) return "climbs out of the pack (..)";
  if (parts.some((p) => p === "." || p === "")) return "is not a plain relative path";
  return undefined;
}

/** A task's folder in the pack: its name when that is one plain segment, else its digest (task.toml then names it). */
export function taskFolder(name: string, digest: string): string {
  const plain = !name.includes("/") && !name.startsWith(".") && memberPathProblem(name) === undefined && Buffer.byteLength(name) <= 200;
  return plain ? name : digest.replace(/^sha256:/, "");
}

function corrupt(file: string, why: string): EvolveError {
  return new EvolveError("pack_corrupt", `${file}: ${why}; nothing was unpacked`, "make the pack again with `evolve pack` on the machine that has the dataset");
}

/**
 * Parses the manifest's bytes and checks it whole: its schema, every member's path (hostile: pack_member_refused),
 * that each member is a file of a listed task folder or the images/agents archive the manifest says it carries, no
 * name twice and none under another, every task folder plain and distinct, and the totals within `limits`.
 */
export function parseManifest(file: string, text: string, limits: PackLimits = DEFAULT_LIMITS): PackManifest {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw corrupt(file, `${MANIFEST_NAME} is not JSON`);
  }
  const r = ManifestSchema.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw corrupt(file, `${MANIFEST_NAME} is not an ${PACK_FORMAT} manifest (${issue.path.join(".") || "top"}: ${issue.message})`);
  }
  const m = r.data;
  const folders = new Set<string>();
  for (const t of m.dataset.tasks) {
    if (t.folder.includes("/") || t.folder.startsWith(".") || memberPathProblem(t.folder) !== undefined) {
      throw new EvolveError("pack_member_refused", `${file}: task folder ${JSON.stringify(t.folder)} is not one plain name; nothing was unpacked`);
    }
    if (folders.has(t.folder)) throw corrupt(file, `task folder ${t.folder} is listed twice`);
    folders.add(t.folder);
  }
  if (m.members.length > limits.maxMembers) {
    throw new EvolveError("pack_too_large", `${file}: the manifest lists ${m.members.length} members, over the ${limits.maxMembers} allowed; nothing was unpacked`);
  }
  const total = m.members.reduce((n, x) => n + x.size, 0);
  if (total > limits.maxBytes) {
    throw new EvolveError("pack_too_large", `${file}: the manifest declares ${total} bytes, over the ${limits.maxBytes} allowed; nothing was unpacked`);
  }
  const paths = new Set<string>();
  for (const x of m.members) {
    const problem = memberPathProblem(x.path);
    if (problem) throw new EvolveError("pack_member_refused", `${file}: manifest member ${JSON.stringify(x.path)} ${problem}; nothing was unpacked`);
    if (paths.has(x.path)) throw new EvolveError("pack_member_refused", `${file}: manifest member ${x.path} is listed twice; nothing was unpacked`);
    paths.add(x.path);
    const parts = x.path.split("/");
    const ok =
      (parts.length >= 3 && parts[0] === "tasks" && folders.has(parts[1])) ||
      (x.path === IMAGES_MEMBER && m.images.length > 0) ||
      (x.path === AGENTS_MEMBER && m.agents.length > 0);
    if (!ok) throw corrupt(file, `manifest member ${x.path} is neither a file of a listed task nor the images or agents archive`);
  }
  for (const p of paths) {
    const parts = p.split("/");
    for (let i = 1; i < parts.length; i++) {
      if (paths.has(parts.slice(0, i).join("/"))) throw new EvolveError("pack_member_refused", `${file}: manifest member ${p} lies under the file ${parts.slice(0, i).join("/")}; nothing was unpacked`);
    }
  }
  if (m.images.length > 0 && !paths.has(IMAGES_MEMBER)) throw corrupt(file, `the manifest lists images but no ${IMAGES_MEMBER}`);
  if (m.agents.length > 0 && !paths.has(AGENTS_MEMBER)) throw corrupt(file, `the manifest lists agents but no ${AGENTS_MEMBER}`);
  for (const f of folders) {
    if (!paths.has(`tasks/${f}/task.toml`)) throw corrupt(file, `task folder ${f} has no task.toml`);
  }
  return m;
}

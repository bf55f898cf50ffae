/**
 * Candidates and overlays. A candidate is a change to the harness a person (or the host agent) writes: a descriptor
 * (where it changes the harness, the pathology it answers, the hypothesis) and `files/`, which mirror `.agent/` paths
 * and replace those files of its parent's harness. Its parent is the live `.agent/` or another candidate, so
 * candidates form a lineage; {@link buildOverlay} lays a lineage over a fresh copy of the live harness, which is what
 * a screen runs and what `install` makes live.
 *
 * An overlay never holds the live harness's `memory/`: episodes are what the live harness lived through, not policy,
 * and a screen's runs must not read (or append to) them. A candidate cannot change `memory/` for the same reason.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { AGENT_PATHS } from "../conductor/layout.ts";
import { EvolveError, firstLine } from "../errors.ts";
import { idPattern, layTrees, type Layer } from "../eval/candidate-store.ts";
import { projectPaths } from "../eval/project.ts";
import { copyEntry, ensureDir, lstatOrNone, MAX_TREE_BYTES, newBudget, readPlainFile, unsafe, writeFileAtomic } from "../eval/tree.ts";
import { type Descriptor, WHERE, type Where } from "./types.ts";

/** The `.agent/` files (and folders) each kind of candidate edits by default: what `scaffold` copies into `files/`. */
export const WHERE_FILES: Record<Where, string[]> = {
  prompt: [AGENT_PATHS.planning],
  knowledge: [AGENT_PATHS.knowledge],
  runtime: [AGENT_PATHS.seats, AGENT_PATHS.preToolCall, AGENT_PATHS.toolSchemas],
  config: [AGENT_PATHS.config],
};

/** The top-level `.agent/` folder that stays with the live harness (see the module comment). */
const MEMORY_DIR = AGENT_PATHS.episodes.split("/")[0];
/** A candidate id: the store's id rule (one path segment, so an id can never climb out of evolve/candidates), either case, 100 at most. */
const ID_RE = idPattern({ lowercase: false, max: 100 });
/** The deepest lineage read: deeper is a loop someone wrote by hand. */
const MAX_LINEAGE = 200;
/** descriptor.json is a few hundred bytes; a larger one is not a descriptor. */
const MAX_DESCRIPTOR_BYTES = 1024 * 1024;

/** Whether `id` is spelt like a candidate id (not whether it exists). */
export function isCandidateId(id: string): boolean {
  return ID_RE.test(id) && id !== "live";
}

/**
 * `rel` as a clean `.agent/`-relative path (`a/b`, a trailing `/` dropped); an empty, absolute or climbing path, or
 * one under `memory/`, → candidate_path_invalid.
 */
export function agentRelPath(rel: string): string {
  const bad = (why: string) => new EvolveError("candidate_path_invalid", `candidate file ${JSON.stringify(rel)} ${why}`, "give a path inside .agent/, e.g. harness/PLANNING.md or knowledge/");
  if (typeof rel !== "string" || rel.includes("\0")) throw bad("is not a path");
  const trimmed = rel.replace(/\/+$/, "");
  if (!trimmed) throw bad("is empty");
  if (trimmed.startsWith("/") || /^[A-Za-z]:/.test(trimmed) || trimmed.includes("\\")) throw bad("is not relative to .agent/");
  const parts = trimmed.split("/");
  if (parts.some((p) => p === "" || p === "." || p === "..")) throw bad("climbs out of .agent/ (or has an empty or . segment)");
  if (parts[0] === MEMORY_DIR) throw bad("is under memory/, which stays with the live harness");
  return parts.join("/");
}

/** A new candidate id that sorts by creation time: `c-<yyyymmddhhmmssmmm>-<4 hex>` (UTC, to the millisecond). */
function newCandidateId(now: Date): string {
  const stamp = now.toISOString().replace(/[-:T.]/g, "").slice(0, 17);
  return `c-${stamp}-${randomBytes(2).toString("hex")}`;
}

/** The live harness of `project`; missing → agent_dir_missing. */
function liveAgent(project: string): string {
  const agent = projectPaths(project).agent;
  const st = lstatOrNone(agent);
  if (st?.isSymbolicLink()) throw unsafe(agent, "a symbolic link");
  if (!st?.isDirectory()) {
    throw new EvolveError("agent_dir_missing", `${agent} is not a folder`, "run the command in an evolution project (the folder holding .agent/ and evolve/)");
  }
  return agent;
}

/**
 * Scaffolds a candidate: `evolve/candidates/<id>/descriptor.json` and `files/` holding copies of the files it will
 * change, taken from its parent's harness (the live `.agent/`, or the parent candidate's overlay), for a person to
 * edit. A listed file the parent lacks is not created (an empty one would be a change); its folder is, to show where
 * it goes. The candidate appears whole or not at all (built under a dot-folder, then renamed).
 */
export function scaffoldCandidate(
  project: string,
  o: { parent?: string; where: string; pathology: string; hypothesis: string; marker?: string; files?: string[]; deleted?: string[] },
): Descriptor {
  if (!(WHERE as readonly string[]).includes(o.where)) {
    throw new EvolveError("candidate_where_invalid", `where ${JSON.stringify(o.where)} is not one of ${WHERE.join(", ")}`, `pass one of ${WHERE.join(", ")}`);
  }
  const where = o.where as Where;
  const pathology = (o.pathology ?? "").trim();
  const hypothesis = (o.hypothesis ?? "").trim();
  if (!pathology || !hypothesis) {
    throw new EvolveError("candidate_field_empty", `a candidate needs a ${!pathology ? "pathology" : "hypothesis"}`, "say what fails (pathology) and why the change should fix it (hypothesis)");
  }
  const parent = o.parent ?? "live";
  liveAgent(project);
  if (parent !== "live") readCandidate(project, parent);
  const asked = o.files ?? WHERE_FILES[where];
  const files = [...new Set(asked.map(agentRelPath))];
  // a folder the parent lacks is made in files/ as a folder; a file's own folder is made instead
  const folders = new Set<string>([AGENT_PATHS.knowledge, AGENT_PATHS.toolSchemas, ...asked.filter((f) => f.endsWith("/")).map(agentRelPath)]);
  const deleted = o.deleted === undefined ? undefined : [...new Set(o.deleted.map(agentRelPath))];

  const paths = projectPaths(project);
  mkdirSync(paths.candidates, { recursive: true });
  const now = new Date();
  let id = newCandidateId(now);
  while (lstatOrNone(paths.candidate(id))) id = newCandidateId(now);
  const staging = join(paths.candidates, `.scaffold-${id}`);
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging);
  try {
    const parentAgent = buildOverlay(project, parent, join(staging, "parent"));
    const filesDir = join(staging, "files");
    mkdirSync(filesDir);
    const budget = newBudget();
    for (const rel of files) {
      if (copyEntry(parentAgent, filesDir, rel, budget)) continue;
      // what the parent lacks: its folder, so a person sees where the file goes
      ensureDir(join(filesDir, folders.has(rel) ? rel : rel.split("/").slice(0, -1).join("/")));
    }
    rmSync(join(staging, "parent"), { recursive: true, force: true });
    const descriptor: Descriptor = {
      id,
      parent,
      where,
      pathology,
      hypothesis,
      activation: { marker: o.marker?.trim() ? o.marker : null },
      created_at: now.toISOString(),
      ...(deleted?.length ? { deleted } : {}),
    };
    writeFileAtomic(join(staging, "descriptor.json"), Buffer.from(`${JSON.stringify(descriptor, null, 2)}\n`), 0o644);
    renameSync(staging, paths.candidate(id));
    return descriptor;
  } catch (e) {
    rmSync(staging, { recursive: true, force: true });
    throw e;
  }
}

/** One line on what is wrong with a descriptor, or null when it is one. */
function descriptorProblem(d: Record<string, unknown>, id: string): string | null {
  if (!d || typeof d !== "object" || Array.isArray(d)) return "is not a JSON object";
  if (d.id !== id) return `has id ${JSON.stringify(d.id)}, not its folder's name ${id}`;
  if (typeof d.parent !== "string" || (d.parent !== "live" && !isCandidateId(d.parent))) return `has parent ${JSON.stringify(d.parent)}, neither "live" nor a candidate id`;
  if (d.parent === id) return "is its own parent";
  if (!(WHERE as readonly unknown[]).includes(d.where)) return `has where ${JSON.stringify(d.where)}, not one of ${WHERE.join(", ")}`;
  for (const k of ["pathology", "hypothesis", "created_at"] as const) {
    if (typeof d[k] !== "string" || !(d[k] as string).trim()) return `has no ${k}`;
  }
  const act = d.activation as Record<string, unknown> | undefined;
  if (!act || typeof act !== "object" || !(act.marker === null || typeof act.marker === "string")) return "has no activation.marker (a string or null)";
  if (d.deleted !== undefined) {
    if (!Array.isArray(d.deleted)) return "has a deleted that is not a list of paths";
    for (const p of d.deleted) {
      try {
        agentRelPath(p as string);
      } catch (e) {
        return `has deleted ${firstLine(e).replace(/^candidate file /, "")}`;
      }
    }
  }
  return null;
}

/**
 * Reads candidate `id` of `project`: its descriptor and its `files/` folder (which may be absent: a candidate that
 * only deletes). An id that is no candidate id, or no such candidate → candidate_unknown; a descriptor that is not
 * one → candidate_invalid.
 */
export function readCandidate(project: string, id: string): { descriptor: Descriptor; filesDir: string } {
  const unknown = () => new EvolveError("candidate_unknown", `no candidate ${JSON.stringify(id)} in ${projectPaths(project).candidates}`, "`evolve harness scaffold` makes one; each is a folder of evolve/candidates/");
  if (typeof id !== "string" || !isCandidateId(id)) throw unknown();
  const dir = projectPaths(project).candidate(id);
  const st = lstatOrNone(dir);
  if (!st) throw unknown();
  if (!st.isDirectory()) throw new EvolveError("candidate_invalid", `candidate ${id}: ${dir} is not a folder`);
  const descPath = join(dir, "descriptor.json");
  if (!lstatOrNone(descPath)) throw new EvolveError("candidate_invalid", `candidate ${id} has no descriptor.json`, `write ${descPath} or remove the folder`);
  // a budget with room for one descriptor only: a huge descriptor.json is refused before it is read whole
  const budget = { files: 0, bytes: MAX_TREE_BYTES - MAX_DESCRIPTOR_BYTES };
  let raw: unknown;
  try {
    raw = JSON.parse(readPlainFile(descPath, budget).data.toString("utf8"));
  } catch (e) {
    if (e instanceof EvolveError && e.code === "agent_dir_unsafe") throw e;
    throw new EvolveError("candidate_invalid", `candidate ${id}: descriptor.json cannot be read as JSON (${firstLine(e)})`, `fix ${descPath}`);
  }
  const problem = descriptorProblem(raw as Record<string, unknown>, id);
  if (problem) throw new EvolveError("candidate_invalid", `candidate ${id}: descriptor.json ${problem}`, `fix ${descPath}`);
  return { descriptor: raw as Descriptor, filesDir: join(dir, "files") };
}

/** Every candidate of `project`, sorted by id (ids sort by creation time); a broken one → candidate_invalid. */
export function listCandidates(project: string): Descriptor[] {
  const dir = projectPaths(project).candidates;
  if (!lstatOrNone(dir)?.isDirectory()) return [];
  return readdirSync(dir)
    .filter((name) => !name.startsWith(".")) // scaffolds in progress
    .sort()
    .map((name) => readCandidate(project, name).descriptor);
}

/** The lineage of `id`: `["live", …, id]`, root-most first; a loop (or a lineage over 200 deep) → candidate_invalid. */
export function lineage(project: string, id: string): string[] {
  const out: string[] = [];
  let at = id;
  while (at !== "live") {
    if (out.includes(at)) throw new EvolveError("candidate_invalid", `candidate ${id}'s lineage loops at ${at}`, "fix the parent in its descriptor.json");
    if (out.length >= MAX_LINEAGE) throw new EvolveError("candidate_invalid", `candidate ${id}'s lineage is over ${MAX_LINEAGE} deep`);
    out.push(at);
    at = readCandidate(project, at).descriptor.parent;
  }
  out.push("live");
  return out.reverse();
}

/**
 * Builds the harness `harnessId` ("live" or a candidate id) at `dest/.agent` and returns that path: a fresh copy of
 * the live `.agent/` (without `memory/`), then each candidate of the lineage, root-most first, laid over it: its
 * `deleted` paths removed, then its `files/` copied over file by file. What was at `dest/.agent` is replaced. A link
 * or special file in `.agent/` or a `files/` → agent_dir_unsafe; too much → agent_dir_too_large.
 */
export function buildOverlay(project: string, harnessId: "live" | string, dest: string): string {
  const agent = liveAgent(project);
  const chain = harnessId === "live" ? [] : lineage(project, harnessId).slice(1);
  const out = join(dest, ".agent");
  rmSync(out, { recursive: true, force: true });
  mkdirSync(dest, { recursive: true });
  const layers: Layer[] = [{ from: agent, skip: [MEMORY_DIR] }];
  for (const id of chain) {
    const { descriptor, filesDir } = readCandidate(project, id);
    const remove = (descriptor.deleted ?? []).map(agentRelPath);
    if (lstatOrNone(join(filesDir, MEMORY_DIR))) {
      throw new EvolveError("candidate_invalid", `candidate ${id}: files/${MEMORY_DIR}/ changes memory, which stays with the live harness`, `remove ${join(filesDir, MEMORY_DIR)}`);
    }
    layers.push({ from: filesDir, remove });
  }
  layTrees(out, layers);
  return out;
}

/**
 * Reading a settled trial's kept tree as `trial files ls|cat|changes` and the local API (engine/serve) both answer
 * it: one function per document, so the CLI's `--json` and the API's body are the same (docs/json.md).
 */
import { EvolveError } from "../errors.ts";
import { keptChildren, readKeptFile, type KeptManifest } from "./changes.ts";

/** What `ls` says under a kept listing: the kept tree is only what the run touched. */
export const UNTOUCHED_NOTE = "files the run never touched are not listed: the image holds them (the kept tree is only what the run added, modified or deleted)";

/** `trial files ls` on a kept tree: `p` itself when it is a file, else its children. `p` is a normalized box path. */
export function keptLsDocument(trialId: string, m: KeptManifest, p: string) {
  const self = m.files.find((e) => e.path === p);
  const entries = self && self.type !== "dir" ? [self] : keptChildren(m, p);
  return { trial_id: trialId, source: "kept" as const, path: p, entries, note: UNTOUCHED_NOTE };
}

/**
 * `trial files cat` on a kept tree: the bytes of `p` (a normalized box path), refused with the reason when the run
 * did not keep it, deleted it, or it is no regular file; read under the manifest's cap.
 */
export async function readKeptPath(trialId: string, dir: string, m: KeptManifest, p: string): Promise<Buffer> {
  const e = m.files.find((x) => x.path === p);
  const skipped = m.skipped.find((x) => x.path === p);
  const excluded = m.excluded.find((x) => p === x.path || p.startsWith(`${x.path}/`));
  if (skipped) throw new EvolveError("file_not_kept", `${p} was changed by the run but not kept: ${skipped.reason}`, "");
  if (!e && excluded) throw new EvolveError("file_not_kept", `${p} is not kept: ${excluded.path} is left out (${excluded.reason})`, "");
  if (!e) throw new EvolveError("file_not_kept", `${p} was not changed by the run: only the image holds it`, `see what changed: evolve trial files changes ${trialId}`);
  if (e.kind === "deleted") throw new EvolveError("file_deleted", `${p} was deleted by the run`, "");
  if (e.type === "dir") throw new EvolveError("not_a_file", `${p} is a folder`, `list it: evolve trial files ls ${trialId} ${p}`);
  if (e.type !== "file") throw new EvolveError("not_a_file", `${p} is a ${e.type}${e.target ? ` to ${e.target}` : ""}`, "");
  return await readKeptFile(dir, p, m.cap_bytes);
}

/** `trial files cat --json`'s document for bytes read from `source`. */
export function catDocument(trialId: string, source: "kept" | "live", p: string, data: Buffer) {
  return { trial_id: trialId, source, path: p, size: data.length, text: data.toString("utf8") };
}

/** The changes a kept tree lists: every kept entry but the folders that only hold changed files. */
export function keptChanges(m: KeptManifest) {
  return m.files.filter((f) => !(f.kind === "modified" && f.type === "dir"));
}

/** `trial files changes --json` on a kept tree. */
export function keptChangesDocument(trialId: string, m: KeptManifest) {
  return { trial_id: trialId, source: "kept" as const, changes: keptChanges(m), excluded: m.excluded, skipped: m.skipped, kept_bytes: m.kept_bytes, cap_bytes: m.cap_bytes, cap_files: m.cap_files ?? null, changes_from: m.changes_from ?? "engine", changes_note: m.changes_note ?? null };
}

/** Test helpers for the evolver's modules: a small evolution project on disk and an exact picture of a folder tree. */
import { chmodSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

/** Writes `files` (relative path → text) under `root`, making folders as needed. */
export function writeTree(root: string, files: Record<string, string>): void {
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    writeFileSync(join(root, rel), text);
  }
}

/**
 * A project folder at `dir` with a live `.agent/`: a planning seat, config, seats, two knowledge files, one tool
 * schema, an executable pre_tool_call hook and an episodic memory. Returns `dir`.
 */
export function makeProject(dir: string): string {
  writeTree(join(dir, ".agent"), {
    "harness/PLANNING.md": "# Plan\nThink first.\n",
    "harness/config.json": '{"max_turns": 30}\n',
    "harness/seats.json": "{}\n",
    "knowledge/a.md": "alpha\n",
    "knowledge/b.md": "beta\n",
    "protocols/tool_schemas/shell.json": '{"name":"shell"}\n',
    "hooks/pre_tool_call": "#!/bin/sh\nexit 0\n",
    "memory/episodes.jsonl": '{"episode":1}\n',
  });
  chmodSync(join(dir, ".agent/hooks/pre_tool_call"), 0o755);
  mkdirSync(join(dir, "evolve"), { recursive: true });
  return dir;
}

/** Every entry under `root`: `path → "dir"`, `"file <mode> <content>"` or `"link -> target"`, for exact comparisons. */
export function snapshot(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string, rel: string) => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = lstatSync(p);
      if (st.isSymbolicLink()) out[r] = `link -> ${readlinkSync(p)}`;
      else if (st.isDirectory()) {
        out[r] = "dir";
        walk(p, r);
      } else out[r] = `file ${(st.mode & 0o777).toString(8)} ${readFileSync(p, "utf8")}`;
    }
  };
  walk(root, "");
  return out;
}

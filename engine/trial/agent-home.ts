/**
 * The agent's home capture (platform-trial-outputs.md "The agent's home folder"): the CLI kept its state in a folder
 * under /logs/agent, so it is already in the trial's `agent/` folder at its real names; after every box is gone this
 * walks it (no link followed, regular files only, bounded) and builds `agent-home.json`: each file's box path, size,
 * sha256 and mode, the caches left out on purpose (`excluded`, removed from the tree) and what could not be carried
 * or is not text (`skipped`, with the reason).
 */
import { createHash } from "node:crypto";
import type { Dirent } from "node:fs";
import { readdir, rm } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { BoxFileRefused, linkedOnTheWay, openBoxFile, readRange } from "../box/fs.ts";

/**
 * Caches nobody reads back, left out of every capture (their box path ends so): codex's plugin cache and the
 * plugin install opencode makes in its config folder (`~/.config`, or `$XDG_CONFIG_HOME` named `config`).
 */
export const HOME_EXCLUDED = [".codex/.tmp/plugins", ".config/opencode/node_modules", "/config/opencode/node_modules"] as const;
/** The most bytes one captured file may have (larger ones are recorded as skipped). */
const MAX_FILE = 64 * 1024 * 1024;
/** The most bytes and files a whole capture reads. */
const MAX_TOTAL = 512 * 1024 * 1024;
const MAX_FILES = 20_000;

/** One captured file. */
export interface HomeFile {
  path: string;
  size: number;
  sha256: string;
  /** Permission bits, octal (`0644`). */
  mode: string;
}

/** agent-home.json. */
export interface AgentHomeRecord {
  /** The home folder in the box. */
  home: string;
  files: HomeFile[];
  excluded: { path: string; reason: string }[];
  skipped: { path: string; reason: string }[];
}

/**
 * Captures the home folder `boxHome` (under /logs/agent, mapped to `agentDir` on the host). Names in `leaveOut`
 * (relative to agentDir: the trial's own outputs when the home is agent/ itself) are not the home's.
 */
export async function captureAgentHome(agentDir: string, boxAgentLogs: string, boxHome: string, leaveOut: readonly string[] = []): Promise<AgentHomeRecord> {
  const homeRel = relative(boxAgentLogs, boxHome);
  const rec: AgentHomeRecord = { home: boxHome, files: [], excluded: [], skipped: [] };
  if (homeRel.startsWith("..")) return rec;
  const root = join(agentDir, homeRel);
  // the walk lists what readdir shows (entries are not followed), but readdir follows a link at the root itself:
  // a home the box swapped for a link to a host folder is not walked at all
  const bad = await linkedOnTheWay(agentDir, homeRel);
  if (bad) {
    rec.skipped.push({ path: boxHome, reason: bad });
    return rec;
  }
  let total = 0;
  const boxPath = (p: string) => [boxAgentLogs, relative(agentDir, p).split(sep).join("/")].filter(Boolean).join("/");
  const walk = async (d: string): Promise<void> => {
    let entries: Dirent[];
    try {
      entries = await readdir(d, { withFileTypes: true });
    } catch {
      return;
    }
    entries.sort((a, b) => a.name.localeCompare(b.name));
    for (const e of entries) {
      const p = join(d, e.name);
      const rel = relative(agentDir, p).split(sep).join("/");
      if (leaveOut.includes(rel)) continue;
      const bp = boxPath(p);
      if (HOME_EXCLUDED.some((x) => bp.endsWith(x.startsWith("/") ? x : `/${x}`))) {
        await rm(p, { recursive: true, force: true });
        rec.excluded.push({ path: bp, reason: "a cache, left out on purpose" });
        continue;
      }
      if (e.isDirectory()) {
        await walk(p);
        continue;
      }
      if (e.isSymbolicLink()) {
        rec.skipped.push({ path: bp, reason: "a symbolic link" });
        continue;
      }
      if (!e.isFile()) {
        rec.skipped.push({ path: bp, reason: e.isFIFO() ? "a FIFO" : "not a regular file" });
        continue;
      }
      if (rec.files.length >= MAX_FILES) {
        rec.skipped.push({ path: bp, reason: `over the capture's ${MAX_FILES} files` });
        continue;
      }
      await captureFile(agentDir, p, bp, rec, () => total, (n) => (total += n));
    }
  };
  await walk(root);
  return rec;
}

async function captureFile(agentDir: string, p: string, bp: string, rec: AgentHomeRecord, total: () => number, add: (n: number) => void): Promise<void> {
  let fh;
  try {
    fh = await openBoxFile(agentDir, p);
  } catch (e) {
    rec.skipped.push({ path: bp, reason: e instanceof BoxFileRefused ? e.what : (e as Error).message });
    return;
  }
  if (!fh) return;
  try {
    const st = await fh.stat();
    if (st.size > MAX_FILE) {
      rec.skipped.push({ path: bp, reason: `too large (${st.size} bytes; the most is ${MAX_FILE})` });
      return;
    }
    if (total() + st.size > MAX_TOTAL) {
      rec.skipped.push({ path: bp, reason: `over the capture's ${MAX_TOTAL} bytes` });
      return;
    }
    const buf = await readRange(fh, 0, st.size);
    add(buf.length);
    rec.files.push({ path: bp, size: buf.length, sha256: createHash("sha256").update(buf).digest("hex"), mode: (st.mode & 0o7777).toString(8).padStart(4, "0") });
    if (!isUtf8(buf)) rec.skipped.push({ path: bp, reason: "not UTF-8 text: left out of the text view (the job download carries it)" });
  } finally {
    await fh.close();
  }
}

const decoder = new TextDecoder("utf-8", { fatal: true });

function isUtf8(buf: Buffer): boolean {
  try {
    decoder.decode(buf);
    return true;
  } catch {
    return false;
  }
}

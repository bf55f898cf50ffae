/**
 * Install and undo: a confirmed candidate becomes the live `.agent/`, and `undo` puts back what it replaced.
 *
 * Install makes the live harness (less `memory/`, which stays as it is) equal to the candidate's overlay: every file
 * that differs or is new is written, every file the overlay lacks is removed, and folders follow. Before the first
 * live file is touched, everything it will replace or remove is copied to `evolve/backups/<stamp>/files/` and the plan
 * is written to `install.json` (one rename), so an install killed half-way is undone like a finished one: undo only
 * reads the backup and the plan. Each live file is written to a temporary file and renamed, so no file is ever half
 * written.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { EvolveError, firstLine } from "../errors.ts";
import { buildOverlay, readCandidate } from "./candidate.ts";
import { projectPaths } from "../eval/project.ts";
import { readScreen } from "./screen.ts";
import { signTestEvidence } from "../eval/stats.ts";
import { ensureDir, listTree, lstatOrNone, newBudget, readPlainFile, unsafe, writeFileAtomic, type TreeListing } from "../eval/tree.ts";
import type { SignTestEvidence } from "../eval/types.ts";
import type { RoundRecord } from "./types.ts";

/** `evolve/backups/<stamp>/install.json`: one install, what it changed and whether it was undone. */
export interface InstallRecord {
  /** The candidate installed. */
  candidate: string;
  /** When the install began (ISO 8601). */
  at: string;
  /** The backup folder's name under evolve/backups. */
  backup: string;
  /**
   * Every live `.agent/` file the install writes or removes; `existed` says whether it was there before (a copy of it
   * is then in the backup's files/). Undo removes the ones that did not exist and restores the others.
   */
  files: { path: string; existed: boolean; action: "write" | "remove" }[];
  /** Folders the install creates (undo removes them when empty). */
  dirs_created: string[];
  /** Folders the install removes (undo makes them again). */
  dirs_removed: string[];
  /** Set when every file was written; null while (or if killed while) installing. */
  completed_at: string | null;
  /** Set when `undo` restored this backup; null until then. */
  undone_at: string | null;
  /** How the install was let through: confirmed in a round, or --force / --override-holdout. */
  confirmed_in_round: number | null;
  forced: boolean;
  holdout_overridden: boolean;
  /**
   * The exact sign test on the screen that confirmed it (stats.ts signTestEvidence): `significant` false is weak
   * evidence, which install says; null when no screen of it can be read (a forced install).
   */
  sign_test: SignTestEvidence | null;
}

/** The sign test's verdict on the screen of `round` for candidate `id`, or null when there is none to read. */
function screenEvidence(project: string, id: string, round: RoundRecord | undefined): SignTestEvidence | null {
  if (!round?.screen_id) return null;
  try {
    const c = readScreen(project, round.screen_id).candidates.find((x) => x.candidate === id);
    // a screen recorded before the verdict was kept has its stats: the verdict is computed from them the same way
    return c ? (c.sign_test ?? signTestEvidence(c.stats)) : null;
  } catch {
    return null;
  }
}

/** The top-level `.agent/` folder install and undo never touch. */
const MEMORY_DIR = "memory";

/** Every round record of `project`, oldest first; one that cannot be read → round_record_invalid. */
function readRounds(project: string): RoundRecord[] {
  const dir = projectPaths(project).rounds;
  if (!lstatOrNone(dir)?.isDirectory()) return [];
  const out: RoundRecord[] = [];
  for (const name of readdirSync(dir).filter((n) => /^\d+$/.test(n)).sort((a, b) => Number(a) - Number(b))) {
    const path = join(projectPaths(project).round(Number(name)), "round.json");
    if (!lstatOrNone(path)) continue; // a round that has not written its first stage
    let r: RoundRecord;
    try {
      r = JSON.parse(readPlainFile(path, newBudget()).data.toString("utf8"));
    } catch (e) {
      throw new EvolveError("round_record_invalid", `${path} cannot be read as JSON (${firstLine(e)})`, "fix or remove that round record");
    }
    if (!r || typeof r !== "object" || !Array.isArray(r.confirmed)) {
      throw new EvolveError("round_record_invalid", `${path} is not a round record (no confirmed list)`, "fix or remove that round record");
    }
    out.push(r);
  }
  return out;
}

/** What an install will do: the writes and removals, and the folders it makes and removes. */
interface InstallPlan {
  files: InstallRecord["files"];
  dirs_created: string[];
  dirs_removed: string[];
}

/** The plan that turns the live listing into the overlay's (both without memory/). */
function planInstall(live: string, liveList: TreeListing, overlay: string, overList: TreeListing): InstallPlan {
  const budget = newBudget();
  const files: InstallRecord["files"] = [];
  for (const [rel, mode] of overList.files) {
    const liveMode = liveList.files.get(rel);
    if (liveMode !== undefined && liveMode === mode) {
      const a = readPlainFile(join(live, rel), budget).data;
      const b = readPlainFile(join(overlay, rel), budget).data;
      if (a.equals(b)) continue;
    }
    files.push({ path: rel, existed: liveMode !== undefined, action: "write" });
  }
  for (const rel of liveList.files.keys()) if (!overList.files.has(rel)) files.push({ path: rel, existed: true, action: "remove" });
  files.sort((a, b) => (a.path < b.path ? -1 : 1));
  return {
    files,
    dirs_created: [...overList.dirs].filter((d) => !liveList.dirs.has(d)).sort(),
    dirs_removed: [...liveList.dirs].filter((d) => !overList.dirs.has(d)).sort(),
  };
}

/** A backup folder name that sorts by time: `<yyyymmddThhmmssmmmZ>-<4 hex>`. */
function backupName(at: string): string {
  return `${at.replace(/[-:.]/g, "")}-${randomBytes(2).toString("hex")}`;
}

/** Writes an install record whole (temporary file + rename). */
function writeRecord(dir: string, rec: InstallRecord): void {
  writeFileAtomic(join(dir, "install.json"), Buffer.from(`${JSON.stringify(rec, null, 2)}\n`), 0o644);
}

/**
 * The first half of an install, exported so a test can stop an install where a kill would: checks the candidate
 * may be installed, then copies every live file the install will replace or remove into a new backup and writes its
 * `install.json`. The live `.agent/` is not touched. Returns the record, the backup folder and the overlay to
 * install from (a temporary folder the caller removes).
 */
export function prepareInstall(
  project: string,
  id: string,
  o: { force?: boolean; overrideHoldout?: boolean; requireSignTest?: boolean } = {},
): { record: InstallRecord; backupDir: string; overlay: string; scratch: string } {
  readCandidate(project, id);
  const rounds = readRounds(project);
  const confirmedIn = rounds.filter((r) => r.confirmed.includes(id)).pop();
  if (!confirmedIn && !o.force) {
    throw new EvolveError("candidate_not_confirmed", `candidate ${id} is confirmed in no round`, "run a round that confirms it (`evolve harness round`), or pass --force to install it anyway");
  }
  const notHeld = rounds.filter((r) => r.holdout?.results?.[id]?.held === false).pop();
  if (notHeld && !o.overrideHoldout) {
    const s = notHeld.holdout!.results[id];
    throw new EvolveError(
      "holdout_not_held",
      `candidate ${id}'s gain did not hold on the holdout ${notHeld.holdout!.source} in round ${notHeld.round} (mean gain ${s.mean_gain}, n = ${s.n})`,
      "pass --override-holdout to install it anyway",
    );
  }
  const evidence = screenEvidence(project, id, confirmedIn);
  if (o.requireSignTest && !evidence?.significant) {
    throw new EvolveError(
      "sign_test_not_significant",
      evidence ? `candidate ${id} was confirmed in round ${confirmedIn!.round} on weak evidence: ${evidence.detail}` : `candidate ${id} has no screen whose sign test can be read`,
      "screen it on more tasks (more cards, --sample) until its sign test holds, or install without --require-sign-test",
    );
  }
  const paths = projectPaths(project);
  const scratch = mkdtempSync(join(tmpdir(), "evolve-install-"));
  try {
    const overlay = buildOverlay(project, id, scratch);
    const liveList = listTree(paths.agent, [MEMORY_DIR]);
    const plan = planInstall(paths.agent, liveList, overlay, listTree(overlay));
    const at = new Date().toISOString();
    mkdirSync(paths.backups, { recursive: true });
    let name = backupName(at);
    while (lstatOrNone(join(paths.backups, name))) name = backupName(at);
    // built under a dot-name and renamed: a backup folder without its install.json is never seen by undo
    const staging = join(paths.backups, `.${name}`);
    mkdirSync(join(staging, "files"), { recursive: true });
    try {
      const budget = newBudget();
      for (const f of plan.files) {
        if (!f.existed) continue;
        const { data, mode } = readPlainFile(join(paths.agent, f.path), budget);
        const dst = join(staging, "files", f.path);
        ensureDir(dirname(dst));
        writeFileAtomic(dst, data, mode);
      }
    } catch (e) {
      rmSync(staging, { recursive: true, force: true });
      throw e;
    }
    const record: InstallRecord = {
      candidate: id,
      at,
      backup: name,
      ...plan,
      completed_at: null,
      undone_at: null,
      confirmed_in_round: confirmedIn ? confirmedIn.round : null,
      forced: !confirmedIn,
      holdout_overridden: !!notHeld,
      sign_test: evidence,
    };
    writeRecord(staging, record);
    const backupDir = join(paths.backups, name);
    renameSync(staging, backupDir);
    return { record, backupDir, overlay, scratch };
  } catch (e) {
    rmSync(scratch, { recursive: true, force: true });
    throw e;
  }
}

/**
 * Installs candidate `id` into the live `.agent/` of `project` and returns the install record. The candidate must be
 * confirmed in a round record (else candidate_not_confirmed, unless `force`), and a holdout it did not hold on refuses
 * it (holdout_not_held, unless `overrideHoldout`), and with `requireSignTest` a candidate whose screen's exact sign test
 * is not significant is refused (sign_test_not_significant); without it the record says so. Everything replaced is backed up first (see the module comment).
 */
export function installCandidate(project: string, id: string, o: { force?: boolean; overrideHoldout?: boolean; requireSignTest?: boolean } = {}): InstallRecord {
  const { record, backupDir, overlay, scratch } = prepareInstall(project, id, o);
  try {
    const agent = projectPaths(project).agent;
    const budget = newBudget();
    for (const f of record.files) if (f.action === "remove") rmSync(join(agent, f.path), { force: true });
    for (const d of [...record.dirs_removed].reverse()) rmSync(join(agent, d), { recursive: true, force: true });
    for (const d of record.dirs_created) ensureDir(join(agent, d));
    for (const f of record.files) {
      if (f.action !== "write") continue;
      const { data, mode } = readPlainFile(join(overlay, f.path), budget);
      writeFileAtomic(join(agent, f.path), data, mode);
    }
    const done = { ...record, completed_at: new Date().toISOString() };
    writeRecord(backupDir, done);
    return done;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Every install record under evolve/backups, newest first (folders without a readable install.json are skipped). */
export function listInstalls(project: string): InstallRecord[] {
  const dir = projectPaths(project).backups;
  if (!lstatOrNone(dir)?.isDirectory()) return [];
  const out: InstallRecord[] = [];
  for (const name of readdirSync(dir).filter((n) => !n.startsWith(".")).sort().reverse()) {
    const path = join(dir, name, "install.json");
    try {
      const rec = JSON.parse(readFileSync(path, "utf8")) as InstallRecord;
      if (rec && Array.isArray(rec.files) && rec.backup === name) out.push(rec);
    } catch {
      // not an install's backup (or not one evolve wrote): nothing undo could use
    }
  }
  return out;
}

/**
 * Undoes the newest install not yet undone: the files it added are removed, the ones it replaced or removed are
 * restored byte for byte (with their permissions) from its backup, its folders put back, and the record marked
 * undone. Works the same on an install that was killed part-way. Nothing to undo → install_nothing_to_undo.
 */
export function undoInstall(project: string): InstallRecord {
  const rec = listInstalls(project).find((r) => !r.undone_at);
  if (!rec) throw new EvolveError("install_nothing_to_undo", "no install is left to undo", "every backup `evolve harness install` made has been restored already");
  const paths = projectPaths(project);
  const agent = paths.agent;
  const backupDir = join(paths.backups, rec.backup);
  const agentSt = lstatOrNone(agent);
  if (agentSt?.isSymbolicLink()) throw unsafe(agent, "a symbolic link");
  // a link planted in the live harness since the install would turn the writes below into writes elsewhere
  listTree(agent, [MEMORY_DIR]);
  for (const f of rec.files) if (!f.existed) rmSync(join(agent, f.path), { force: true });
  for (const d of [...rec.dirs_created].reverse()) {
    try {
      rmdirSync(join(agent, d));
    } catch {
      // not empty (something was written there since) or already gone: left as it is
    }
  }
  for (const d of rec.dirs_removed) ensureDir(join(agent, d));
  const budget = newBudget();
  for (const f of rec.files) {
    if (!f.existed) continue;
    const { data, mode } = readPlainFile(join(backupDir, "files", f.path), budget);
    const dst = join(agent, f.path);
    ensureDir(dirname(dst));
    writeFileAtomic(dst, data, mode);
  }
  const undone = { ...rec, undone_at: new Date().toISOString() };
  writeRecord(backupDir, undone);
  return undone;
}

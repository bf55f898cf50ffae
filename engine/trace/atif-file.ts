/**
 * Reading a trajectory file for `evolve trajectory validate`: bounded, and only a regular file, so a FIFO cannot hang
 * the command and a device or a huge file cannot exhaust memory.
 */
import { constants } from "node:fs";
import { open } from "node:fs/promises";
import { EvolveError, firstLine } from "../errors.ts";
import { readRange } from "../box/fs.ts";
import { validateTrajectory, type TrajectoryFinding } from "./atif-validate.ts";

/** Trajectory files larger than this are refused rather than read (a trajectory of 256 MB is already extreme). */
export const TRAJECTORY_READ_LIMIT = 256 * 1024 * 1024;

function unreadable(path: string, why: string): EvolveError {
  return new EvolveError("trajectory_unreadable", `cannot read ${path}: ${why}`, "give the path of an ATIF trajectory.json");
}

/**
 * The parsed JSON of the file at `path`. Throws `trajectory_unreadable` (exit 2) when it is missing, not a regular
 * file, over `limit` bytes, not UTF-8 JSON.
 */
export async function readTrajectoryFile(path: string, limit = TRAJECTORY_READ_LIMIT): Promise<unknown> {
  let fh;
  try {
    // non-blocking, so opening a FIFO with no writer returns at once and the stat below refuses it
    fh = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw unreadable(path, code === "ENOENT" ? "no such file" : code === "EISDIR" ? "a folder, not a file" : firstLine(e));
  }
  let text: string;
  try {
    const st = await fh.stat();
    if (st.isDirectory()) throw unreadable(path, "a folder, not a file");
    if (!st.isFile()) throw unreadable(path, "not a regular file (a FIFO, a socket or a device)");
    if (st.size > limit) throw unreadable(path, `${st.size} bytes, over the ${limit}-byte limit`);
    const buf = await readRange(fh, 0, st.size);
    text = new TextDecoder("utf-8", { fatal: true }).decode(buf);
  } catch (e) {
    if (e instanceof EvolveError) throw e;
    throw unreadable(path, e instanceof TypeError ? "not UTF-8 text" : firstLine(e));
  } finally {
    await fh.close().catch(() => undefined);
  }
  try {
    return JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch (e) {
    throw unreadable(path, `not JSON (${firstLine(e)})`);
  }
}

/** The findings for the trajectory file at `path` (empty when valid); throws as {@link readTrajectoryFile}. */
export async function validateTrajectoryFile(path: string): Promise<TrajectoryFinding[]> {
  return validateTrajectory(await readTrajectoryFile(path));
}

/**
 * A box's own overlay layer (its upper dir) read from the host: the owners of what the box added or modified, with
 * no process in the box (an exec costs a runtime process, ~0.1 s on podman). The box may still run, and its root
 * may have put links anywhere in that layer, so no link is followed: each path's folder is opened without
 * following its last component, the descriptor's own path (/proc/self/fd) must be that folder inside the layer (a
 * link in a parent would lead elsewhere), and the entry is read through the descriptor
 * (`/proc/self/fd/<fd>/<name>`: resolved from the folder the descriptor holds, not by its path again), its own
 * stat, never its target's. A path that cannot be read that way is left out of the answer, for the caller to ask
 * the box itself.
 */
import { constants } from "node:fs";
import { lstat, open, readlink, realpath } from "node:fs/promises";
import { posix } from "node:path";

/** One range of a container's id map: box ids `box`…`box + size - 1` are host ids `host`…. */
export interface IdRange {
  box: number;
  host: number;
  size: number;
}

/** The id a box's `stat` shows for a host id that its namespace does not map (the kernel's overflow id). */
export const OVERFLOW_ID = 65534;

/** Folders of one layer read at once. */
const CONCURRENCY = 8;

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * Podman's id map lines ("0:100000:65536": box id, host id, size) as ranges; [] for none (box ids are host ids);
 * undefined when a line cannot be read (the caller then does not trust the layer's owners).
 */
export function parseIdMap(lines: unknown): IdRange[] | undefined {
  if (lines === undefined || lines === null) return [];
  if (!Array.isArray(lines)) return undefined;
  const out: IdRange[] = [];
  for (const l of lines) {
    const m = /^(\d+):(\d+):(\d+)$/.exec(String(l));
    if (!m) return undefined;
    out.push({ box: Number(m[1]), host: Number(m[2]), size: Number(m[3]) });
  }
  return out;
}

/** The id a box sees for host id `id` under `map` ([]: the same id). */
export function boxId(id: number, map: readonly IdRange[]): number {
  if (map.length === 0) return id;
  for (const r of map) if (id >= r.host && id < r.host + r.size) return r.box + (id - r.host);
  return OVERFLOW_ID;
}

/**
 * Owners (as box ids under `uids` / `gids`) of the box paths `paths` found in `layer`, the box's upper dir; a path
 * that is not there as itself (absent, under a link, not a normalized absolute path) is left out. Never follows a
 * link (see the module comment).
 */
export async function ownersInLayer(layer: string, paths: readonly string[], uids: readonly IdRange[], gids: readonly IdRange[]): Promise<Map<string, [number, number]>> {
  const out = new Map<string, [number, number]>();
  const root = await realpath(layer);
  const byDir = new Map<string, string[]>();
  for (const p of paths) {
    if (!p.startsWith("/") || p === "/" || posix.normalize(p) !== p || p.endsWith("/")) continue;
    const d = posix.dirname(p);
    const names = byDir.get(d);
    if (names) names.push(posix.basename(p));
    else byDir.set(d, [posix.basename(p)]);
  }
  const dirs = [...byDir];
  const readDir = async ([dir, names]: [string, string[]]) => {
    const want = dir === "/" ? root : `${root}${dir}`;
    let fh;
    try {
      fh = await open(want, DIR_FLAGS);
    } catch {
      return; // absent from the layer, or a link: the box is asked
    }
    try {
      if ((await readlink(`/proc/self/fd/${fh.fd}`)) !== want) return;
      for (const name of names) {
        const st = await lstat(`/proc/self/fd/${fh.fd}/${name}`).catch(() => undefined);
        // a whiteout (a character device 0/0) is a deletion, not the path's owner
        if (!st || (st.isCharacterDevice() && st.rdev === 0)) continue;
        out.set(dir === "/" ? `/${name}` : `${dir}/${name}`, [boxId(st.uid, uids), boxId(st.gid, gids)]);
      }
    } finally {
      await fh.close();
    }
  };
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(CONCURRENCY, dirs.length) }, async () => {
      while (next < dirs.length) await readDir(dirs[next++]);
    }),
  );
  return out;
}

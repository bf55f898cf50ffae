/**
 * Where blobs live. Files never go into LMDB: task trees and trial outputs sit on disk beside the store, named by
 * the key of the record that describes them.
 */
import { join } from "node:path";

/**
 * The folder holding a stored task's files: `<home>/tasks/sha256-<hex>/`. The digest's `:` becomes `-` because a
 * colon in a host path breaks `-v host:container` bind mounts.
 */
export function taskBlobDir(home: string, digest: string): string {
  return join(home, "tasks", digest.replace(":", "-"));
}

/** The folder holding one trial's outputs: `<home>/trials/<id>/`. */
export function trialDir(home: string, id: string): string {
  return join(home, "trials", id);
}

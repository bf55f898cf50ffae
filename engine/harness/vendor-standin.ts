/**
 * STAND-IN for engine/harness/vendor.ts (wt-vendor): only the lookup the trial runner needs, same name and shape,
 * so cli.ts switches its import when the real module lands and this file goes. Layout:
 * `<agents>/<harness>/<version>/` (npm global layout, `node/bin/node` when vendored), `<agents>` =
 * `$EVOLVE_AGENTS_DIR` or `$EVOLVE_HOME/agents`; an optional `manifest.json` there gives the version.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { evolveHome } from "../config.ts";

/** A vendored copy: its folder and what its manifest says (at least the version). */
export interface Vendored {
  dir: string;
  manifest: { harness: string; version: string; [k: string]: unknown };
}

/** The vendored copy of `harness` at `version` (default: the newest there), or undefined when none is. */
export function findVendored(harness: string, version?: string): Vendored | undefined {
  const root = join(process.env.EVOLVE_AGENTS_DIR || join(evolveHome(), "agents"), harness);
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).filter((v) => statSync(join(root, v), { throwIfNoEntry: false })?.isDirectory());
  const pick = version ?? versions.sort((a, b) => a.localeCompare(b, undefined, { numeric: true })).at(-1);
  if (!pick || !versions.includes(pick)) return undefined;
  const dir = join(root, pick);
  let manifest: Vendored["manifest"] = { harness, version: pick };
  try {
    manifest = { ...manifest, ...JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) };
  } catch {
    // no manifest: the folder's name is the version
  }
  return { dir, manifest };
}

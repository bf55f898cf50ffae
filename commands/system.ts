/**
 * `evolve doctor` and `evolve gc`: the container engine's health, and clean-up of what no live trial owns.
 */
import { loadConfig } from "../engine/config.ts";
import { runDoctor } from "../engine/doctor.ts";
import { openEngine } from "../engine/engine-choice.ts";
import { LABEL_HOME } from "../engine/driver/mod.ts";
import { gc, gcImages } from "../engine/gc.ts";
import { openStore } from "../engine/store/mod.ts";
import { out, outJson, style } from "./output.ts";

/** `evolve doctor`: exit 0 when every check passes, 1 otherwise (each failure printed with its fix). */
export async function doctorCommand(opts: { engine?: "podman" | "docker"; json?: boolean }): Promise<number> {
  const report = await runDoctor({ kind: opts.engine, home: loadConfig().home });
  if (opts.json) return outJson(report), report.ok ? 0 : 1;
  for (const c of report.checks) {
    out(`${c.ok ? style.green("ok  ") : style.red("FAIL")} ${c.name}${c.detail ? style.dim(`  ${c.detail}`) : ""}`);
    if (!c.ok && c.fix) for (const line of c.fix.split("\n")) out(`       ${style.yellow(line)}`);
  }
  out(report.ok ? `\n${report.kind} is ready` : `\n${report.checks.filter((c) => !c.ok).length} check(s) failed`);
  return report.ok ? 0 : 1;
}

/** `evolve gc`: removes this home's containers and networks that no live trial owns; with `--images`, its unneeded task images. */
export async function gcCommand(opts: { engine?: "podman" | "docker"; json?: boolean; dryRun?: boolean; images?: boolean }): Promise<number> {
  const config = loadConfig();
  const store = openStore(config.home);
  try {
    const engine = await openEngine({ kind: opts.engine, home: config.home });
    try {
      // Only this home's objects: another EVOLVE_HOME on the same engine has its own live trials.
      const result = await gc(engine, store, { dryRun: opts.dryRun, scope: { [LABEL_HOME]: config.home } });
      // `trial_id`/`job_id`: the vocabulary's name for another thing's id (docs/json.md)
      const named = <T extends { trial?: string; job?: string }>({ trial, job, ...rest }: T) => ({ ...rest, trial_id: trial, job_id: job });
      // after the boxes: an image only a dead box used is free once that box is gone
      const images = opts.images ? await gcImages(engine, store, config.home, { dryRun: opts.dryRun }) : undefined;
      if (opts.json) return outJson({ dry_run: opts.dryRun === true, containers: result.containers.map(named), networks: result.networks.map(named), ...(images ? { images: images.images, freed_bytes: images.freed_bytes, kept_images: images.kept } : {}) }), 0;
      const verb = opts.dryRun ? "would remove" : "removed";
      for (const c of result.containers) out(`${verb} container ${c.id.slice(0, 12)}${c.trial ? style.dim(` trial ${c.trial}`) : ""}`);
      for (const n of result.networks) out(`${verb} network ${n.name}`);
      for (const i of images?.images ?? []) out(`${verb} image ${i.tags[0] ?? i.id.replace(/^sha256:/, "").slice(0, 12)} ${style.dim(megabytes(i.size_bytes))}`);
      out(`${result.containers.length} container(s), ${result.networks.length} network(s) ${verb}`);
      if (images) {
        const inUse = images.kept.filter((k) => k.why === "in_use").length;
        const needed = images.kept.length - inUse;
        out(`${images.images.length} image(s) ${verb}, ${opts.dryRun ? "would free" : "freeing"} ${megabytes(images.freed_bytes)}; kept ${needed} an unsettled trial needs and ${inUse} a container uses`);
      }
      return 0;
    } finally {
      await engine.close();
    }
  } finally {
    await store.close();
  }
}

function megabytes(bytes: number): string {
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

/**
 * `evolve pack` and `evolve unpack` (portable packs for air-gapped machines): argument handling and printing only;
 * the work is engine/pack's.
 */
import { resolve } from "node:path";
import { openEngine } from "../engine/engine-choice.ts";
import type { EngineKind } from "../engine/driver/mod.ts";
import { packRef, unpackFile } from "../engine/pack/mod.ts";
import { withStore } from "./store.ts";
import { out, outJson, style } from "./output.ts";

const mb = (n: number) => `${(n / 1024 ** 2).toFixed(1)} MB`;

/** `evolve pack <name@version | job> -o FILE [--agent name[@version]]...` */
export async function packCommand(ref: string, opts: { output: string; agent?: string[]; engine?: EngineKind; json?: boolean }): Promise<number> {
  const started = Date.now();
  const r = await withStore(async (store, home) => {
    const engine = await openEngine({ kind: opts.engine, home });
    // progress goes to stderr: stdout is the result (or the --json document)
    return packRef(store, home, engine, ref, { out: resolve(opts.output), agents: opts.agent, log: (l) => process.stderr.write(style.dim(l) + "\n") });
  });
  const seconds = (Date.now() - started) / 1000;
  if (opts.json) return outJson({ ...r, elapsed_sec: seconds }), 0;
  out(`${style.green("packed")} ${r.dataset.name}@${r.dataset.version} ${style.dim(`(${r.dataset.tasks} tasks, ${r.images.length} image(s), ${r.agents.length} agent(s)) → ${r.file}`)}`);
  out(`  pack ${mb(r.bytes)}; images ${mb(r.image_bytes)} added up, ${mb(r.images_archive_bytes)} in one archive (shared layers once); ${seconds.toFixed(1)} s`);
  out(style.dim(`  manifest sha256 ${r.manifest_sha256}`));
  out(style.dim(`on the other machine: evolve unpack ${r.file} && evolve run -d ${r.dataset.name}@${r.dataset.version} -a <agent>`));
  return 0;
}

/** `evolve unpack <file>` */
export async function unpackCommand(file: string, opts: { engine?: EngineKind; json?: boolean }): Promise<number> {
  const started = Date.now();
  const r = await withStore(async (store, home) => {
    const engine = await openEngine({ kind: opts.engine, home });
    return unpackFile(store, home, engine, resolve(file), { log: (l) => process.stderr.write(style.dim(l) + "\n") });
  });
  const seconds = (Date.now() - started) / 1000;
  if (opts.json) return outJson({ ...r, elapsed_sec: seconds }), 0;
  out(`${style.green("unpacked")} ${r.dataset.name}@${r.dataset.version} ${style.dim(`(${r.dataset.status}; ${r.dataset.tasks} tasks, ${r.dataset.digest})`)}`);
  for (const i of r.images) out(`  ${style.dim("image")} ${i}`);
  for (const a of r.agents.imported) out(`  ${style.dim("agent")} ${a.harness}@${a.version}`);
  for (const a of r.agents.skipped) out(`  ${style.dim("agent")} ${a.harness}@${a.version} ${style.dim("(already vendored here)")}`);
  out(style.dim(`  manifest sha256 ${r.manifest_sha256}; ${seconds.toFixed(1)} s`));
  out(style.dim(`run it: evolve run -d ${r.dataset.name}@${r.dataset.version} -a <agent>`));
  return 0;
}

/**
 * Portable packs for air-gapped machines (issue 22 §4): `evolve pack` writes one file with a dataset version's
 * task folders, every image its tasks run (one archive, shared layers once) and the vendored agents a job used,
 * under a manifest of sha256 digests; `evolve unpack` verifies all of it before anything is used, then loads the
 * images, imports the agents and publishes the dataset, so that `evolve run -d name@version -a <agent>` there finds
 * every image by its key and builds and pulls nothing. Pure engine: never prints.
 */
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, readFile, rename, rm, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import { datasetDigest, publishDataset, resolveDataset } from "../dataset.ts";
import { checkDatasetName } from "../dataset-ref.ts";
import { entryBlocks, endBlocks } from "../driver/tar.ts";
import { LABEL_ENV_KEY, type Engine } from "../driver/types.ts";
import { EvolveError } from "../errors.ts";
import { agentsDir, exportAgents, importAgents, listVendored } from "../harness/vendor.ts";
import type { JobConfig } from "../job/job.ts";
import { findJob } from "../job/list.ts";
import { newId, taskBlobDir, type Store } from "../store/index.ts";
import { listTaskFiles, taskDigest } from "../task/digest.ts";
import { summarizeTask } from "../task/model.ts";
import { describeImages, loadImages, saveImages, taskImages } from "./images.ts";
import { AGENTS_MEMBER, DEFAULT_LIMITS, IMAGES_MEMBER, MANIFEST_NAME, PACK_FORMAT, taskFolder, type PackLimits, type PackManifest, type PackMember } from "./manifest.ts";
import { readPack } from "./read.ts";

/** What `pack` is asked for. */
export interface PackOptions {
  /** The pack file to write (replaced only once complete). */
  out: string;
  /** For a dataset: vendored agents to carry, `harness` (every version here) or `harness@version`. */
  agents?: string[];
  /** Build output and progress lines. */
  log?: (line: string) => void;
}

/** What a pack holds, and its size against the images'. */
export interface PackResult {
  file: string;
  bytes: number;
  manifest_sha256: string;
  source: PackManifest["source"];
  dataset: { name: string; version: string; digest: string; tasks: number };
  images: { ref: string; key?: string; size: number }[];
  /** The images' sizes added up as the engine reports each (shared layers counted once per image). */
  image_bytes: number;
  /** The size of the one archive holding them all (shared layers once), before the pack's compression. */
  images_archive_bytes: number;
  agents: { harness: string; version: string }[];
}

/** The dataset (tasks named and digested) and agents a pack carries for `ref`: a dataset, or a job's. */
function resolveSource(store: Store, ref: string, agents: readonly string[]): { source: PackManifest["source"]; name: string; version: string; tasks: { name: string; digest: string }[]; agents: string[] } {
  let jobId: string | undefined;
  if (!ref.includes("@")) {
    try {
      jobId = findJob(store, ref).id;
    } catch (e) {
      if (!(e instanceof EvolveError) || e.code !== "job_not_found") throw e;
    }
  }
  if (jobId === undefined) {
    const d = resolveDataset(store, ref)[0];
    return { source: { kind: "dataset", ref: `${d.name}@${d.version}` }, name: d.name, version: d.version, tasks: d.tasks, agents: [...agents] };
  }
  const job = store.getJob(jobId)!;
  const config = job.config as JobConfig;
  // every vendored version of each agent the job's trials ran: the far machine then picks the one this one did
  const used = [...new Set(store.listTrials(jobId).map((t) => t.agent))];
  const vendored = new Set(listVendored().map((v) => v.manifest.harness));
  const carried = [...new Set([...used.filter((a) => vendored.has(a)), ...agents])];
  if (config.source?.kind === "dataset") {
    // the whole version: a version's content never changes, so a subset must not be published under its name
    const d = resolveDataset(store, config.source.ref)[0];
    return { source: { kind: "job", ref: jobId }, name: d.name, version: d.version, tasks: d.tasks, agents: carried };
  }
  // a folder run (`-p`) has no dataset: its tasks become one named after the job
  const name = `job-${jobId.toLowerCase()}`;
  checkDatasetName(name);
  const tasks = (config.tasks ?? []).map((t) => ({ name: t.name, digest: t.digest }));
  const names = new Set<string>();
  for (const t of tasks) {
    if (names.has(t.name)) throw new EvolveError("dataset_task_duplicate", `job ${jobId} ran two tasks named ${t.name}; a pack publishes them as one dataset, where names are distinct`, "publish the tasks as a dataset with distinct names, run it, and pack that");
    names.add(t.name);
  }
  return { source: { kind: "job", ref: jobId }, name, version: "1", tasks, agents: carried };
}

async function sha256OfFile(file: string): Promise<string> {
  const h = createHash("sha256");
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return h.digest("hex");
}

/** A file entry's header whose size may pass ustar's 8 GiB: the size field in GNU base-256 (untar.ts reads it). */
function bigFileHeader(name: string, size: number): Buffer {
  const blocks = entryBlocks({ name, type: "file", mode: 0o644, mtime: 0 });
  const h = Buffer.from(blocks[blocks.length - 1]);
  h.fill(0, 124, 136);
  h[124] = 0x80;
  let v = size;
  for (let i = 135; i > 124; i--) {
    h[i] = v % 256;
    v = Math.floor(v / 256);
  }
  h.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8, "ascii");
  return Buffer.concat(blocks.slice(0, -1).concat([h]));
}

/**
 * Packs a dataset version (`name@version`, or a bare name for its newest) or a job (its id, a unique start of it or
 * its --job-name, as every job command takes it; a job wins over a dataset of the same bare name) into `opts.out`.
 * A job carries the dataset it ran (or its tasks as dataset `job-<id>@1`) and the vendored agents its trials ran.
 * Images are built first where missing, agents go in as `agent export` writes them, every member is digested into
 * the manifest.
 */
export async function packRef(store: Store, home: string, engine: Engine, ref: string, opts: PackOptions): Promise<PackResult> {
  const log = opts.log ?? (() => {});
  const src = resolveSource(store, ref, opts.agents ?? []);
  const stage = join(dirname(opts.out), `.${basename(opts.out)}.${newId()}.tmp`);
  await mkdir(stage, { recursive: true });
  try {
    const tasks = src.tasks.map((t) => ({ ...t, dir: taskBlobDir(home, t.digest), folder: taskFolder(t.name, t.digest) }));
    const refs: string[] = [];
    for (const t of tasks) {
      log(`images of ${t.name}`);
      for (const r of await taskImages(engine, { digest: t.digest, dir: t.dir, home, log })) if (!refs.includes(r)) refs.push(r);
    }
    const members: (PackMember & { abs: string; mode: number })[] = [];
    for (const t of tasks) {
      for (const f of await listTaskFiles(t.dir)) {
        const data = await readFile(f.abs);
        members.push({ path: `tasks/${t.folder}/${f.path}`, size: data.length, sha256: createHash("sha256").update(data).digest("hex"), abs: f.abs, mode: f.executable ? 0o755 : 0o644 });
      }
    }
    const images = refs.length > 0 ? await describeImages(engine, refs) : [];
    let imagesArchive = 0;
    if (refs.length > 0) {
      log(`saving ${refs.length} image(s)`);
      const abs = join(stage, IMAGES_MEMBER);
      await saveImages(engine, refs, abs);
      imagesArchive = (await stat(abs)).size;
      members.push({ path: IMAGES_MEMBER, size: imagesArchive, sha256: await sha256OfFile(abs), abs, mode: 0o644 });
    }
    let agents: { harness: string; version: string }[] = [];
    if (src.agents.length > 0) {
      const abs = join(stage, AGENTS_MEMBER);
      agents = (await exportAgents(abs, src.agents)).agents;
      members.push({ path: AGENTS_MEMBER, size: (await stat(abs)).size, sha256: await sha256OfFile(abs), abs, mode: 0o644 });
    }
    const manifest: PackManifest = {
      format: PACK_FORMAT,
      created_at: new Date().toISOString(),
      source: src.source,
      dataset: { name: src.name, version: src.version, digest: datasetDigest(src.tasks), tasks: tasks.map((t) => ({ name: t.name, digest: t.digest, folder: t.folder })) },
      images,
      agents,
      members: members.map(({ path, size, sha256 }) => ({ path, size, sha256 })),
    };
    const manifestText = Buffer.from(JSON.stringify(manifest, null, 1) + "\n", "utf8");
    async function* blocks(): AsyncGenerator<Buffer> {
      yield* entryBlocks({ name: MANIFEST_NAME, type: "file", mode: 0o644, mtime: 0, data: manifestText });
      for (const m of members) {
        if (m.path.startsWith("tasks/")) {
          yield* entryBlocks({ name: m.path, type: "file", mode: m.mode, mtime: 0, data: await readFile(m.abs) });
          continue;
        }
        // the archives are large: streamed, never held whole
        yield bigFileHeader(m.path, m.size);
        for await (const chunk of createReadStream(m.abs)) yield chunk as Buffer;
        const rest = m.size % 512;
        if (rest) yield Buffer.alloc(512 - rest);
      }
      yield endBlocks();
    }
    log(`writing ${opts.out}`);
    const tmp = join(stage, "pack.partial");
    // level 1: the layers are mostly uncompressed tars; a higher level costs minutes on a large pack for little gain
    await pipeline(Readable.from(blocks()), createGzip({ level: 1 }), createWriteStream(tmp, { flags: "wx" }));
    await rename(tmp, opts.out);
    return {
      file: opts.out,
      bytes: (await stat(opts.out)).size,
      manifest_sha256: createHash("sha256").update(manifestText).digest("hex"),
      source: src.source,
      dataset: { name: src.name, version: src.version, digest: manifest.dataset.digest, tasks: tasks.length },
      images,
      image_bytes: images.reduce((n, i) => n + i.size, 0),
      images_archive_bytes: imagesArchive,
      agents,
    };
  } finally {
    await rm(stage, { recursive: true, force: true });
  }
}

/** What `unpack` is asked for. */
export interface UnpackOptions {
  limits?: PackLimits;
  /** Where vendored agents go (default: the agents folder, EVOLVE_AGENTS_DIR). */
  agentsRoot?: string;
  log?: (line: string) => void;
}

/** What an unpack installed. */
export interface UnpackResult {
  file: string;
  manifest_sha256: string;
  source: PackManifest["source"];
  dataset: { name: string; version: string; digest: string; tasks: number; status: "published" | "unchanged" | "restored" };
  images: string[];
  agents: { imported: { harness: string; version: string }[]; skipped: { harness: string; version: string }[] };
}

/**
 * Unpacks `file`: every member is checked against the manifest while it streams into a staging folder (readPack),
 * then each task's digest and name and the dataset's digest are recomputed from the staged files. Only then are the
 * images loaded (and each checked to carry the key its manifest records), the agents imported (re-verified against
 * their own manifests) and the dataset published last, so it is listed only once everything it needs is here.
 */
export async function unpackFile(store: Store, home: string, engine: Engine, file: string, opts: UnpackOptions = {}): Promise<UnpackResult> {
  const log = opts.log ?? (() => {});
  const stage = join(home, "tmp", `unpack-${newId()}`);
  await mkdir(stage, { recursive: true });
  try {
    log(`verifying ${file}`);
    const { manifest: m, sha256: manifestSha } = await readPack(file, stage, opts.limits ?? DEFAULT_LIMITS);
    const mismatch = (why: string) => new EvolveError("pack_digest_mismatch", `${file}: ${why}; nothing was unpacked`, "make the pack again with `evolve pack`");
    for (const t of m.dataset.tasks) {
      const dir = join(stage, "tasks", t.folder);
      const digest = await taskDigest(dir);
      if (digest !== t.digest) throw mismatch(`task ${t.name} has digest ${digest}, not the ${t.digest} its manifest records`);
      const name = (await summarizeTask(dir)).name;
      if (name !== t.name) throw mismatch(`task folder ${t.folder} is named ${name}, not ${t.name}`);
    }
    const dsDigest = datasetDigest(m.dataset.tasks);
    if (dsDigest !== m.dataset.digest) throw mismatch(`dataset ${m.dataset.name}@${m.dataset.version} has digest ${dsDigest}, not the ${m.dataset.digest} its manifest records`);
    // a version held here with other content is refused now, not after the images are loaded and the agents imported
    const held = store.getDataset(m.dataset.name, m.dataset.version);
    if (held && held.digest !== m.dataset.digest) {
      const ref = `${m.dataset.name}@${m.dataset.version}`;
      throw held.status === "deleted"
        ? new EvolveError("dataset_version_deleted", `${ref} was deleted here and held other content; nothing was unpacked`, "pack the dataset under a new version")
        : new EvolveError("dataset_version_exists", `${ref} is already published here with different content; nothing was unpacked`, "pack the dataset under a new version; a published version never changes");
    }
    if (m.images.length > 0) {
      log(`loading ${m.images.length} image(s)`);
      await loadImages(engine, join(stage, IMAGES_MEMBER));
      for (const i of m.images) {
        const labels = await engine.imageLabels(i.ref);
        if (!labels) throw new EvolveError("pack_image_failed", `${file}: image ${i.ref} is not here after loading ${IMAGES_MEMBER}`);
        if (i.key !== undefined && labels[LABEL_ENV_KEY] !== i.key) throw mismatch(`image ${i.ref} carries key ${labels[LABEL_ENV_KEY] ?? "(none)"}, not ${i.key}`);
      }
    }
    let agents: UnpackResult["agents"] = { imported: [], skipped: [] };
    if (m.agents.length > 0) {
      log(`importing ${m.agents.length} agent(s)`);
      agents = await importAgents(join(stage, AGENTS_MEMBER), { root: opts.agentsRoot ?? agentsDir() });
    }
    const published = await publishDataset(store, home, join(stage, "tasks"), { name: m.dataset.name, version: m.dataset.version });
    if (published.dataset.digest !== m.dataset.digest) throw mismatch(`the dataset published with digest ${published.dataset.digest}`);
    return {
      file,
      manifest_sha256: manifestSha,
      source: m.source,
      dataset: { name: m.dataset.name, version: m.dataset.version, digest: m.dataset.digest, tasks: m.dataset.tasks.length, status: published.status },
      images: m.images.map((i) => i.ref),
      agents,
    };
  } finally {
    await rm(stage, { recursive: true, force: true });
  }
}

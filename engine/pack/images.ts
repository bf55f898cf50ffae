/**
 * The images a pack carries: every image a task's trials run, found (or built) exactly as a trial would find or
 * build it (trial/box.ts ensureEnvImage, trial/compose.ts), so that on the far machine a trial finds each by the
 * same reference and key and builds nothing. Saved as one archive, shared layers once, and loaded back with the
 * engine's CLI.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { LABEL_ENV_KEY, type Engine } from "../driver/types.ts";
import { EvolveError, firstLine } from "../errors.ts";
import { parseTaskToml } from "../task/model.ts";
import { ensureEnvImage, requireImage } from "../trial/box.ts";
import { ComposeTask } from "../trial/compose.ts";
import { resolveAgentEnv } from "../trial/env.ts";
import { TrialFailure } from "../outcome.ts";

/**
 * The references of every image the stored task in `dir` runs: its compose services' images, its docker_image or
 * its environment/ image, and a separate verifier's tests/ image. Images evolve builds are built first when missing
 * (build_failed when one does not build); a pinned image that is not here is `image_missing`.
 */
export async function taskImages(engine: Engine, o: { digest: string; dir: string; home: string; log: (line: string) => void }): Promise<string[]> {
  const cfg = parseTaskToml(readFileSync(join(o.dir, "task.toml"), "utf8"));
  const env = cfg.environment;
  const context = join(o.dir, "environment");
  const timeoutMs = env.build_timeout_sec * 1000;
  const refs: string[] = [];
  try {
    // compose sees the literals and `:-default`s: a secret-valued variable never names an image a pack could carry
    const compose = ComposeTask.load(o.dir, resolveAgentEnv(env.env, {}).all, env.env);
    const hasDockerfile = existsSync(join(context, "Dockerfile"));
    if (compose) {
      await compose.build(engine, { digest: o.digest, force: false, timeoutMs, mainFromCompose: !env.docker_image && !hasDockerfile, log: o.log });
      refs.push(...compose.imageRefs());
    }
    if (env.docker_image) {
      await requireImage(engine, env.docker_image);
      refs.push(env.docker_image);
    } else if (hasDockerfile) {
      refs.push((await ensureEnvImage(engine, { taskDigest: o.digest, taskDir: o.dir, context, home: o.home, force: false, timeoutMs, log: o.log })).tag);
    }
    if (!env.docker_image && existsSync(join(o.dir, "tests", "Dockerfile"))) {
      refs.push((await ensureEnvImage(engine, { taskDigest: o.digest, taskDir: o.dir, context: join(o.dir, "tests"), home: o.home, force: false, timeoutMs, log: o.log })).tag);
    }
  } catch (e) {
    if (!(e instanceof TrialFailure)) throw e;
    const code = e.type === "ImageNotFoundError" ? "image_missing" : "build_failed";
    throw new EvolveError(code, `${e.message}; nothing was packed`, code === "image_missing" ? "load the image here first (podman load / docker load)" : "fix the task's build, or build it once with `evolve run`");
  }
  return [...new Set(refs)];
}

/** What a save or load ran, and the CLI's last output when it failed. */
async function cli(engine: Engine, args: string[]): Promise<string> {
  const env = engine.kind === "docker" ? { ...process.env, DOCKER_HOST: `unix://${(await engine.info()).socket}` } : process.env;
  return new Promise((resolve, reject) => {
    const child = spawn(engine.kind, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (b: Buffer) => out.push(b));
    child.stderr.on("data", (b: Buffer) => err.push(b));
    child.on("error", (e) => reject(new EvolveError("pack_image_failed", `${engine.kind} ${args[0]}: ${firstLine(e)}`)));
    child.on("close", (code) => {
      if (code === 0) return resolve(Buffer.concat(out).toString("utf8"));
      const tail = Buffer.concat(err).toString("utf8").trim().split("\n").slice(-5).join("\n");
      reject(new EvolveError("pack_image_failed", `${engine.kind} ${args.slice(0, 2).join(" ")} failed (exit ${code}): ${tail}`));
    });
  });
}

/**
 * Saves `refs` into one archive at `file`. Podman writes a docker-archive with `--multi-image-archive` (a layer
 * shared by several images is stored once, and every tag is kept); Docker's `save` always does both.
 */
export async function saveImages(engine: Engine, refs: readonly string[], file: string): Promise<void> {
  const args = engine.kind === "podman" ? ["save", "--format", "docker-archive", "--multi-image-archive", "-o", file, ...refs] : ["save", "-o", file, ...refs];
  await cli(engine, args);
}

/** Loads an archive `saveImages` wrote: its images come back under their tags, with their labels. */
export async function loadImages(engine: Engine, file: string): Promise<void> {
  await cli(engine, ["load", "-i", file]);
}

/** Each image's size as the engine reports it (layers shared with other images counted in full) and its env key. */
export async function describeImages(engine: Engine, refs: readonly string[]): Promise<{ ref: string; key?: string; size: number }[]> {
  const out: { ref: string; key?: string; size: number }[] = [];
  for (const ref of refs) {
    const text = await cli(engine, ["image", "inspect", "--format", "{{.Size}}", ref]);
    const labels = await engine.imageLabels(ref);
    const key = labels?.[LABEL_ENV_KEY];
    out.push({ ref, ...(key ? { key } : {}), size: Number(text.trim()) || 0 });
  }
  return out;
}

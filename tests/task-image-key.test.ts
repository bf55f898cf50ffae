/**
 * The key a task's image is built and found under (engine/trial/box.ts envImageKey): the build context's content
 * only, so tasks with identical environments share one image and any change to what the build reads makes another.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { taskDigest } from "../engine/task/digest.ts";
import { envImageKey, envImageTag } from "../engine/trial/box.ts";

const scratch = mkdtempSync(join(tmpdir(), "evolve-envkey-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A task folder: its task.toml names it, its environment/ holds `files`. */
function task(name: string, files: Record<string, string>, instruction = "Do it.\n"): string {
  const dir = join(scratch, name);
  mkdirSync(join(dir, "environment"), { recursive: true });
  writeFileSync(join(dir, "task.toml"), `[task]\nname = "keys/${name}"\n`);
  writeFileSync(join(dir, "instruction.md"), instruction);
  for (const [rel, text] of Object.entries(files)) writeFileSync(join(dir, "environment", rel), text);
  return dir;
}

async function key(dir: string): Promise<string> {
  return envImageKey(await taskDigest(dir), dir, join(dir, "environment"));
}

describe("environment image keys", () => {
  it("are the same for tasks whose environment/ is the same, whatever their names and other files", async () => {
    const env = { Dockerfile: "FROM debian:bookworm-slim\nCOPY seed.txt /app/\n", "seed.txt": "seed\n" };
    const a = task("a", env, "First task.\n");
    const b = task("b", env, "Second task, other words.\n");
    expect(await taskDigest(a)).not.toBe(await taskDigest(b));
    expect(await key(a)).toBe(await key(b));
    expect(envImageTag(await key(a))).toMatch(/^evolve-env:[0-9a-f]{24}$/);
  });

  it("change with the Dockerfile and with any file of the build context", async () => {
    const base = await key(task("base", { Dockerfile: "FROM debian:bookworm-slim\nCOPY seed.txt /app/\n", "seed.txt": "seed\n" }));
    const otherDockerfile = await key(task("df", { Dockerfile: "FROM debian:bookworm-slim\nCOPY seed.txt /srv/\n", "seed.txt": "seed\n" }));
    const otherFile = await key(task("file", { Dockerfile: "FROM debian:bookworm-slim\nCOPY seed.txt /app/\n", "seed.txt": "other\n" }));
    const extraFile = await key(task("extra", { Dockerfile: "FROM debian:bookworm-slim\nCOPY seed.txt /app/\n", "seed.txt": "seed\n", ".dockerignore": "*.md\n" }));
    expect(new Set([base, otherDockerfile, otherFile, extraFile]).size).toBe(4);
  });
});

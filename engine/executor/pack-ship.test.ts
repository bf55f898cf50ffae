/**
 * Shipping a job's pack to the workers (issue 24 §1): the coordinator's `GET /pack` refuses a caller without the
 * job's worker token, and streams the pack file so that what arrives verifies against its manifest; a worker told
 * `--ship images` that receives a pack changed on its way stops with unpack's stable code before it claims a trial.
 * No container engine: the packs here carry tasks only (tests/pack.engine.test.ts packs images on podman).
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { Hono } from "hono";
import { afterAll, describe, expect, it } from "vitest";
import { datasetDigest } from "../dataset.ts";
import { entryBlocks, endBlocks, type TarEntry } from "../driver/tar.ts";
import type { Engine } from "../driver/types.ts";
import { EvolveError } from "../errors.ts";
import { MANIFEST_NAME, PACK_FORMAT, type PackManifest } from "../pack/manifest.ts";
import { readPack } from "../pack/read.ts";
import { serveFetch } from "../runtime.ts";
import { openStore } from "../store/index.ts";
import { coordinatorApp, WORKER_API, type CoordinatorDeps } from "./coordinator-api.ts";
import { runWorker } from "./worker.ts";

const scratch = mkdtempSync(join(tmpdir(), "evolve-ship-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const TOKEN = "t0ken";

/** A one-task pack file; `tamper` changes a member's bytes after the manifest recorded them. */
function packFile(name: string, tamper = false): string {
  const files: TarEntry[] = [
    { name: "tasks/t1/task.toml", type: "file", mode: 0o644, data: Buffer.from('[task]\nname = "demo/one"\n') },
    { name: "tasks/t1/instruction.md", type: "file", mode: 0o644, data: Buffer.from("Say hello.\n") },
  ];
  const digest = `sha256:${"0".repeat(64)}`;
  const manifest: PackManifest = {
    format: PACK_FORMAT,
    created_at: new Date().toISOString(),
    source: { kind: "job", ref: "J1" },
    dataset: { name: "demo", version: "1", digest: datasetDigest([{ name: "demo/one", digest }]), tasks: [{ name: "demo/one", digest, folder: "t1" }] },
    images: [],
    agents: [],
    members: files.map((f) => ({ path: f.name, size: f.data!.length, sha256: sha(Buffer.from(f.data!)) })),
  };
  if (tamper) files[1] = { ...files[1], data: Buffer.from("Say HELLO.\n") };
  const tar = Buffer.concat([...entryBlocks({ name: MANIFEST_NAME, type: "file", mode: 0o644, data: Buffer.from(JSON.stringify(manifest)) }), ...files.flatMap((f) => entryBlocks(f)), endBlocks()]);
  const file = join(scratch, name);
  writeFileSync(file, gzipSync(tar));
  return file;
}

/** The worker API with only what these tests call: a pack, and claims counted (every claim says the job is over). */
async function serve(pack: () => Promise<string>) {
  const counts = { pack: 0, claims: 0 };
  const deps = {
    token: TOKEN,
    claim: () => (counts.claims++, { lease: null, done: true }),
    pack: () => (counts.pack++, pack()),
  } as unknown as CoordinatorDeps;
  const app = new Hono().route(WORKER_API, coordinatorApp(deps));
  const server = await serveFetch((req) => app.fetch(req), { host: "127.0.0.1", port: 0 });
  return { url: `${server.url}${WORKER_API}`, counts, close: () => server.close() };
}

describe("GET /pack", () => {
  it("refuses a caller without the worker token, and serves a pack whose manifest verifies", async () => {
    const file = packFile("good.evolvepack");
    const s = await serve(async () => file);
    try {
      expect((await fetch(`${s.url}/pack`)).status).toBe(401);
      expect((await fetch(`${s.url}/pack`, { headers: { authorization: "Bearer wrong" } })).status).toBe(401);
      expect(s.counts.pack).toBe(0);
      const res = await fetch(`${s.url}/pack`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(res.status).toBe(200);
      const got = join(scratch, "got.evolvepack");
      writeFileSync(got, Buffer.from(await res.arrayBuffer()));
      const stage = join(scratch, "stage");
      mkdirSync(stage);
      const { manifest } = await readPack(got, stage);
      expect(manifest.dataset.tasks.map((t) => t.name)).toEqual(["demo/one"]);
    } finally {
      await s.close();
    }
  });

  it("answers a failed build with its code, for the worker to report", async () => {
    const s = await serve(async () => {
      throw new EvolveError("pack_image_failed", "podman save failed");
    });
    try {
      const res = await fetch(`${s.url}/pack`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(res.status).toBe(500);
      expect(await res.json()).toMatchObject({ code: "pack_image_failed" });
    } finally {
      await s.close();
    }
  });
});

describe("a worker with --ship images", () => {
  const engine = { list: async () => [], listNetworks: async () => [] } as unknown as Engine;

  it("stops with pack_digest_mismatch on a pack changed on its way, before it claims anything", async () => {
    const s = await serve(async () => packFile("tampered.evolvepack", true));
    const home = join(scratch, "worker-bad");
    try {
      const err = await runWorker({ url: s.url, token: TOKEN, workerId: "w1", home, engine, leaseSeconds: 30, ship: "images" }).catch((e) => e);
      expect(err).toBeInstanceOf(EvolveError);
      expect((err as EvolveError).code).toBe("pack_digest_mismatch");
      expect(s.counts.claims).toBe(0);
      // nothing of it was kept: no dataset published in the scratch store, no pack file left
      const store = openStore(home);
      expect(store.getDataset("demo", "1")).toBeFalsy();
      await store.close();
      expect(existsSync(join(home, "job.evolvepack"))).toBe(false);
    } finally {
      await s.close();
    }
  });

  it("claims as before with --ship none: no pack is asked for", async () => {
    const s = await serve(async () => packFile("unused.evolvepack"));
    try {
      expect(await runWorker({ url: s.url, token: TOKEN, workerId: "w2", home: join(scratch, "worker-none"), engine, leaseSeconds: 30, ship: "none" })).toBe(0);
      expect(s.counts).toEqual({ pack: 0, claims: 1 });
    } finally {
      await s.close();
    }
  });
});

/**
 * Issue 20 §4: a build reaches nothing on the host, whatever its Dockerfile says. The builder itself (not only its
 * RUN steps) runs on the guarded network (engine/driver/engine.ts builderNetns), so an ADD URL spelt so no parser
 * sees it (through ARG, ENV, an `# escape=` directive with a continued ADD) and a FROM or `COPY --from` naming a
 * registry on the host's loopback all leave from a namespace where 127.0.0.1 is not the host. The host's side is a
 * real HTTP server on 127.0.0.1 serving a secret page: no request of any build may reach it. The builder is called
 * directly (engine.build), past the task validator; a compose task's build is run as a trial, with a hostile
 * solve.sh that hands the page in as its answer, beside the honest twin that fetches from "the internet".
 */
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openEngine } from "../engine/engine-choice.ts";
import type { Engine } from "../engine/driver/types.ts";
import { EvolveError } from "../engine/errors.ts";
import { newId, openStore, type Store } from "../engine/store/index.ts";
import { taskDigest } from "../engine/task/digest.ts";
import { runTrial, settleRemovals } from "../engine/trial/run.ts";
import { startOutside, type Outside } from "./support/outside.ts";

const FIXTURES = join(__dirname, "..", "fixtures", "tasks", "trials");
/** What the host's loopback service serves: the answer oracle-ok's verifier wants, so reading it would score 1. */
const PAGE = "hello, world";

let home: string;
let engine: Engine;
let store: Store;
let server: Server;
let port: number;
/**
 * Every connection the host's loopback service got, and the path of each request on it: a registry client opens
 * TLS first, which never makes an HTTP request, so connections are what is counted.
 */
const hits: string[] = [];
let outside: Outside;
const dirs: string[] = [];

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-build-hostlocal-"));
  engine = await openEngine({ home });
  store = openStore(home);
  server = createServer((req, res) => {
    hits.push(String(req.url));
    res.end(`${PAGE}\n`);
  });
  server.on("connection", () => hits.push("connection"));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as { port: number }).port;
  outside = await startOutside(PAGE, "198.18", { echoHost: false });
}, 60_000);

afterAll(async () => {
  await settleRemovals();
  server?.close();
  outside?.close();
  await store?.close();
  await engine?.close();
  if (home) rmSync(home, { recursive: true, force: true });
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A build context whose Dockerfile is `text`. */
function context(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), "evolve-hostlocal-ctx-"));
  dirs.push(dir);
  writeFileSync(join(dir, "Dockerfile"), text);
  return dir;
}

/** Builds `text`; the error it failed with (undefined when it built), the image removed either way. */
async function build(text: string): Promise<{ err: unknown; log: string[]; existed: boolean }> {
  const tag = `localhost/evolve-hostlocal:${newId().toLowerCase()}`;
  const log: string[] = [];
  const err = await engine.build({ context: context(text), tag, labels: {}, timeoutMs: 90_000, log: (l) => log.push(l) }).then(() => undefined, (e: unknown) => e);
  const existed = await engine.imageExists(tag);
  await engine.removeImage?.(tag);
  return { err, log, existed };
}

describe("a build's own fetches cannot reach the host's loopback", () => {
  const loop = () => `http://127.0.0.1:${port}/secret`;
  const shapes: [string, () => string][] = [
    ["ADD of a URL in an ARG", () => `FROM debian:bookworm-slim\nARG U=${loop()}\nADD \${U} /opt/page\nRUN cat /opt/page\n`],
    ["ADD of a URL in an ENV", () => `FROM debian:bookworm-slim\nENV U=${loop()}\nADD $U /opt/page\nRUN cat /opt/page\n`],
    ["an escape directive with a continued ADD", () => `# escape=\`\nFROM debian:bookworm-slim\nADD \`\n    ${loop()} /opt/page\nRUN cat /opt/page\n`],
    // spelt through ARG, which the early refusal of literal references (hostLocalImageRefs) does not read
    ["FROM a registry on the host's loopback", () => `ARG R=127.0.0.1:${port}\nFROM \${R}/evil/base:1\nRUN true\n`],
    ["COPY --from a registry on the host's loopback", () => `FROM debian:bookworm-slim\nARG R=127.0.0.1:${port}\nCOPY --from=\${R}/evil/src:1 /etc/hostname /opt/page\n`],
  ];

  it.each(shapes)("%s: the build fails, no image, and the host's service got no request", async (_name, text) => {
    const before = hits.length;
    const { err, log, existed } = await build(text());
    expect((err as EvolveError | undefined)?.code, log.join("\n")).toBe("build_failed");
    expect(existed).toBe(false);
    expect(log.join("\n")).not.toContain(PAGE);
    expect(hits.slice(before)).toEqual([]);
  }, 120_000);

  it("a literal FROM or --from naming the host's loopback is refused early, with its line, before any pull", async () => {
    const before = hits.length;
    for (const [text, line] of [
      [`FROM 127.0.0.1:${port}/evil/base:1\nRUN true\n`, 1],
      [`FROM debian:bookworm-slim\nCOPY --from=localhost:${port}/evil/src:1 /etc/hostname /opt/page\n`, 2],
      [`FROM debian:bookworm-slim\nRUN --mount=type=bind,from=[::1]:${port}/evil/src:1,target=/m true\n`, 2],
    ] as const) {
      const { err } = await build(text);
      expect((err as EvolveError).code).toBe("build_failed");
      expect((err as EvolveError).message).toMatch(new RegExp(`Dockerfile line ${line}: \\S+:${port}/evil/\\S+ names a registry on this host; builds reach nothing on the host \\(no pull ran\\)`));
    }
    expect(hits.slice(before)).toEqual([]);
  }, 120_000);

  it("the same ADD through an ARG still fetches from the internet, and RUN steps reach it too", async () => {
    const before = hits.length;
    const { err, log } = await build(`FROM debian:bookworm-slim\nARG U=${outside.url}page\nADD \${U} /opt/page\nRUN cat /opt/page && echo && python3 -c "import urllib.request; print('run', urllib.request.urlopen('${outside.url}').read().decode())"\n`);
    expect(err, log.join("\n")).toBeUndefined();
    expect(log).toContain(PAGE);
    expect(log).toContain(`run ${PAGE}`);
    expect(hits.slice(before)).toEqual([]);
  }, 120_000);
});

describe("compose builds", () => {
  /** oracle-ok with a compose `main` built from a Dockerfile that ADDs `url` (through an ARG) to /opt/page, and a solve.sh that answers with it. */
  async function composeTrial(url: string) {
    const parent = mkdtempSync(join(tmpdir(), "evolve-hostlocal-task-"));
    dirs.push(parent);
    const dir = join(parent, "compose-add");
    cpSync(join(FIXTURES, "oracle-ok"), dir, { recursive: true });
    writeFileSync(join(dir, "environment", "Dockerfile"), `FROM debian:bookworm-slim\nWORKDIR /app\nARG U=${url}\nADD \${U} /opt/page\n`);
    writeFileSync(join(dir, "environment", "docker-compose.yaml"), "services:\n  main:\n    build: .\n");
    writeFileSync(join(dir, "solution", "solve.sh"), "#!/bin/bash\ncat /opt/page > /app/hello.txt\n");
    const id = newId();
    return runTrial(
      { trialId: id, jobId: "JOB-HOSTLOCAL", home, task: { dir, digest: await taskDigest(dir), name: "compose-add" }, agent: { name: "oracle" }, timeoutMultiplier: 1, secrets: {} },
      { engine, store },
    );
  }

  it("a compose service's build cannot hand the agent the host's page: the trial is not scored; its honest twin scores 1", async () => {
    const before = hits.length;
    const hostile = await composeTrial(`http://127.0.0.1:${port}/page`);
    expect(hostile.exception?.type).toBe("EnvironmentBuildError");
    expect(hostile.rewards).toBeFalsy();
    expect(hits.slice(before)).toEqual([]);
    const honest = await composeTrial(`${outside.url}page`);
    expect(honest.exception, JSON.stringify(honest.exception)).toBeFalsy();
    expect(honest.rewards?.reward).toBe(1);
  }, 240_000);
});

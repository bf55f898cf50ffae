/**
 * The Kubernetes launcher (issue 24 §3) against a recorded Kubernetes API, without a cluster: a local server plays
 * the exchanges under fixtures/kubernetes/ (written from the Kubernetes API reference: batch/v1 Job create, get with
 * its conditions, pods by label selector, a pod's log, delete with a Status, 409 AlreadyExists, 403 Forbidden, 422
 * Invalid) in order and checks each request exactly — method, path, query, content type, bearer token and the
 * manifest deep-equal to the recorded one — so the manifests sent are the ones the API was recorded accepting. The
 * token reaches the pods through the Secret only; refusals carry stable codes; `--dry-run` writes the same manifests.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { expectCode } from "../../tests/support/expect-code.ts";
import { KubernetesLauncher, loadKubeconfig } from "./kubernetes.ts";
import type { WorkerBatch } from "./types.ts";

const fixtures = fileURLToPath(new URL("../../fixtures/kubernetes/", import.meta.url));
const fixture = (name: string) => JSON.parse(readFileSync(join(fixtures, `${name}.json`), "utf8"));

const NAME = "evolve-01j9zk3m7q8r2t4v6x8y0a2c4e-a1b2c3";
const IMAGE = "registry.example.com/evolve-worker:0.1.0";
const batch: WorkerBatch = { jobId: "01J9ZK3M7Q8R2T4V6X8Y0A2C4E", workers: 3, coordinatorUrl: "http://10.0.0.5:4000/executor", token: "s3cret-token", leaseSeconds: 30, logDir: "/unused" };

interface Recorded {
  method: string;
  path: string;
  query: Record<string, string>;
  contentType?: string;
  authorization?: string;
  body?: unknown;
}

/** Serves `script`'s exchanges in order; every request is recorded as seen, for an exact comparison. */
async function recordedApi(script: string[]): Promise<{ url: string; seen: Recorded[]; expected: Recorded[]; server: Server }> {
  const exchanges = script.map(fixture);
  const seen: Recorded[] = [];
  const read = (req: IncomingMessage) =>
    new Promise<string>((resolve) => {
      let s = "";
      req.on("data", (c) => (s += c));
      req.on("end", () => resolve(s));
    });
  const server = createServer(async (req, res) => {
    const url = new URL(req.url!, "http://x");
    const text = await read(req);
    seen.push({
      method: req.method!,
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      ...(req.headers["content-type"] ? { contentType: req.headers["content-type"] } : {}),
      authorization: req.headers.authorization,
      ...(text ? { body: JSON.parse(text) } : {}),
    });
    const next = exchanges[seen.length - 1];
    if (!next) return res.writeHead(500).end("no exchange left");
    const r = next.response;
    if (r.text !== undefined) res.writeHead(r.status, { "Content-Type": r.contentType }).end(r.text);
    else res.writeHead(r.status, { "Content-Type": "application/json" }).end(JSON.stringify(r.body));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  servers.push(server);
  const expected = exchanges.map((e) => ({ ...e.request, authorization: "Bearer kube-token" }));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, expected, server };
}
const servers: Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

function kubeconfig(server: string, user = "  user:\n    token: kube-token\n"): string {
  const dir = mkdtempSync(join(tmpdir(), "evolve-kubeconfig-"));
  const file = join(dir, "config");
  writeFileSync(
    file,
    `apiVersion: v1\nkind: Config\ncurrent-context: evals\nclusters:\n- name: c\n  cluster:\n    server: ${server}\ncontexts:\n- name: evals\n  context:\n    cluster: c\n    user: u\n    namespace: evals\nusers:\n- name: u\n${user}`,
  );
  return file;
}

const launcher = (server: string, image = IMAGE) => new KubernetesLauncher({ image, kubeconfig: kubeconfig(server), suffix: () => "a1b2c3" });

describe("kubernetes launcher against the recorded API", () => {
  it("submits a Secret and an Indexed Job exactly as recorded; the token is in the Secret only, the pods take it by valueFrom", async () => {
    const api = await recordedApi(["secret-create-201", "job-create-201"]);
    expect(await launcher(api.url).submit(batch)).toBe(NAME);
    expect(api.seen).toEqual(api.expected);
    const job = api.seen[1].body as any;
    expect(JSON.stringify(job)).not.toContain("s3cret-token");
    expect(JSON.stringify(job)).not.toContain("10.0.0.5");
    const env = job.spec.template.spec.containers[0].env;
    expect(env.find((e: any) => e.name === "EVOLVE_WORKER_TOKEN")).toEqual({ name: "EVOLVE_WORKER_TOKEN", valueFrom: { secretKeyRef: { name: NAME, key: "token" } } });
    expect((api.seen[0].body as any).stringData).toEqual({ coordinator: batch.coordinatorUrl, token: "s3cret-token" });
  });

  it("reads status from the pods' phases and the Job's conditions", async () => {
    const running = await recordedApi(["job-get-running", "pods-list"]);
    expect(await launcher(running.url).status(NAME)).toEqual([
      { id: `${NAME}-0-x7k2p`, state: "running", node: "node-a" },
      { id: `${NAME}-1-q9m4z`, state: "success", node: "node-b" },
      { id: `${NAME}-2-t3v8c`, state: "pending" },
    ]);
    expect(running.seen).toEqual(running.expected);
    const failed = await recordedApi(["job-get-failed", "pods-list"]);
    expect((await launcher(failed.url).status(NAME)).map((w) => w.state)).toEqual(["killed", "success", "killed"]);
    const complete = await recordedApi(["job-get-complete", "pods-list-empty"]);
    expect(await launcher(complete.url).status(NAME)).toEqual([{ id: NAME, state: "success" }]);
    expect(complete.seen).toEqual(complete.expected);
  });

  it("gathers the pods' logs (a pod still waiting shows empty)", async () => {
    const api = await recordedApi(["pods-list", "pod-log-0", "pod-log-1", "pod-log-2-400"]);
    const logs = await launcher(api.url).logs(NAME);
    expect(api.seen).toEqual(api.expected);
    expect(logs).toContain(`==> ${NAME}-0-x7k2p <==\n2026-12-06T13:30:05.120Z evolve-w0: pid 1`);
    expect(logs).toContain("the coordinator says the job is done");
    expect(logs).toContain(`==> ${NAME}-2-t3v8c <==\n`);
  });

  it("cancels with DELETE propagationPolicy=Background and removes the Secret; cancelling again is no error", async () => {
    const api = await recordedApi(["job-delete-200", "secret-delete-200", "job-delete-404", "secret-delete-404"]);
    const l = launcher(api.url);
    await l.cancel(NAME);
    await l.cancel(NAME);
    expect(api.seen).toEqual(api.expected);
  });

  it("refuses with stable codes: 403 Forbidden, 409 AlreadyExists (Secret cleaned up), 422 Invalid with its causes", async () => {
    const forbidden = await recordedApi(["secret-create-403"]);
    const e403 = await expectCode(() => launcher(forbidden.url).submit(batch), "kubernetes_forbidden");
    expect(e403.message).toContain('cannot create resource "secrets"');
    expect(forbidden.seen).toEqual(forbidden.expected);

    const conflict = await recordedApi(["secret-create-201", "job-create-409", "secret-delete-200"]);
    await expectCode(() => launcher(conflict.url).submit(batch), "kubernetes_conflict");
    expect(conflict.seen).toEqual(conflict.expected);

    const invalid = await recordedApi(["secret-create-201", "job-create-422", "secret-delete-200"]);
    const e422 = await expectCode(() => launcher(invalid.url, `${IMAGE} `).submit(batch), "kubernetes_invalid");
    expect(e422.message).toContain("spec.template.spec.containers[0].image: Invalid value");
    expect(invalid.seen).toEqual(invalid.expected);

    await expectCode(() => launcher("http://127.0.0.1:1").status(NAME), "executor_unavailable");
  });

  it("--dry-run writes the manifests submit would POST, with no token, and calls nothing", async () => {
    const dir = mkdtempSync(join(tmpdir(), "evolve-k8s-dry-"));
    const l = new KubernetesLauncher({ image: IMAGE, namespace: "evals", kubeconfig: join(dir, "none"), suffix: () => "a1b2c3" });
    const files = await l.dryRun(batch, dir);
    expect(files.map((f) => f.slice(dir.length + 1))).toEqual(["secret.json", "job.json"]);
    const [secret, job] = files.map((f) => readFileSync(f, "utf8"));
    expect(JSON.parse(job)).toEqual(fixture("job-create-201").request.body);
    expect(JSON.parse(secret).stringData.coordinator).toBe(batch.coordinatorUrl);
    expect(secret + job).not.toContain("s3cret-token");
  });

  it("reads the kubeconfig's current context: server, namespace, token or client certificate; refuses what it cannot use", async () => {
    const a = loadKubeconfig(kubeconfig("https://k8s.example:6443"));
    expect(a).toEqual({ server: "https://k8s.example:6443", namespace: "evals", token: "kube-token" });
    const cert = Buffer.from("CERT").toString("base64");
    const key = Buffer.from("KEY").toString("base64");
    const b = loadKubeconfig(kubeconfig("https://k8s.example:6443", `  user:\n    client-certificate-data: ${cert}\n    client-key-data: ${key}\n`));
    expect(b.cert?.toString()).toBe("CERT");
    expect(b.key?.toString()).toBe("KEY");
    await expectCode(() => loadKubeconfig(kubeconfig("https://k8s.example:6443", "  user:\n    exec:\n      command: aws\n")), "kubeconfig_invalid");
    await expectCode(() => loadKubeconfig(join(tmpdir(), "no-such-kubeconfig")), "kubeconfig_invalid");
    await expectCode(() => launcher("http://127.0.0.1:1").submit({ ...batch }).then(() => undefined), "executor_unavailable");
  });
});
